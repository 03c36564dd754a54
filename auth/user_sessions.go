package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"sort"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/kernel"
	"github.com/ipledger/ipledger/models"
)

// DefaultSessionTTL is IPLEDGER_SESSION_TTL's default.
const DefaultSessionTTL = 12 * time.Hour

// seenEvery bounds how often a session's last_seen_at is written.
const seenEvery = time.Minute

// People keeps the console sessions of people signed in through single
// sign-on (table user_sessions, migration 20). A session lasts TTL from
// sign-in, however much it is used: the role was read from the person's
// groups at sign-in, and signing in again is how a changed group reaches
// ipledger. The database keeps only the SHA-256 of the session id.
type People struct {
	DB  *gorm.DB
	TTL time.Duration
	Now func() time.Time
}

func (p *People) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// PersonSession is a live session of a person.
type PersonSession struct {
	Name    string
	Role    Role
	Expires time.Time
}

func sessionHash(id string) string {
	h := sha256.Sum256([]byte("user-session:" + id))
	return hex.EncodeToString(h[:])
}

// Open stores a session for who (signed in through source, "oidc") and
// returns its random id (32 bytes, base64url) and end. Expired sessions are
// swept in the same transaction; the sign-in is audited (session.open, with
// the role), never the id.
func (p *People) Open(ctx context.Context, who *Person, source string) (string, time.Time, error) {
	if who == nil || who.Role == "" {
		return "", time.Time{}, kernel.Errf(kernel.CodeForbidden, "", "no session without a role")
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", time.Time{}, err
	}
	id := base64.RawURLEncoding.EncodeToString(b[:])
	now := p.now()
	exp := now.Add(p.TTL)
	err := p.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec(`DELETE FROM user_sessions WHERE expires_at <= ?`, now.Unix()).Error; err != nil {
			return err
		}
		if err := tx.Exec(`INSERT INTO user_sessions (id, username, role, source, created_at, last_seen_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			sessionHash(id), who.Name, string(who.Role), source, now.Unix(), now.Unix(), exp.Unix()).Error; err != nil {
			return err
		}
		return audit(ctx, tx, now, "session.open", who.Actor, map[string]any{"user": who.Name, "role": who.Role, "via": source, "expires_at": exp.UTC().Format(time.RFC3339)}, nil)
	})
	if err != nil {
		return "", time.Time{}, err
	}
	return id, exp, nil
}

// Lookup returns the live session with this id, or 401 unauthorized when it
// does not exist, has expired or was ended. It records when the session
// was last used (at most one write per seenEvery).
func (p *People) Lookup(ctx context.Context, id string) (*PersonSession, error) {
	type row struct {
		Username   string
		Role       string
		LastSeenAt int64
		ExpiresAt  int64
	}
	var rows []row
	h := sessionHash(id)
	if err := p.DB.WithContext(ctx).Raw(`SELECT username, role, last_seen_at, expires_at FROM user_sessions WHERE id = ?`, h).Scan(&rows).Error; err != nil {
		return nil, err
	}
	now := p.now()
	if len(rows) == 0 || now.Unix() >= rows[0].ExpiresAt {
		return nil, kernel.Errf(kernel.CodeUnauthorized, "", "this console session has ended: sign in again")
	}
	r := rows[0]
	if now.Unix()-r.LastSeenAt >= int64(seenEvery/time.Second) {
		if err := p.DB.WithContext(ctx).Exec(`UPDATE user_sessions SET last_seen_at = ? WHERE id = ?`, now.Unix(), h).Error; err != nil {
			return nil, err
		}
	}
	return &PersonSession{Name: r.Username, Role: Role(r.Role), Expires: time.Unix(r.ExpiresAt, 0)}, nil
}

// Close ends the session with this id (sign out); ending one that does not
// exist is not an error.
func (p *People) Close(ctx context.Context, id string) error {
	now := p.now()
	return p.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var names []string
		if err := tx.Raw(`SELECT username FROM user_sessions WHERE id = ?`, sessionHash(id)).Scan(&names).Error; err != nil {
			return err
		}
		if len(names) == 0 {
			return nil
		}
		if err := tx.Exec(`DELETE FROM user_sessions WHERE id = ?`, sessionHash(id)).Error; err != nil {
			return err
		}
		return audit(ctx, tx, now, "session.end", "user:"+names[0], nil, map[string]any{"user": names[0], "reason": "signed out"})
	})
}

// audit writes one audit event in tx, made by ctx's actor, or by actor
// when the context has none (a sign-in is made by the person it signs
// in). after and before hold no secret.
func audit(ctx context.Context, tx *gorm.DB, at time.Time, action, actor string, after, before any) error {
	a := kernel.ActorFrom(ctx)
	if a.Name == "system" && actor != "" {
		a.Name = actor
	}
	ev := models.AuditEvent{At: at, Actor: a.Name, Action: action, ObjectType: "session", ObjectID: actor, RequestID: a.RequestID}
	for _, x := range []struct {
		dst **string
		v   any
	}{{&ev.AfterJSON, after}, {&ev.BeforeJSON, before}} {
		if x.v == nil {
			continue
		}
		b, err := json.Marshal(x.v)
		if err != nil {
			return err
		}
		s := string(b)
		*x.dst = &s
	}
	return tx.Create(&ev).Error
}

// PersonRef is the sessions page's reference of the person session id.
func PersonRef(id string) string { return "u" + sessionHash(id)[:16] }

// TokenSessionRef is the sessions page's reference of the token session id
// (console_sessions keeps the SHA-256 of "session:" and the id).
func TokenSessionRef(id string) string {
	h := sha256.Sum256([]byte("session:" + id))
	return "t" + hex.EncodeToString(h[:])[:16]
}

// OpenSession is a console session as the sessions page shows it: never
// its id. Ref names it for "end session".
type OpenSession struct {
	Ref      string
	Actor    string
	Role     Role
	Since    time.Time
	LastSeen time.Time // zero: not recorded yet
	Expires  time.Time
}

// List returns every live console session, people's (user:NAME) and API
// tokens' (console:NAME), most recently used first.
func (p *People) List(ctx context.Context) ([]OpenSession, error) {
	type row struct {
		Kind       string
		ID         string
		Name       string
		Role       string
		CreatedAt  int64
		LastSeenAt int64
		ExpiresAt  int64
	}
	var rows []row
	now := p.now().Unix()
	err := p.DB.WithContext(ctx).Raw(`
		SELECT 'u' AS kind, id, username AS name, role, created_at, last_seen_at, expires_at FROM user_sessions WHERE expires_at > ?
		UNION ALL
		SELECT 't' AS kind, s.id, t.name, t.role, s.created_at, s.last_seen_at, s.expires_at
		  FROM console_sessions s JOIN api_tokens t ON t.id = s.token_id WHERE s.expires_at > ?`, now, now).Scan(&rows).Error
	if err != nil {
		return nil, err
	}
	out := make([]OpenSession, 0, len(rows))
	for _, r := range rows {
		s := OpenSession{Ref: r.Kind + r.ID[:16], Role: Role(r.Role), Since: time.Unix(r.CreatedAt, 0), Expires: time.Unix(r.ExpiresAt, 0)}
		if r.LastSeenAt > 0 {
			s.LastSeen = time.Unix(r.LastSeenAt, 0)
		}
		if r.Kind == "u" {
			s.Actor = "user:" + r.Name
		} else {
			s.Actor = "console:" + r.Name
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		li, lj := out[i].LastSeen, out[j].LastSeen
		if li.IsZero() {
			li = out[i].Since
		}
		if lj.IsZero() {
			lj = out[j].Since
		}
		if !li.Equal(lj) {
			return li.After(lj)
		}
		return out[i].Ref < out[j].Ref
	})
	return out, nil
}

// End ends the session named by ref (from List), in an audited
// transaction (session.end by ctx's actor): its holder is signed out at
// their next request. An unknown ref is 404.
func (p *People) End(ctx context.Context, ref string) (*OpenSession, error) {
	if len(ref) != 17 || (ref[0] != 'u' && ref[0] != 't') {
		return nil, kernel.Errf(kernel.CodeNotFound, "session", "no open session %q", ref)
	}
	if _, err := hex.DecodeString(ref[1:]); err != nil {
		return nil, kernel.Errf(kernel.CodeNotFound, "session", "no open session %q", ref)
	}
	var ended *OpenSession
	err := p.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		all, err := (&People{DB: tx, TTL: p.TTL, Now: p.Now}).List(ctx)
		if err != nil {
			return err
		}
		for i := range all {
			if all[i].Ref == ref {
				ended = &all[i]
			}
		}
		if ended == nil {
			return kernel.Errf(kernel.CodeNotFound, "session", "no open session %q: it has ended already", ref)
		}
		table := "user_sessions"
		if ref[0] == 't' {
			table = "console_sessions"
		}
		if err := tx.Exec(`DELETE FROM `+table+` WHERE substr(id, 1, 16) = ?`, ref[1:]).Error; err != nil {
			return err
		}
		return audit(ctx, tx, p.now(), "session.end", ended.Actor, nil,
			map[string]any{"session": ended.Actor, "role": ended.Role, "since": ended.Since.UTC().Format(time.RFC3339), "reason": "ended by an admin"})
	})
	return ended, err
}
