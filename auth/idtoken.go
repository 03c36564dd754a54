package auth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"log/slog"
	"strings"
)

// Secret is a credential held in memory (a person's ID token). It prints,
// logs and marshals as "[redacted]", so no %v of a struct, log attribute
// or JSON that carries it shows it; Reveal gives the value itself.
type Secret string

const redacted = "[redacted]"

func (Secret) String() string               { return redacted }
func (Secret) GoString() string             { return `"` + redacted + `"` }
func (Secret) LogValue() slog.Value         { return slog.StringValue(redacted) }
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }
func (s Secret) Reveal() string             { return string(s) }

// sealedPrefix starts a sealed ID token; the column's CHECK (migration 27)
// requires it, so a plaintext token (a JWT starts "eyJ") is refused by the
// database itself. maxSealed is the column's bound: a larger token is not
// kept (sign-out then goes without id_token_hint).
const (
	sealedPrefix = "v1."
	maxSealed    = 16384
)

// idTokenKey derives the key that seals a session's ID token from the
// session id. The database keeps only sessionHash(id), from which the key
// cannot be derived, so the sealed token is readable only while the
// browser presents the session's cookie: at sign-out.
func idTokenKey(id string) []byte {
	k, err := hkdf.Key(sha256.New, []byte(id), nil, "ipledger user-session id_token v1", 32)
	if err != nil {
		panic(err) // only for a length hkdf cannot give
	}
	return k
}

func sessionAEAD(id string) cipher.AEAD {
	block, err := aes.NewCipher(idTokenKey(id))
	if err != nil {
		panic(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return aead
}

// sealIDToken seals raw for the session id (AES-256-GCM, the row's id as
// additional data, so a sealed token moved to another row does not open).
// ok is false when the result would not fit the column.
func sealIDToken(id string, raw Secret) (sealed string, ok bool) {
	aead := sessionAEAD(id)
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic(err)
	}
	ct := aead.Seal(nonce, nonce, []byte(raw.Reveal()), []byte(sessionHash(id)))
	sealed = sealedPrefix + base64.RawURLEncoding.EncodeToString(ct)
	return sealed, len(sealed) <= maxSealed
}

// openIDToken opens what sealIDToken sealed for the session id.
func openIDToken(id, sealed string) (Secret, error) {
	b64, ok := strings.CutPrefix(sealed, sealedPrefix)
	if !ok {
		return "", errors.New("not a sealed ID token")
	}
	ct, err := base64.RawURLEncoding.DecodeString(b64)
	if err != nil {
		return "", err
	}
	aead := sessionAEAD(id)
	if len(ct) < aead.NonceSize() {
		return "", errors.New("sealed ID token too short")
	}
	raw, err := aead.Open(nil, ct[:aead.NonceSize()], ct[aead.NonceSize():], []byte(sessionHash(id)))
	if err != nil {
		return "", err
	}
	return Secret(raw), nil
}
