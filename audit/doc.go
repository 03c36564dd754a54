// Package audit is who changed what: the actor of a change (carried in a
// context), the audit event each change writes in its transaction, the
// event as the API shows it, and the audit log's read (GET
// /api/v1/events, the console's audit log, dashboard and machine
// History). The change feed numbers the same events (package feed).
package audit
