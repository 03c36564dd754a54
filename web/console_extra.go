package web

// consoleExtraRoutes are the console routes of ExpectedMachines, machines
// and DPU bindings.
func (s *Server) consoleExtraRoutes() []Route { return nil }
