package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"testing"

	"github.com/ipledger/ipledger/auth/certtest"
)

// verifiedState is the connection state of a handshake that verified
// leaf (Identify reads only the verified chain).
func verifiedState(t *testing.T, leaf certtest.Leaf) *tls.ConnectionState {
	t.Helper()
	c := leaf.TLS(t)
	x, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{x}}}
}

// TestClientCertCNIsNotASPIFFEID: a certificate without a URI SAN whose
// subject CN spells a SPIFFE id does not pass for that service. The CN is
// whatever the requester wrote into the request; the URI SAN is the
// identity a SPIFFE issuer vouches for.
func TestClientCertCNIsNotASPIFFEID(t *testing.T) {
	t.Parallel()
	ca := certtest.NewCA(t, "site CA")
	roles, err := ParseClientRoles("spiffe://site.example/ns/forge/sa/site-explorer=admin, noc-board=viewer")
	if err != nil {
		t.Fatal(err)
	}
	who, err := roles.Identify(verifiedState(t, ca.Client(t, "spiffe://site.example/ns/forge/sa/site-explorer", "")))
	var ce *CertError
	if !errors.As(err, &ce) {
		t.Errorf("a CN spelling a mapped SPIFFE id: got %+v, %v; want a CertError", who, err)
	}
	if who, err := roles.Identify(verifiedState(t, ca.Client(t, "noc-board", ""))); err != nil || who == nil || who.Role != RoleViewer {
		t.Errorf("a mapped CN: got %+v, %v", who, err)
	}
	if who, err := roles.Identify(verifiedState(t, ca.Client(t, "x", "spiffe://site.example/ns/forge/sa/site-explorer"))); err != nil || who == nil || who.Role != RoleAdmin {
		t.Errorf("a mapped URI SAN: got %+v, %v", who, err)
	}
}
