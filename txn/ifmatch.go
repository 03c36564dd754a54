package txn

import (
	"fmt"
	"strings"

	"github.com/ipledger/ipledger/fault"
)

// IfMatch is an optimistic-concurrency precondition: the record versions a
// writer accepts (the If-Match header). Empty matches every version (no
// If-Match, or If-Match: *); a version that matches none is 412
// stale_version.
type IfMatch []int64

func (m IfMatch) Check(what string, v int64) error {
	if len(m) == 0 {
		return nil
	}
	for _, x := range m {
		if x == v {
			return nil
		}
	}
	return fault.Errf(fault.CodeStaleVersion, "", "%s is at version %d, not %s: it changed since it was read; read it again and retry", what, v, m.String())
}

func (m IfMatch) String() string {
	var s []string
	for _, v := range m {
		if v < 1 {
			s = append(s, "a tag that is not a version")
			continue
		}
		s = append(s, fmt.Sprint(v))
	}
	return strings.Join(s, " or ")
}
