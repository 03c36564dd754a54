package audit

// ObjectTypes is every object_type an audit event is written with, in
// the order the console's audit-log filter offers them. The audit log and
// the change feed filter on these names; TestObjectTypesAreThoseWritten
// holds the list to the object types the code writes.
var ObjectTypes = []string{"pool", "allocation", "expected_machine", "machine", "webhook", "token", "session"}
