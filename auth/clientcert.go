package auth

import (
	"crypto/tls"
	"fmt"
	"strings"
)

// ClientRoles maps a verified client certificate to a role by its URI SAN
// (a SPIFFE id, as NICo's services carry) or, when it has none, its
// subject CN (IPLEDGER_TLS_CLIENT_ROLES: "ID=role,ID=role").
type ClientRoles map[string]Role

// ParseClientRoles parses IPLEDGER_TLS_CLIENT_ROLES. Each item splits at
// its last "=", so an id may hold one; ids cannot hold commas.
func ParseClientRoles(v string) (ClientRoles, error) {
	m := ClientRoles{}
	for _, item := range SplitList(v) {
		i := strings.LastIndex(item, "=")
		if i <= 0 {
			return nil, fmt.Errorf("%q is not ID=ROLE", item)
		}
		id, r := strings.TrimSpace(item[:i]), strings.TrimSpace(item[i+1:])
		role, ok := ParseRole(r)
		if !ok {
			return nil, fmt.Errorf("%q: unknown role %q: want viewer, operator or admin", item, r)
		}
		if _, dup := m[id]; dup {
			return nil, fmt.Errorf("%q is mapped twice", id)
		}
		m[id] = role
	}
	return m, nil
}

// CertActorPrefix starts the audit actor of a client certificate's
// holder: cert:SPIFFE-ID or cert:CN.
const CertActorPrefix = "cert:"

// CertError refuses a verified certificate that no mapping names: 403.
type CertError struct{ ID string }

func (e *CertError) Error() string {
	return fmt.Sprintf("the client certificate %s is not mapped to a role (IPLEDGER_TLS_CLIENT_ROLES)", e.ID)
}

// CertID is what names a certificate's holder: its first URI SAN (the
// SPIFFE id), else its subject CN.
func CertID(state *tls.ConnectionState) string {
	id, _ := certID(state)
	return id
}

// certID is CertID and whether it is the certificate's URI SAN.
func certID(state *tls.ConnectionState) (id string, uri bool) {
	if state == nil || len(state.VerifiedChains) == 0 || len(state.VerifiedChains[0]) == 0 {
		return "", false
	}
	leaf := state.VerifiedChains[0][0]
	if len(leaf.URIs) > 0 {
		return leaf.URIs[0].String(), true
	}
	return leaf.Subject.CommonName, false
}

// Identify returns the holder of a verified client certificate (actor
// "cert:ID": a prefix of its own, so a bearer JWT whose sub spells the
// same id, actor "service:SUB", never reads as the certificate), nil
// when the connection carries none, or a *CertError when the certificate
// is not mapped. Only verified chains count: the TLS
// handshake has already refused a certificate from another CA.
func (m ClientRoles) Identify(state *tls.ConnectionState) (*Person, error) {
	id, uri := certID(state)
	if id == "" {
		return nil, nil
	}
	role, ok := m[id]
	// A CN that spells a URI never passes for a URI SAN: the CN is what
	// the requester wrote, the URI SAN (SPIFFE id) what the issuer vouches
	// for.
	if !ok || (!uri && strings.Contains(id, "://")) {
		return nil, &CertError{ID: id}
	}
	name, err := checkName(id, "the certificate's identity")
	if err != nil {
		return nil, &CertError{ID: id}
	}
	return &Person{Actor: CertActorPrefix + name, Name: name, Role: role}, nil
}
