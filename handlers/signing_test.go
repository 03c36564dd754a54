package handlers

import "testing"

// A signature holds for its key, purpose and payload only: the NUL after
// each part keeps ("ab", "c") from passing for ("a", "bc").
func TestSignVerify(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	sig := Sign(key, "session", "id-1")
	if !Verify(key, "session", "id-1", sig) {
		t.Fatal("a signature does not verify")
	}
	for _, c := range []struct{ key, purpose, payload string }{
		{string(key), "csrf", "id-1"},
		{string(key), "session", "id-2"},
		{string(key), "sessio", "nid-1"},
		{"another key of thirty-two bytes!", "session", "id-1"},
	} {
		if Verify([]byte(c.key), c.purpose, c.payload, sig) {
			t.Errorf("signature of session/id-1 passes for %q/%q under key %q", c.purpose, c.payload, c.key)
		}
	}
}
