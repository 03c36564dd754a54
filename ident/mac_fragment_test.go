package ident

import (
	"slices"
	"strings"
	"testing"
)

// TestMACFragments: every notation of part of a MAC (':' or '-' between
// octets, Cisco's '.' between four-digit groups, bare hex), in any case,
// whole or partial, on an octet boundary or inside one, is spelled as the
// stored form would hold it; anything else is no fragment.
func TestMACFragments(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]string{
		// ':' and '-': the separators say where octets begin.
		"00:50:0":             {"00:50:0"},
		"00-50-0":             {"00:50:0"},
		"00-50-0A":            {"00:50:0a"},
		"0-50-0":              {"0:50:0"},
		"0A-50":               {"0a:50"},
		"a-5":                 {"a:5"},
		"00-50-":              {"00:50:"},
		"-50-00":              {":50:00"},
		" 0A-00-00-00-50-03 ": {"0a:00:00:00:50:03"},
		"0a:00:00:00:50:03":   {"0a:00:00:00:50:03"},
		// Cisco: groups of four begin on an octet.
		"0050.0":         {"00:50:0"},
		"0050.00AA.BBCC": {"00:50:00:aa:bb:cc"},
		"050.0":          {"0:50:0"},
		"50.00a":         {"50:00:a"},
		"5.0000.1":       {"5:00:00:1"},
		"0050.":          {"00:50:"},
		".0050":          {":00:50"},
		// Bare hex: on a boundary or inside an octet.
		"00500":        {"00:50:0", "0:05:00"},
		"0050":         {"00:50", "0:05:0"},
		"AB":           {"ab", "a:b"},
		"a":            {"a"},
		"005000aabbcc": {"00:50:00:aa:bb:cc", "0:05:00:0a:ab:bc:c"},
		// Not part of a MAC.
		"":                     nil,
		"00-50:00":             nil, // two separators
		"00.50-00":             nil,
		"000-50":               nil, // a group of three between '-'
		"00-5-00":              nil, // a group of one inside
		"00--50":               nil,
		"00.5.00":              nil, // Cisco groups inside are four wide
		"00500.0":              nil,
		"-":                    nil,
		"..":                   nil,
		"005000aabbccd":        nil, // thirteen digits
		"00-50-00-aa-bb-cc-dd": nil, // seven octets
		"0050.00aa.bbcc.dd":    nil,
		"00-50-00-aa-bb-cc-":   nil, // a separator after the last octet
		"rack-10-20":           nil,
		"0g":                   nil,
		"00 50":                nil,
		"10.0.0.1":             nil,
	} {
		if got := MACFragments(in); !slices.Equal(got, want) {
			t.Errorf("MACFragments(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestMACFragmentsOfEveryPart: every substring of a MAC's ':' spelling
// that holds a digit, written with '-' in upper case, is spelled back as
// it is (alone when it holds a separator); every run of its bare hex
// digits has a spelling inside it.
func TestMACFragmentsOfEveryPart(t *testing.T) {
	t.Parallel()
	const mac = "0a:1b:2c:3d:4e:5f"
	hex := strings.ReplaceAll(mac, ":", "")
	for i := 0; i < len(mac); i++ {
		for j := i + 1; j <= len(mac); j++ {
			part := mac[i:j]
			if strings.Trim(part, ":") == "" {
				continue
			}
			got := MACFragments(strings.ToUpper(strings.ReplaceAll(part, ":", "-")))
			if !slices.Contains(got, part) || (strings.Contains(part, ":") && len(got) != 1) {
				t.Errorf("MACFragments of %q with '-' = %q, want [%q]", part, got, part)
			}
		}
	}
	for i := 0; i < len(hex); i++ {
		for j := i + 1; j <= len(hex); j++ {
			found := false
			for _, f := range MACFragments(hex[i:j]) {
				found = found || strings.Contains(mac, f)
			}
			if !found {
				t.Errorf("MACFragments(%q) = %q: none is in %s", hex[i:j], MACFragments(hex[i:j]), mac)
			}
		}
	}
}
