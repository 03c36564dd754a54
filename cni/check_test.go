package cni

import (
	"encoding/json"
	"testing"
)

// checkVersions are the versions that have CHECK (0.4.0 and later; skel
// refuses CHECK below 0.4.0 with code 1, see the binary tests).
var checkVersions = []string{"0.4.0", "1.0.0", "1.1.0"}

// withPrevResult returns conf with prevResult set to the raw JSON prev.
func withPrevResult(t *testing.T, conf []byte, prev []byte) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	mustUnmarshal(t, conf, &m)
	m["prevResult"] = prev
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCHECK compares prevResult with the configured addresses at every
// version that has CHECK. prevResult is what ADD printed for prevIPAM.
func TestCHECK(t *testing.T) {
	configured := addressesIPAM(entry("fd00:10:ff01:0:1::1/96", "fe80::1"), entry("172.20.1.7/32", ""))
	for _, tc := range []struct {
		name     string // the rule
		ipam     string
		prevIPAM string
		code     uint // 0: CHECK passes
		msg      []string
	}{
		{
			name: "prevResult carrying exactly the configured addresses passes",
			ipam: configured, prevIPAM: configured,
		},
		{
			name: "extra addresses in prevResult from other plugins pass",
			ipam: configured,
			prevIPAM: addressesIPAM(entry("10.99.0.1/24", ""), entry("fd00:10:ff01:0:1::1/96", "fe80::1"),
				entry("172.20.1.7/32", ""), entry("fd00:99::1/64", "")),
		},
		{
			name:     "a gateway filled in by the main plugin where none is configured passes",
			ipam:     configured,
			prevIPAM: addressesIPAM(entry("fd00:10:ff01:0:1::1/96", "fe80::1"), entry("172.20.1.7/32", "172.20.0.1")),
		},
		{
			name: "a missing address fails naming the entry",
			ipam: configured, prevIPAM: addressesIPAM(entry("fd00:10:ff01:0:1::1/96", "fe80::1")),
			code: ErrAddressMismatch,
			msg:  []string{"ipam.addresses[1] 172.20.1.7/32 is missing from prevResult"},
		},
		{
			name: "another prefix length fails",
			ipam: configured, prevIPAM: addressesIPAM(entry("fd00:10:ff01:0:1::1/64", "fe80::1"), entry("172.20.1.7/32", "")),
			code: ErrAddressMismatch,
			msg:  []string{"ipam.addresses[0] fd00:10:ff01:0:1::1/96: prevResult carries fd00:10:ff01:0:1::1/64"},
		},
		{
			name: "another gateway fails",
			ipam: configured, prevIPAM: addressesIPAM(entry("fd00:10:ff01:0:1::1/96", "fe80::2"), entry("172.20.1.7/32", "")),
			code: ErrAddressMismatch,
			msg:  []string{"ipam.addresses[0] fd00:10:ff01:0:1::1/96: prevResult gateway fe80::2, configured fe80::1"},
		},
		{
			name: "a missing gateway fails",
			ipam: configured, prevIPAM: addressesIPAM(entry("fd00:10:ff01:0:1::1/96", ""), entry("172.20.1.7/32", "")),
			code: ErrAddressMismatch,
			msg:  []string{"ipam.addresses[0] fd00:10:ff01:0:1::1/96: gateway fe80::1 is missing from prevResult"},
		},
		{
			name: "every difference is listed in configured order",
			ipam: configured, prevIPAM: addressesIPAM(entry("fd00:10:ff01:0:1::1/128", "fe80::2")),
			code: ErrAddressMismatch,
			msg: []string{
				"ipam.addresses[0] fd00:10:ff01:0:1::1/96: prevResult carries fd00:10:ff01:0:1::1/128; " +
					"ipam.addresses[0] fd00:10:ff01:0:1::1/96: prevResult gateway fe80::2, configured fe80::1; " +
					"ipam.addresses[1] 172.20.1.7/32 is missing from prevResult",
			},
		},
		{
			name: "legacy static_ip passes with its /64",
			ipam: `{"type":"galactic-ipam","static_ip":"fd00:180:62::c8"}`, prevIPAM: addressesIPAM(entry("fd00:180:62::c8/64", "")),
		},
		{
			name: "legacy static_ip fails when prevResult carries another prefix length",
			ipam: `{"type":"galactic-ipam","static_ip":"fd00:180:62::c8"}`, prevIPAM: addressesIPAM(entry("fd00:180:62::c8/128", "")),
			code: ErrAddressMismatch,
			msg:  []string{"ipam.static_ip fd00:180:62::c8/64: prevResult carries fd00:180:62::c8/128"},
		},
	} {
		for _, v := range checkVersions {
			t.Run(tc.name+"/"+v, func(t *testing.T) {
				prev, err := runAdd(t, netConf(v, tc.prevIPAM))
				if err != nil {
					t.Fatalf("building prevResult: %v", err)
				}
				err = Check(cmdArgs(withPrevResult(t, netConf(v, tc.ipam), prev)))
				if tc.code == 0 {
					if err != nil {
						t.Fatalf("CHECK failed: %v", err)
					}
					return
				}
				wantCode(t, err, tc.code, tc.msg...)
			})
		}
	}
}

// TestCHECKAcceptsAMainPluginResult feeds CHECK the kind of prevResult a
// runtime passes after bridge: interfaces, interface indexes and routes.
func TestCHECKAcceptsAMainPluginResult(t *testing.T) {
	prev := []byte(`{"cniVersion":"1.1.0",
		"interfaces":[{"name":"cni0","mac":"aa:bb:cc:dd:ee:01"},{"name":"veth1","mac":"aa:bb:cc:dd:ee:02"},{"name":"eth0","mac":"aa:bb:cc:dd:ee:03","sandbox":"/var/run/netns/ctr"}],
		"ips":[{"interface":2,"address":"fd00:10:ff01:0:1::1/96","gateway":"fe80::1"},{"interface":2,"address":"172.20.1.7/32"}],
		"routes":[{"dst":"::/0"},{"dst":"0.0.0.0/0"},{"dst":"192.168.0.0/16","gw":"172.20.0.9"}]}`)
	conf := netConf("1.1.0", addressesIPAM(entry("fd00:10:ff01:0:1::1/96", "fe80::1"), entry("172.20.1.7/32", "")))
	if err := Check(cmdArgs(withPrevResult(t, conf, prev))); err != nil {
		t.Fatal(err)
	}
}

// TestCHECKNeedsADecodablePrevResult: without prevResult CHECK has nothing
// to compare (code 7); an undecodable one is code 6; never code 999.
func TestCHECKNeedsADecodablePrevResult(t *testing.T) {
	ipam := addressesIPAM(entry("10.0.0.1/32", ""))
	for _, v := range checkVersions {
		t.Run(v, func(t *testing.T) {
			wantCode(t, Check(cmdArgs(netConf(v, ipam))), 7, "CHECK needs prevResult")
			wantCode(t, Check(cmdArgs(withPrevResult(t, netConf(v, ipam), []byte(`null`)))), 7, "CHECK needs prevResult")
			wantCode(t, Check(cmdArgs(withPrevResult(t, netConf(v, ipam), []byte(`"10.0.0.1/32"`)))), 6, "prevResult is not a JSON object")
			wantCode(t, Check(cmdArgs(withPrevResult(t, netConf(v, ipam), []byte(`{"ips":[{"address":"not-a-cidr"}]}`)))), 6, "cannot decode prevResult")
		})
	}
}

// TestDELGCSTATUSHaveNothingToDo: no state is kept, so DEL, GC and STATUS
// succeed without output, even for an ipam object that ADD would refuse
// (a container must always be removable).
func TestDELGCSTATUSHaveNothingToDo(t *testing.T) {
	for _, ipam := range []string{
		addressesIPAM(entry("fd00:10:ff01:0:1::1/96", "fe80::1"), entry("172.20.1.7/32", "")),
		`{"type":"galactic-ipam","static_ip":"fd00::1"}`,
		`{"type":"galactic-ipam","addresses":[{"address":"10.0.0.1"}],"static_ip":"10.0.0.1"}`,
	} {
		for _, v := range allVersions {
			args := cmdArgs(netConf(v, ipam))
			if err := Del(args); err != nil {
				t.Errorf("DEL %s %s: %v", v, ipam, err)
			}
			if err := GC(args); err != nil {
				t.Errorf("GC %s %s: %v", v, ipam, err)
			}
			if err := Status(args); err != nil {
				t.Errorf("STATUS %s %s: %v", v, ipam, err)
			}
		}
	}
}

// TestFuncsWiresEveryCommand: the binary serves every command of spec 1.1.0.
func TestFuncsWiresEveryCommand(t *testing.T) {
	f := Funcs()
	if f.Add == nil || f.Del == nil || f.Check == nil || f.GC == nil || f.Status == nil {
		t.Fatalf("a command is not wired: %+v", f)
	}
	if got := SupportedVersions.SupportedVersions(); len(got) != 7 || got[0] != "0.1.0" || got[6] != "1.1.0" {
		t.Fatalf("supported versions %v", got)
	}
}
