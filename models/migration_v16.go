package models

// schemaV16 indexes the ExpectedMachine look-up of every site-explorer
// report: a report's host is matched to its ExpectedMachine by BMC MAC in
// any case (lower(bmc_mac_address)), which without this index read every
// ExpectedMachine of the site, so that a report cost more the larger the
// site was declared.
const schemaV16 = `
CREATE INDEX expected_machines_bmc_mac_lower ON expected_machines (lower(bmc_mac_address))
`
