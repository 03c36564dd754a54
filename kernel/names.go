package kernel

import "regexp"

// PoolNameRE is the rule of a pool's name (docs/pools.md).
var PoolNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
