package oidctest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"sync"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// keyring is the provider's signing key once RotateKey has replaced the
// example storage's own: the key set then holds only the new key, as
// after an issuer's rotation.
type keyring struct {
	mu  sync.Mutex
	cur *rsaKey // nil: the example storage's key
	n   int
}

type rsaKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k *rsaKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *rsaKey) Algorithm() jose.SignatureAlgorithm          { return jose.RS256 }
func (k *rsaKey) Key() any                                    { return k.key }
func (k *rsaKey) ID() string                                  { return k.id }
func (k *rsaKey) Use() string                                 { return "sig" }

// rsaPublic is the key set's entry of an rsaKey.
type rsaPublic struct{ *rsaKey }

func (k rsaPublic) Key() any { return &k.key.PublicKey }

func (s *store) rotated() *rsaKey {
	s.keys.mu.Lock()
	defer s.keys.mu.Unlock()
	return s.keys.cur
}

func (s *store) SigningKey(ctx context.Context) (op.SigningKey, error) {
	if k := s.rotated(); k != nil {
		return k, nil
	}
	return s.Storage.SigningKey(ctx)
}

func (s *store) SignatureAlgorithms(ctx context.Context) ([]jose.SignatureAlgorithm, error) {
	if s.rotated() != nil {
		return []jose.SignatureAlgorithm{jose.RS256}, nil
	}
	return s.Storage.SignatureAlgorithms(ctx)
}

func (s *store) KeySet(ctx context.Context) ([]op.Key, error) {
	if k := s.rotated(); k != nil {
		return []op.Key{rsaPublic{k}}, nil
	}
	return s.Storage.KeySet(ctx)
}

// RotateKey replaces the provider's signing key with a new one under a new
// key id, which it returns: tokens are signed with it from now on, and
// the key set (jwks_uri) holds only it.
func (p *Provider) RotateKey(t testing.TB) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p.st.keys.mu.Lock()
	defer p.st.keys.mu.Unlock()
	p.st.keys.n++
	p.st.keys.cur = &rsaKey{id: fmt.Sprintf("rotated-%d", p.st.keys.n), key: key}
	return p.st.keys.cur.id
}

// Sign signs claims as a JWT with the provider's current signing key (its
// key id in the header): a token the provider could have issued, with
// whatever claims a test needs (another audience, an expiry in the past).
func (p *Provider) Sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	k, err := p.st.SigningKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: k.SignatureAlgorithm(), Key: jose.JSONWebKey{Key: k.Key(), KeyID: k.ID()}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
