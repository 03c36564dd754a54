package auth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/txn"
)

const sessionKeySetting = "console_session_key"

// SessionKey returns the key that signs console session cookies: 32 random
// bytes, created once in the settings table and shared by every server
// process on the same database (first writer wins; the others read it).
// The key is never audited or logged.
func (s *Service) SessionKey(ctx context.Context) ([]byte, error) {
	read := func() (string, error) {
		var rows []models.Setting
		err := s.read(ctx, func(db *gorm.DB) error {
			return db.Where("key = ?", sessionKeySetting).Limit(1).Find(&rows).Error
		})
		if err != nil || len(rows) == 0 {
			return "", err
		}
		return rows[0].Value, nil
	}
	v, err := read()
	if err != nil {
		return nil, err
	}
	if v == "" {
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		err := s.write(ctx, func(t *txn.Tx) error {
			return t.Exec(`INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING`,
				sessionKeySetting, hex.EncodeToString(b[:])).Error
		})
		if err != nil {
			return nil, err
		}
		if v, err = read(); err != nil {
			return nil, err
		}
	}
	key, err := hex.DecodeString(v)
	if err != nil || len(key) < 32 {
		return nil, fault.Errf(fault.CodeInternal, "", "settings row %s is not a 32-byte hex key", sessionKeySetting)
	}
	return key, nil
}

// ConsoleSession is a server-side console session (migration 9).
type ConsoleSession struct {
	// Token is the session's API token, with its current name and role.
	Token Token
	// Expires is when the session ends unless it is used again.
	Expires time.Time
	// Renewed reports that this look-up moved Expires forward (the caller
	// refreshes the cookie).
	Renewed bool
}

func tokenSessionHash(id string) string { return hashToken("session:" + id) }

// CreateSession stores a console session for token tokenID that ends after
// ttl without use, and returns its random id (32 bytes, base64url): the
// cookie carries the id; the database keeps only its SHA-256. Expired
// sessions are swept in the same transaction. An unknown token is 401.
func (s *Service) CreateSession(ctx context.Context, tokenID int64, ttl time.Duration) (string, time.Time, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", time.Time{}, err
	}
	id := base64.RawURLEncoding.EncodeToString(b[:])
	var exp time.Time
	err := s.write(ctx, func(t *txn.Tx) error {
		now := t.Now
		exp = now.Add(ttl)
		var n int64
		if err := t.Model(&models.APIToken{}).Where("id = ?", tokenID).Count(&n).Error; err != nil {
			return err
		}
		if n == 0 {
			return fault.Errf(fault.CodeUnauthorized, "", "the token of this session no longer exists")
		}
		if err := t.Exec(`DELETE FROM console_sessions WHERE expires_at <= ?`, now.Unix()).Error; err != nil {
			return err
		}
		return t.Exec(`INSERT INTO console_sessions (id, token_id, created_at, expires_at, last_seen_at) VALUES (?, ?, ?, ?, ?)`,
			tokenSessionHash(id), tokenID, now.Unix(), exp.Unix(), now.Unix()).Error
	})
	if err != nil {
		return "", time.Time{}, err
	}
	return id, exp, nil
}

// Session returns the live session with this id and its token, or 401
// unauthorized when it does not exist, has expired, was ended by
// DeleteSession or its token was deleted. Sessions slide: when less than
// ttl−renewEvery is left, Expires moves to now+ttl (one write at most per
// renewEvery per session, not one per request).
func (s *Service) Session(ctx context.Context, id string, ttl, renewEvery time.Duration) (*ConsoleSession, error) {
	type row struct {
		TokenID   int64
		ExpiresAt int64
		Name      string
		Role      string
	}
	var rows []row
	h := tokenSessionHash(id)
	err := s.read(ctx, func(db *gorm.DB) error {
		return db.Raw(`SELECT s.token_id, s.expires_at, t.name, t.role FROM console_sessions s
			JOIN api_tokens t ON t.id = s.token_id WHERE s.id = ?`, h).Scan(&rows).Error
	})
	if err != nil {
		return nil, err
	}
	now := s.now()
	if len(rows) == 0 || now.Unix() >= rows[0].ExpiresAt {
		return nil, fault.Errf(fault.CodeUnauthorized, "", "this console session has ended: sign in again")
	}
	r := rows[0]
	cs := &ConsoleSession{Token: Token{ID: r.TokenID, Name: r.Name, Role: Role(r.Role)}, Expires: time.Unix(r.ExpiresAt, 0)}
	if cs.Expires.Sub(now) < ttl-renewEvery {
		exp := now.Add(ttl)
		err := s.write(ctx, func(t *txn.Tx) error {
			return t.Exec(`UPDATE console_sessions SET expires_at = ?, last_seen_at = ? WHERE id = ? AND expires_at < ?`,
				exp.Unix(), now.Unix(), h, exp.Unix()).Error
		})
		switch {
		case unavailable(err):
			// The session is valid as it stands: a database that cannot
			// store the renewal (its storage full) keeps serving its
			// reads; a later request renews it.
		case err != nil:
			return nil, err
		default:
			cs.Expires, cs.Renewed = time.Unix(exp.Unix(), 0), true
		}
	}
	return cs, nil
}

// DeleteSession ends a console session (sign out). Ending one that does
// not exist is not an error.
func (s *Service) DeleteSession(ctx context.Context, id string) error {
	return s.write(ctx, func(t *txn.Tx) error {
		return t.Exec(`DELETE FROM console_sessions WHERE id = ?`, tokenSessionHash(id)).Error
	})
}

// unavailable reports a 503: the database could not do it now.
func unavailable(err error) bool {
	e, ok := fault.AsError(err)
	return ok && e.Code == fault.CodeUnavailable
}
