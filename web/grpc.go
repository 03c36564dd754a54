package web

import (
	"context"
	"net/http"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/handlers"
	"github.com/ipledger/ipledger/proto/gen/forge/forgeconnect"
)

// GRPCRoute is one RPC of the Forge service and the least role it needs,
// the same role as the REST route that does the same thing. Like
// APIRoutes, the table is data: a test checks that it names every RPC of
// the service and nothing else.
type GRPCRoute struct {
	Procedure string
	Role      auth.Role
}

// GRPCRoutes lists every RPC of forge.Forge (docs/grpc.md).
func GRPCRoutes() []GRPCRoute {
	V, O, A := auth.RoleViewer, auth.RoleOperator, auth.RoleAdmin
	return []GRPCRoute{
		{forgeconnect.ForgeAddExpectedMachineProcedure, O},
		{forgeconnect.ForgeUpdateExpectedMachineProcedure, O},
		{forgeconnect.ForgeDeleteExpectedMachineProcedure, O},
		{forgeconnect.ForgeGetExpectedMachineProcedure, V},
		{forgeconnect.ForgeGetAllExpectedMachinesProcedure, V},
		{forgeconnect.ForgeReplaceAllExpectedMachinesProcedure, O},
		{forgeconnect.ForgeDeleteAllExpectedMachinesProcedure, A},
	}
}

// grpcCall carries a request's id into the RPC and its identity back out
// (for the request log), between the echo route and the interceptor.
type grpcCall struct {
	requestID string
	id        *handlers.Caller
	// ec is the echo request, for the trusted proxy's header and the
	// client certificate.
	ec echo.Context
}

type grpcCallKey struct{}

// grpcRoutes mounts the Forge service, server reflection (v1 and v1alpha)
// and health on the echo router, so gRPC requests pass the same request
// id, logging, metrics and NUL middleware as REST. Each RPC is its own
// route (its own metrics label). Reflection and health are public, like
// /healthz; every Forge RPC needs a bearer token.
func (s *Server) grpcRoutes() {
	roles := map[string]auth.Role{}
	for _, r := range GRPCRoutes() {
		roles[r.Procedure] = r.Role
	}
	_, forge := forgeconnect.NewForgeHandler(&handlers.Forge{A: s.a},
		connect.WithInterceptors(s.grpcAuth(roles)),
		connect.WithReadMaxBytes(handlers.MaxBodyBytes), connect.WithCompressMinBytes(1024))
	for _, r := range GRPCRoutes() {
		s.e.POST(r.Procedure, s.serveGRPC(forge))
	}
	reflector := grpcreflect.NewStaticReflector(forgeconnect.ForgeName, grpchealth.HealthV1ServiceName)
	for _, mount := range []func() (string, http.Handler){
		func() (string, http.Handler) { return grpcreflect.NewHandlerV1(reflector) },
		func() (string, http.Handler) { return grpcreflect.NewHandlerV1Alpha(reflector) },
		func() (string, http.Handler) { return grpchealth.NewHandler(&healthChecker{s: s}) },
	} {
		path, h := mount()
		s.e.POST(path+"*", s.serveGRPC(h))
	}
}

// serveGRPC runs a connect handler inside echo, bounded by the request
// timeout like every API request.
func (s *Server) serveGRPC(h http.Handler) echo.HandlerFunc {
	return func(c echo.Context) error {
		call := &grpcCall{requestID: requestID(c), ec: c}
		ctx, cancel := context.WithTimeout(context.WithValue(c.Request().Context(), grpcCallKey{}, call), s.cfg.RequestTimeout)
		defer cancel()
		h.ServeHTTP(c.Response(), c.Request().WithContext(ctx))
		if call.id != nil {
			handlers.SetCaller(c, call.id)
		}
		return nil
	}
}

// grpcAuth authenticates each Forge RPC with the REST door's own bearer
// check and role rule, and puts the same audit actor ("token:NAME") and
// request id on the context.
func (s *Server) grpcAuth(roles map[string]auth.Role) connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			role, ok := roles[req.Spec().Procedure]
			if !ok {
				return nil, connect.NewError(connect.CodeUnimplemented, nil)
			}
			call, _ := ctx.Value(grpcCallKey{}).(*grpcCall)
			var id *handlers.Caller
			var err error
			rid := ""
			if call != nil {
				rid = call.requestID
			}
			if h := req.Header().Get("Authorization"); h != "" {
				id, err = s.bearerIdentity(ctx, h, rid)
			} else if call != nil {
				// A client certificate (NICo's services carry SPIFFE
				// ids) or the trusted proxy's header.
				id, err = s.ambient(call.ec)
			}
			if err != nil {
				return nil, handlers.GRPCError(ctx, err)
			}
			if id == nil {
				return nil, handlers.GRPCError(ctx, fault.Errf(fault.CodeUnauthorized, "",
					"authentication required: send the metadata authorization: Bearer <token>, or a client certificate"))
			}
			if call != nil {
				call.id = id
			}
			if err := allow(id, role); err != nil {
				return nil, handlers.GRPCError(ctx, err)
			}
			return next(audit.WithActorRole(ctx, id.Name, string(id.Role), rid), req)
		}
	}
}

// healthChecker answers grpc.health.v1.Health like /readyz: SERVING while
// the database answers and its storage takes writes. The overall server ("") and forge.Forge are
// known services.
type healthChecker struct{ s *Server }

func (h *healthChecker) Check(ctx context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	if req.Service != "" && req.Service != forgeconnect.ForgeName {
		return nil, connect.NewError(connect.CodeNotFound, nil)
	}
	db, err := h.s.db.DB()
	if err == nil {
		err = db.PingContext(ctx)
	}
	if full, _ := database.StorageWatchOf(h.s.db).Full(); err != nil || full {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
}
