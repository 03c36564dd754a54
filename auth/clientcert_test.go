package auth

import (
	"context"
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
	if who, err := roles.Identify(verifiedState(t, ca.Client(t, "noc-board", ""))); err != nil || who == nil || who.Role != RoleViewer || who.Actor != "cert:noc-board" {
		t.Errorf("a mapped CN: got %+v, %v", who, err)
	}
	if who, err := roles.Identify(verifiedState(t, ca.Client(t, "x", "spiffe://site.example/ns/forge/sa/site-explorer"))); err != nil || who == nil || who.Role != RoleAdmin {
		t.Errorf("a mapped URI SAN: got %+v, %v", who, err)
	}
}

// TestCertActorIsNotAJWTService: a certificate's holder and a bearer JWT
// without a user name whose sub spells the certificate's id are two
// actors: cert:ID and service:SUB. Before, both were service:ID, so a
// token from the issuer with sub "noc-board" or a SPIFFE id was logged as
// that certificate's service.
func TestCertActorIsNotAJWTService(t *testing.T) {
	t.Parallel()
	ca := certtest.NewCA(t, "site CA")
	const spiffe = "spiffe://site.example/ns/monitoring/sa/noc-board"
	roles, err := ParseClientRoles(spiffe + "=viewer,noc-board=viewer")
	if err != nil {
		t.Fatal(err)
	}
	is := newJWTIssuer(t)
	o, c := newBearerRP(t, is, "ipledger-api")
	for _, id := range []string{spiffe, "noc-board"} {
		leaf := ca.Client(t, "noc-board", "")
		if id == spiffe {
			leaf = ca.Client(t, "x", spiffe)
		}
		cert, err := roles.Identify(verifiedState(t, leaf))
		if err != nil {
			t.Fatal(err)
		}
		jwt, err := o.VerifyBearer(context.Background(), is.sign(t, is.claims(c, map[string]any{"preferred_username": nil, "sub": id, "groups": "noc"})), noSignIns)
		if err != nil {
			t.Fatal(err)
		}
		if cert.Actor != "cert:"+id || jwt.Actor != "service:"+id {
			t.Errorf("%s: certificate %q, JWT %q; want cert:%s and service:%s", id, cert.Actor, jwt.Actor, id, id)
		}
	}
}
