package ident

import (
	"errors"
	"strings"
	"testing"
)

func TestParseMAC(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"1a:1b:1c:1d:1e:1f":     "1a:1b:1c:1d:1e:1f",
		"1A-1B-1C-1D-1E-1F":     "1a:1b:1c:1d:1e:1f",
		" 02:00:00:00:00:01\t":  "02:00:00:00:00:01",
		"0a-00-00-00-09-01":     "0a:00:00:00:09:01",
		"aA:bB:cC:dD:eE:fF":     "aa:bb:cc:dd:ee:ff",
		"02-00:00:00:00:01":     "", // mixed separators: the decided case
		"02:00:00:00:00-01":     "",
		"02:00-00:00:00:01":     "",
		"0200.0000.0001":        "", // Cisco's grouping
		"020000000001":          "", // bare hex
		"02.00.00.00.00.01":     "",
		"02:00:00:00:00:0g":     "",
		"02:00:00:00:00:01:02":  "",
		"2:00:00:00:00:01":      "",
		"02:00:00:00:00:001":    "",
		"":                      "",
		"02::00:00:00:00:01":    "",
		"02:00:00:00:00:01\x00": "",
	} {
		got, err := ParseMAC(in)
		if want == "" {
			if !errors.Is(err, ErrMAC) {
				t.Errorf("ParseMAC(%q) = %q, %v; want ErrMAC", in, got, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("ParseMAC(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestValidSerial(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]bool{
		"MT2309X00011":          true,
		"SN-0001_a.b":           true,
		strings.Repeat("x", 64): true,
		strings.Repeat("x", 65): false,
		"":                      false,
		" MT1":                  false,
		"MT 1":                  false,
		"MT/1":                  false,
		"MTé":                   false,
	} {
		if got := ValidSerial(in); got != want {
			t.Errorf("ValidSerial(%q) = %t, want %t", in, got, want)
		}
	}
}
