package views

import "testing"

func TestMACRespelled(t *testing.T) {
	for q, want := range map[string]string{
		"0a10.0000.0005":    "0a:10:00:00:00:05",
		" 0A10.0000.00FF ":  "0a:10:00:00:00:ff",
		"0a1000000005":      "0a:10:00:00:00:05",
		"0a:10:00:00:00:05": "",
		"MT2601X00003":      "",
		"0a10.0000.000g":    "",
		"0a10-0000-0005":    "",
		"r01-u05":           "",
		"12345678901z":      "",
	} {
		if got := MACRespelled(q); got != want {
			t.Errorf("MACRespelled(%q) = %q, want %q", q, got, want)
		}
	}
}
