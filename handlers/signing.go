package handlers

import (
	"crypto/hmac"
	"crypto/sha256"
)

// Sign is the one signature of the console (session cookies, CSRF tokens,
// sealed links): HMAC-SHA256 under the site's session key
// (auth.Service.SessionKey) of purpose and payload, each followed by a NUL,
// so that a value signed for one purpose never passes for another.
func Sign(key []byte, purpose, payload string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(purpose))
	m.Write([]byte{0})
	m.Write([]byte(payload))
	m.Write([]byte{0})
	return m.Sum(nil)
}

// Verify reports, in constant time, whether sig is Sign(key, purpose,
// payload).
func Verify(key []byte, purpose, payload string, sig []byte) bool {
	return hmac.Equal(sig, Sign(key, purpose, payload))
}
