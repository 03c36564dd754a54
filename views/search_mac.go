package views

import (
	"strings"

	"github.com/ipledger/ipledger/ident"
)

// MACRespelled returns the MAC address q spells in a grouping ipledger
// does not read — Cisco's three dot-separated groups of four hex digits
// (0a10.0000.0005) or twelve bare hex digits (0a1000000005) — in the form
// ipledger reads (0a:10:00:00:00:05), else "". Search still reads MACs
// only through ident.ParseMAC (one rule per identifier); the answer only
// tells the operator who pasted a switch's spelling what to type instead
// of "Nothing matches".
func MACRespelled(q string) string {
	q = strings.TrimSpace(q)
	var hex string
	switch {
	case len(q) == 14 && q[4] == '.' && q[9] == '.':
		hex = q[0:4] + q[5:9] + q[10:14]
	case len(q) == 12:
		hex = q
	default:
		return ""
	}
	var b strings.Builder
	for i := 0; i < 12; i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(hex[i : i+2])
	}
	mac, err := ident.ParseMAC(b.String())
	if err != nil {
		return ""
	}
	return mac
}
