package auth

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
)

// Proxy is the trusted authenticating proxy (oauth2-proxy, a company
// gateway): the person named in the user header, with the groups of the
// groups header, is believed only when the request's own TCP peer is in
// one of the trusted networks. X-Forwarded-For and the like are never
// read for this: a client can write them.
type Proxy struct {
	UserHeader   string
	GroupsHeader string
	Trusted      []netip.Prefix
	Roles        RoleMap
	// LogoutURL is where the console's Sign out sends a person the proxy
	// signed in (IPLEDGER_AUTH_PROXY_LOGOUT_URL: the proxy's own sign-out,
	// such as oauth2-proxy's /oauth2/sign_out). Empty: ipledger cannot
	// sign such a person out, and the console says so.
	LogoutURL string
}

// ParseCIDRs parses IPLEDGER_AUTH_PROXY_TRUSTED: comma-separated CIDRs or
// single addresses.
func ParseCIDRs(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range SplitList(v) {
		if !strings.Contains(s, "/") {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, fmt.Errorf("%q is neither an address nor a CIDR", s)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR", s)
		}
		if p.Addr().Is4In6() {
			if p.Bits() < 96 {
				return nil, fmt.Errorf("%q: an IPv4-mapped CIDR needs a prefix of at least /96", s)
			}
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		if p.Bits() == 0 {
			return nil, fmt.Errorf("%q holds every address: the user header would be believed from anyone; list the proxies' own addresses", s)
		}
		out = append(out, p.Masked())
	}
	for _, fam := range []struct {
		v4   bool
		name string
	}{{true, "IPv4"}, {false, "IPv6"}} {
		if coversFamily(out, fam.v4) {
			return nil, fmt.Errorf("%q together hold every %s address: the user header would be believed from anyone; list the proxies' own addresses", v, fam.name)
		}
	}
	return out, nil
}

// coversFamily reports whether the prefixes of one family (IPv4 when v4)
// together hold every address of it: 0.0.0.0/1 and 128.0.0.0/1 trust
// anyone as much as 0.0.0.0/0 does. It walks them in address order,
// looking for the first address none holds.
func coversFamily(ps []netip.Prefix, v4 bool) bool {
	var fam []netip.Prefix
	for _, p := range ps {
		if p.Addr().Is4() == v4 {
			fam = append(fam, p)
		}
	}
	slices.SortFunc(fam, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	next := netip.IPv6Unspecified() // the lowest address not yet held
	if v4 {
		next = netip.IPv4Unspecified()
	}
	for _, p := range fam {
		if next.Less(p.Addr()) {
			return false // a gap before p
		}
		if last := lastAddr(p); !last.Less(next) {
			if next = last.Next(); !next.IsValid() {
				return true // held up to the family's last address
			}
		}
	}
	return false
}

// lastAddr is the highest address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// ProxyError refuses the user header from an untrusted peer, or an
// ambiguous one: 401, and the server logs it.
type ProxyError struct {
	Peer   string
	Reason string
}

func (e *ProxyError) Error() string { return e.Reason }

// trusts reports whether the request's TCP peer is a trusted proxy.
func (p *Proxy) trusts(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	a = a.Unmap().WithZone("")
	for _, pr := range p.Trusted {
		if pr.Contains(a) {
			return true
		}
	}
	return false
}

// Identify returns the person the proxy names, or nil when the request
// carries no user header (another way of signing in applies). The user
// header from an untrusted peer, given twice, or not a valid name is a
// *ProxyError; a person without a role is a *NoRoleError.
func (p *Proxy) Identify(r *http.Request) (*Person, error) {
	if p == nil || p.UserHeader == "" {
		return nil, nil
	}
	vals, ok := r.Header[http.CanonicalHeaderKey(p.UserHeader)]
	if !ok {
		return nil, nil
	}
	if !p.trusts(r.RemoteAddr) {
		return nil, &ProxyError{Peer: r.RemoteAddr, Reason: fmt.Sprintf("the header %s is honoured only from a trusted proxy, and %s is not one", p.UserHeader, r.RemoteAddr)}
	}
	if len(vals) != 1 || strings.TrimSpace(vals[0]) == "" {
		return nil, &ProxyError{Peer: r.RemoteAddr, Reason: fmt.Sprintf("the header %s must be given once, with a name", p.UserHeader)}
	}
	// Not trimmed: HTTP already drops the blanks around a field value,
	// and any left (a no-break space, say) are part of what the proxy
	// sent, which checkName refuses rather than reading as another name.
	name, err := checkName(vals[0], p.UserHeader)
	if err != nil {
		return nil, &ProxyError{Peer: r.RemoteAddr, Reason: err.Error()}
	}
	var groups []string
	if p.GroupsHeader != "" {
		// Given once, like the user header: a second one is a client's
		// header that the proxy passed through beside its own.
		gv := r.Header.Values(p.GroupsHeader)
		if len(gv) > 1 {
			return nil, &ProxyError{Peer: r.RemoteAddr, Reason: fmt.Sprintf("the header %s must be given at most once", p.GroupsHeader)}
		}
		for _, v := range gv {
			groups = append(groups, SplitList(v)...)
		}
	}
	role, ok := p.Roles.Role(groups)
	if !ok {
		claim := p.GroupsHeader
		if claim == "" {
			claim = "(no groups header is configured)"
		}
		return nil, &NoRoleError{Name: name, Claim: claim, Groups: groups}
	}
	return &Person{Actor: "user:" + name, Name: name, Role: role}, nil
}
