// Package ident holds the one rule of each identifier ipledger takes: a
// MAC address, a serial number and a pool's name. Every door — the REST
// API, the gRPC API, the CLI, site-explorer reports, the console's forms
// and its search — reads them through this package, so that a value one door
// accepts no other refuses (docs/api.md "MAC addresses", docs/decisions.md
// "One rule per identifier"). It imports nothing of ipledger.
package ident

import (
	"errors"
	"regexp"
	"strings"
)

// MACRule says in messages what ParseMAC accepts.
const MACRule = "six hex octets separated by ':' or '-' (one separator throughout), e.g. 1a:1b:1c:1d:1e:1f"

// ErrMAC is returned by ParseMAC for anything but a MAC address.
var ErrMAC = errors.New("not a MAC address: want " + MACRule)

// ParseMAC reads a 48-bit MAC address: six two-digit hex octets in any
// case, separated all by ':' or all by '-', blanks around it ignored. It
// returns the address lower-case with ':' (1a:1b:1c:1d:1e:1f), the form
// ipledger stores and shows. Mixed separators (02-00:00:00:00:01), other
// groupings (Cisco's 0200.0000.0001, bare hex digits) and longer addresses
// are refused: each is a second spelling some reader would take
// differently.
func ParseMAC(s string) (string, error) {
	s = strings.TrimSpace(s)
	if len(s) != 17 {
		return "", ErrMAC
	}
	sep := s[2]
	if sep != ':' && sep != '-' {
		return "", ErrMAC
	}
	var b [17]byte
	for i := 0; i < 17; i++ {
		c := s[i]
		if i%3 == 2 {
			if c != sep {
				return "", ErrMAC
			}
			b[i] = ':'
			continue
		}
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
		case c >= 'A' && c <= 'F':
			c += 'a' - 'A'
		default:
			return "", ErrMAC
		}
		b[i] = c
	}
	return string(b[:]), nil
}

// SerialRule says in messages what ValidSerial accepts.
const SerialRule = "1 to 64 letters, digits, '_', '.' or '-'"

var serialRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// ValidSerial reports whether s is a serial number (of a DPU or a chassis
// as ipledger stores it): 1 to 64 letters, digits, '_', '.' or '-', taken
// as given (callers trim blanks first where their door allows them).
func ValidSerial(s string) bool { return serialRE.MatchString(s) }

var poolNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidPoolName reports whether s is a pool's name (docs/pools.md): 1 to
// 64 letters, digits, '.', '_' or '-', starting with a letter or a digit.
// A webhook's name follows the same rule.
func ValidPoolName(s string) bool { return poolNameRE.MatchString(s) }
