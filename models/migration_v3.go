package models

// schemaV3 backs the lifecycle rule "two DPUs never carry one loopback" in
// the ManagedHostNetworkConfig itself, not only in the allocations table:
// each loopback value appears in at most one network config (NULLs, i.e.
// unassigned families, are not compared). The plain indexes of migration 1
// on the same columns become redundant and are dropped.
const schemaV3 = `
DROP INDEX network_configs_v4
--;
DROP INDEX network_configs_v6
--;
CREATE UNIQUE INDEX network_configs_loopback_ip_key ON network_configs (loopback_ip)
--;
CREATE UNIQUE INDEX network_configs_loopback_ip_v6_key ON network_configs (loopback_ip_v6)
`
