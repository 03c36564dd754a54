// Package kernel is what every domain package of ipledger shares: the
// error type and its codes (docs/api.md), the actor of a change, the
// audit-event writer and the audit log's read, the write transaction
// with its retry loop, and the mapping of database errors to those
// codes. It imports nothing of ipledger but models.
package kernel
