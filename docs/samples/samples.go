// Package samples embeds the sample files of the documentation (a NICo
// site configuration and a NICo expected-machines file), so that the demo
// site and the tests load the very files the README tells operators to
// load.
package samples

import _ "embed"

// SiteConfig is site-config.toml: a NICo site configuration whose
// [pools.*] tables are the demo site's pools.
//
//go:embed site-config.toml
var SiteConfig string

// ExpectedMachines is expected-machines.json: the NICo expected-machines
// file with expected_dpus (two records of rack r01).
//
//go:embed expected-machines.json
var ExpectedMachines string
