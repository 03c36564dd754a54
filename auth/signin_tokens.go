package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/txn"
)

// The ID tokens ipledger received at console sign-ins (table
// signin_id_tokens, migration 30). Such a token is never a bearer
// credential (docs/identity.md "JWT bearer tokens (REST and gRPC)"):
// sign-out puts it in a URL (id_token_hint), where a browser's history or
// a proxy's log keeps it. Any other JWT that passes the checks is one, whatever its shape, so
// ipledger remembers these: by a hash, never the token, until the token's
// own exp plus the verifier's Leeway, in the database, so that the refusal
// outlives the session, its expiry and a restart of the server, and holds
// on every server process of a site.

// signInTokenHash is what signin_id_tokens keeps of a token: the SHA-256 of
// its signed part (the JWS header and payload as sent, "h.p"). Not of the
// whole text: base64url leaves a few bits of the signature's last
// character unused, so one token has several spellings that all verify,
// while the signed part has one (changing a bit of it breaks the
// signature), and only the issuer can sign the same part again.
func signInTokenHash(raw string) string {
	signed := raw
	if i := strings.LastIndexByte(raw, '.'); i >= 0 {
		signed = raw[:i]
	}
	h := sha256.Sum256([]byte("signin-id-token:" + signed))
	return hex.EncodeToString(h[:])
}

// rememberIDToken records, in t, the ID token raw received at a sign-in
// until it can no longer verify (its exp plus Leeway), and forgets the
// ones that can no longer verify.
func rememberIDToken(t *txn.Tx, raw Secret, exp time.Time) error {
	if err := t.Exec(`DELETE FROM signin_id_tokens WHERE expires_at <= ?`, t.Now.Unix()).Error; err != nil {
		return err
	}
	if raw == "" {
		return nil
	}
	h := signInTokenHash(raw.Reveal())
	// The same token twice (a callback replayed) keeps one row, with the
	// later bound.
	if err := t.Exec(`DELETE FROM signin_id_tokens WHERE hash = ?`, h).Error; err != nil {
		return err
	}
	return t.Exec(`INSERT INTO signin_id_tokens (hash, expires_at) VALUES (?, ?)`, h, exp.Add(Leeway).Unix()+1).Error
}

// RememberIDToken records the ID token of a sign-in that opened no
// session (the person has no role): it reached ipledger all the same, and
// stays no bearer credential. Not audited: nothing happened to anyone.
func (p *People) RememberIDToken(ctx context.Context, raw Secret, exp time.Time) error {
	if raw == "" {
		return nil
	}
	return p.Service.write(ctx, func(t *txn.Tx) error { return rememberIDToken(t, raw, exp) })
}

// ReceivedAtSignIn reports whether raw (a verified JWT) is an ID token
// ipledger received at a console sign-in and that has not expired yet.
func (p *People) ReceivedAtSignIn(ctx context.Context, raw string) (bool, error) {
	var n int64
	err := p.Service.read(ctx, func(db *gorm.DB) error {
		return db.Raw(`SELECT COUNT(*) FROM signin_id_tokens WHERE hash = ? AND expires_at > ?`,
			signInTokenHash(raw), p.now().Unix()).Scan(&n).Error
	})
	return n > 0, err
}
