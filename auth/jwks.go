package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// AsymmetricAlgs are the only signature algorithms ipledger accepts on a
// JWT: "none" and the HMAC family (HS256…) never parse, so a token
// "signed" with the client secret, or not at all, is refused before any
// key is looked at.
var AsymmetricAlgs = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512,
	jose.EdDSA,
}

// JWKSRefreshEvery is the shortest time between two fetches of the
// issuer's JWKS: a token naming a key ipledger does not know makes it
// fetch the set again (the issuer rotated its keys), but a stream of
// tokens with made-up key ids must not make ipledger hammer the issuer.
const JWKSRefreshEvery = 30 * time.Second

// keySet is the issuer's JSON Web Key Set, fetched from jwks_uri: on first
// use, then again only when a token names a key id not in it, at most once
// per JWKSRefreshEvery. It implements go-oidc's KeySet; go-jose does the
// signature arithmetic.
//
// The lock guards the cached keys and the fetch bookkeeping only; it is
// never held across the network. One fetch runs at a time: a token naming
// a key the cache lacks waits for the running fetch (or starts one),
// while tokens naming a cached key keep verifying against the cache, so a
// slow issuer or a stream of made-up key ids never holds up the tokens
// that verify.
type keySet struct {
	url    string
	client *http.Client
	now    func() time.Time

	mu       sync.Mutex
	keys     []jose.JSONWebKey // replaced whole by a fetch, never changed in place
	fetched  time.Time         // start of the last fetch, successful or not
	fetches  int               // fetch attempts (tests)
	inflight *keyFetch         // the running fetch, nil when none
}

// keyFetch is one fetch of the key set; done is closed when it ends, err
// is its outcome.
type keyFetch struct {
	done chan struct{}
	err  error
}

func newKeySet(url string, client *http.Client, now func() time.Time) *keySet {
	return &keySet{url: url, client: client, now: now}
}

// VerifySignature verifies raw against the key its header names and
// returns the payload. An unknown key id refreshes the set once when the
// last fetch is at least JWKSRefreshEvery old, or waits for the refresh
// already running.
func (k *keySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSignedCompact(raw, AsymmetricAlgs)
	if err != nil {
		return nil, fmt.Errorf("malformed or unsupported JWS: %v", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("a JWT must carry exactly one signature")
	}
	h := jws.Signatures[0].Header
	k.mu.Lock()
	keys := k.keys
	k.mu.Unlock()
	if payload, found, err := verifyWith(jws, keys, h.KeyID, h.Algorithm); found {
		return payload, err
	}
	f, err := k.refresh(h.KeyID)
	if err != nil {
		return nil, err
	}
	select {
	case <-f.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if f.err != nil {
		return nil, f.err
	}
	k.mu.Lock()
	keys = k.keys
	k.mu.Unlock()
	if payload, found, err := verifyWith(jws, keys, h.KeyID, h.Algorithm); found {
		return payload, err
	}
	return nil, fmt.Errorf("no key %q in the issuer's key set", h.KeyID)
}

// refresh returns the running fetch, or starts one when the last began at
// least JWKSRefreshEvery ago (or there was none). The fetch runs on its
// own context: a caller that gives up does not cut it short for the
// others waiting on it.
func (k *keySet) refresh(kid string) (*keyFetch, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if f := k.inflight; f != nil {
		return f, nil
	}
	if k.fetches > 0 && k.now().Sub(k.fetched) < JWKSRefreshEvery {
		return nil, fmt.Errorf("no key %q in the issuer's key set (fetched %s ago; refreshed at most every %s)",
			kid, k.now().Sub(k.fetched).Round(time.Second), JWKSRefreshEvery)
	}
	f := &keyFetch{done: make(chan struct{})}
	k.inflight, k.fetched, k.fetches = f, k.now(), k.fetches+1
	go func() {
		keys, err := k.fetch()
		k.mu.Lock()
		if err == nil {
			k.keys = keys
		}
		f.err = err
		k.inflight = nil
		k.mu.Unlock()
		close(f.done)
	}()
	return f, nil
}

// prime fetches a new key set for the first time and waits for the
// outcome (or ctx).
func (k *keySet) prime(ctx context.Context) error {
	f, err := k.refresh("")
	if err != nil {
		return err
	}
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// verifyWith verifies jws with the key named kid (every signing key when
// the token names none). found is false when no key fits.
func verifyWith(jws *jose.JSONWebSignature, keys []jose.JSONWebKey, kid, alg string) (payload []byte, found bool, err error) {
	for _, key := range keys {
		if (kid != "" && key.KeyID != kid) || (key.Use != "" && key.Use != "sig") ||
			(key.Algorithm != "" && key.Algorithm != alg) || !key.IsPublic() {
			continue
		}
		found = true
		if payload, err = jws.Verify(key); err == nil {
			return payload, true, nil
		}
	}
	if found {
		return nil, true, errors.New("the signature does not verify")
	}
	return nil, false, nil
}

// fetch reads the key set (k.mu is not held). Only public asymmetric keys
// are kept.
func (k *keySet) fetch() ([]jose.JSONWebKey, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching the issuer's key set: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("fetching the issuer's key set: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching the issuer's key set: %s answered %s", k.url, resp.Status)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("the issuer's key set is not a JWKS: %v", err)
	}
	keys := set.Keys[:0]
	for _, key := range set.Keys {
		if key.IsPublic() && key.Valid() {
			keys = append(keys, key)
		}
	}
	return keys, nil
}

// Fetches reports how many times the key set was fetched.
func (k *keySet) Fetches() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.fetches
}
