package auth

import (
	"errors"
	"net/http/httptest"
	"testing"
)

func TestTrustedProxy(t *testing.T) {
	t.Parallel()
	trusted, err := ParseCIDRs("10.0.0.0/24, 192.0.2.7, fd00::/64")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{UserHeader: "X-Forwarded-User", GroupsHeader: "X-Forwarded-Groups", Trusted: trusted, Roles: testRoles}
	req := func(remote string, hdr map[string][]string) *Person {
		t.Helper()
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		for k, vs := range hdr {
			for _, v := range vs {
				r.Header.Add(k, v)
			}
		}
		who, err := p.Identify(r)
		if err != nil {
			panic(err)
		}
		return who
	}
	refused := func(remote string, hdr map[string][]string) error {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		for k, vs := range hdr {
			for _, v := range vs {
				r.Header.Add(k, v)
			}
		}
		_, err := p.Identify(r)
		return err
	}
	ok := map[string][]string{"X-Forwarded-User": {"alice"}, "X-Forwarded-Groups": {"staff,ipam-admins"}}
	for _, remote := range []string{"10.0.0.9:4431", "192.0.2.7:1", "[fd00::5]:80", "[::ffff:10.0.0.3]:9"} {
		if who := req(remote, ok); who == nil || who.Actor != "user:alice" || who.Role != RoleAdmin {
			t.Errorf("%s: got %+v", remote, who)
		}
	}
	if who := req("203.0.113.5:1", map[string][]string{"Authorization": {"Bearer x"}}); who != nil {
		t.Errorf("no header: got %+v", who)
	}
	var pe *ProxyError
	for _, remote := range []string{"10.0.1.1:5", "192.0.2.8:1", "[fd01::1]:1", "127.0.0.1:80", "garbage"} {
		err := refused(remote, ok)
		if !errors.As(err, &pe) {
			t.Errorf("%s: untrusted peer: got %v", remote, err)
		}
	}
	// X-Forwarded-For never makes a peer trusted.
	if err := refused("203.0.113.5:1", map[string][]string{"X-Forwarded-User": {"alice"}, "X-Forwarded-For": {"10.0.0.9"}, "X-Real-Ip": {"10.0.0.9"}}); !errors.As(err, &pe) {
		t.Errorf("spoofed X-Forwarded-For: got %v", err)
	}
	for name, h := range map[string]map[string][]string{
		"twice":   {"X-Forwarded-User": {"alice", "mallory"}},
		"empty":   {"X-Forwarded-User": {" "}},
		"ctrl":    {"X-Forwarded-User": {"alice\x1b[2J"}},
		"lower":   {"x-forwarded-user": {"alice", "bob"}},
		"toolong": {"X-Forwarded-User": {string(make([]byte, 200))}},
	} {
		if err := refused("10.0.0.9:1", h); !errors.As(err, &pe) {
			t.Errorf("%s: got %v", name, err)
		}
	}
	var nr *NoRoleError
	if err := refused("10.0.0.9:1", map[string][]string{"X-Forwarded-User": {"eve"}, "X-Forwarded-Groups": {"staff"}}); !errors.As(err, &nr) || nr.Claim != "X-Forwarded-Groups" {
		t.Errorf("no role: got %v", err)
	}
	if _, err := ParseCIDRs("10.0.0.0/33"); err == nil {
		t.Error("a bad CIDR was accepted")
	}
}

// TestTrustedProxyGroupsHeaderOnce refuses a groups header given more than
// once: a proxy that sets its own header but passes the client's through
// would otherwise let the client add "ipam-admins" to its own groups.
func TestTrustedProxyGroupsHeaderOnce(t *testing.T) {
	t.Parallel()
	trusted, err := ParseCIDRs("10.0.0.0/24")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{UserHeader: "X-Forwarded-User", GroupsHeader: "X-Forwarded-Groups", Trusted: trusted, Roles: testRoles}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.9:4431"
	r.Header.Add("X-Forwarded-User", "mallory")
	r.Header.Add("X-Forwarded-Groups", "ipam-admins")
	r.Header.Add("X-Forwarded-Groups", "staff")
	who, err := p.Identify(r)
	var pe *ProxyError
	if !errors.As(err, &pe) {
		t.Fatalf("groups header twice: got %+v, %v; want a ProxyError", who, err)
	}
}

// TestParseCIDRsRefusesEverything: a trusted range holding every address
// (0.0.0.0/0, ::/0, or ::ffff:0.0.0.0/96, every IPv4 address spelled as
// IPv6) would believe the user header from anyone; an IPv4-mapped CIDR
// shorter than /96 spells no IPv4 range at all.
func TestParseCIDRsRefusesEverything(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"0.0.0.0/0", "::/0", "10.0.0.1, ::ffff:0.0.0.0/96", "::ffff:10.0.0.0/90"} {
		if got, err := ParseCIDRs(v); err == nil {
			t.Errorf("%q accepted: %v", v, got)
		}
	}
	if _, err := ParseCIDRs("10.0.0.0/8, fd00::/8"); err != nil {
		t.Errorf("private ranges refused: %v", err)
	}
}

// TestParseCIDRsRefusesEveryAddressTogether: ranges that each hold part
// of the address space but together hold all of IPv4 or all of IPv6 are
// refused like 0.0.0.0/0; ranges that leave one address out are not.
func TestParseCIDRsRefusesEveryAddressTogether(t *testing.T) {
	t.Parallel()
	for _, v := range []string{
		"0.0.0.0/1,128.0.0.0/1",
		"128.0.0.0/1, 10.0.0.1, 0.0.0.0/1",
		"0.0.0.0/2, 64.0.0.0/2, 128.0.0.0/2, 192.0.0.0/3, 224.0.0.0/3",
		"0.0.0.0/1, 64.0.0.0/2, 128.0.0.0/1",
		"0.0.0.0/1, ::ffff:128.0.0.0/97",
		"::/1, 8000::/1",
		"fd00::/8, ::/1, 8000::/2, c000::/2",
		"10.0.0.1, ::/1, 8000::/1",
	} {
		if got, err := ParseCIDRs(v); err == nil {
			t.Errorf("%q accepted: %v", v, got)
		}
	}
	for _, v := range []string{
		"0.0.0.0/1, 128.0.0.0/2, 192.0.0.0/3, 224.0.0.0/4, 240.0.0.0/5, 248.0.0.0/6, 252.0.0.0/7, 254.0.0.0/8, 255.0.0.0/9, 255.128.0.0/10",
		"0.0.0.1/32, 0.0.0.2/31, 0.0.0.4/30, 0.0.0.8/29, 0.0.0.16/28, 0.0.0.32/27, 0.0.0.64/26, 0.0.0.128/25, 0.0.1.0/24, 0.0.2.0/23, 0.0.4.0/22, 0.0.8.0/21, 0.0.16.0/20, 0.0.32.0/19, 0.0.64.0/18, 0.0.128.0/17, 0.1.0.0/16, 0.2.0.0/15, 0.4.0.0/14, 0.8.0.0/13, 0.16.0.0/12, 0.32.0.0/11, 0.64.0.0/10, 0.128.0.0/9, 1.0.0.0/8, 2.0.0.0/7, 4.0.0.0/6, 8.0.0.0/5, 16.0.0.0/4, 32.0.0.0/3, 64.0.0.0/2, 128.0.0.0/1",
		"0.0.0.0/1, ::/1",
		"::/1, 8000::/2, c000::/3, e000::/4",
	} {
		if _, err := ParseCIDRs(v); err != nil {
			t.Errorf("%q refused: %v", v, err)
		}
	}
}
