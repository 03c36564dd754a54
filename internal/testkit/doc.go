// Package testkit holds the helpers every test of ipledger shares: the
// assertion on a *fault.Error's code and field, polling for a condition
// with a deadline, and a settable clock. It imports nothing of ipledger
// but fault, so the internal tests of every domain package can use it.
// The builders of a whole site (pools, ExpectedMachines, reports) and of a
// running server are in its sub-packages sitekit and serverkit.
//
// Only test files import testkit and its sub-packages (.golangci.yml).
package testkit
