package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"sort"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/txn"
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
// Writes go through the Service: one retried transaction each, audited,
// and the change feed told at commit.
type People struct {
	Service *Service
	TTL     time.Duration
}

func (p *People) now() time.Time { return p.Service.now() }

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
// returns its random id (32 bytes, base64url) and end. who's ID token, if
// any, is stored sealed under a key derived from the id (see
// sealIDToken), and remembered by hash as no bearer credential
// (rememberIDToken). Expired sessions are swept in the same transaction; the
// sign-in is audited (session.open, with the role), never the id or the
// token. When the sign-in gives the person a lower role than an open
// session of theirs has, their groups have changed since: every other
// session of theirs ends in the same transaction (endDemoted).
func (p *People) Open(ctx context.Context, who *Person, source string) (string, time.Time, error) {
	if who == nil || who.Role == "" {
		return "", time.Time{}, fault.Errf(fault.CodeForbidden, "", "no session without a role")
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", time.Time{}, err
	}
	id := base64.RawURLEncoding.EncodeToString(b[:])
	var sealed *string
	if who.IDToken != "" {
		if s, ok := sealIDToken(id, who.IDToken); ok {
			sealed = &s
		}
	}
	now := p.now()
	exp := now.Add(p.TTL)
	err := p.Service.write(actedBy(ctx, who.Actor, string(who.Role)), func(t *txn.Tx) error {
		if err := t.Exec(`DELETE FROM user_sessions WHERE expires_at <= ?`, now.Unix()).Error; err != nil {
			return err
		}
		if err := endDemoted(t, who); err != nil {
			return err
		}
		if err := rememberIDToken(t, who.IDToken, who.IDTokenExpires); err != nil {
			return err
		}
		if err := t.Exec(`INSERT INTO user_sessions (id, username, role, source, created_at, last_seen_at, expires_at, id_token) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			sessionHash(id), who.Name, string(who.Role), source, now.Unix(), now.Unix(), exp.Unix(), sealed).Error; err != nil {
			return err
		}
		return audit.Record(t, "session.open", "session", who.Actor, nil, map[string]any{"user": who.Name, "role": who.Role, "via": source, "expires_at": exp.UTC().Format(time.RFC3339)})
	})
	if err != nil {
		return "", time.Time{}, err
	}
	return id, exp, nil
}

// endDemoted ends every open session of who's when one of them holds a
// higher role than who's sign-in gives (docs/identity.md "Decisions"):
// the person was removed from a group, and the sessions opened before
// must not keep the role the provider no longer gives. Each is audited
// as session.end by the person, with the reason.
func endDemoted(t *txn.Tx, who *Person) error {
	var open []struct {
		ID        string
		Role      string
		CreatedAt int64
	}
	if err := t.Raw(`SELECT id, role, created_at FROM user_sessions WHERE username = ? ORDER BY created_at, id`, who.Name).Scan(&open).Error; err != nil {
		return err
	}
	demoted := false
	for _, o := range open {
		if r := Role(o.Role); r != who.Role && r.Allows(who.Role) {
			demoted = true
		}
	}
	if !demoted {
		return nil
	}
	for _, o := range open {
		if err := t.Exec(`DELETE FROM user_sessions WHERE id = ?`, o.ID).Error; err != nil {
			return err
		}
		if err := audit.Record(t, "session.end", "session", who.Actor, map[string]any{"session": who.Actor, "role": o.Role,
			"since": time.Unix(o.CreatedAt, 0).UTC().Format(time.RFC3339), "reason": "a later sign-in gave the role " + string(who.Role)}, nil); err != nil {
			return err
		}
	}
	return nil
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
	if err := p.Service.read(ctx, func(db *gorm.DB) error {
		return db.Raw(`SELECT username, role, last_seen_at, expires_at FROM user_sessions WHERE id = ?`, h).Scan(&rows).Error
	}); err != nil {
		return nil, err
	}
	now := p.now()
	if len(rows) == 0 || now.Unix() >= rows[0].ExpiresAt {
		return nil, fault.Errf(fault.CodeUnauthorized, "", "this console session has ended: sign in again")
	}
	r := rows[0]
	if now.Unix()-r.LastSeenAt >= int64(seenEvery/time.Second) {
		// Not audited and nothing for the feed: a plain statement.
		// A database that cannot store it now (its storage full) leaves
		// the session as valid as it was: a later request writes it.
		if err := p.Service.read(ctx, func(db *gorm.DB) error {
			return db.Exec(`UPDATE user_sessions SET last_seen_at = ? WHERE id = ?`, now.Unix(), h).Error
		}); err != nil && !unavailable(err) {
			return nil, err
		}
	}
	return &PersonSession{Name: r.Username, Role: Role(r.Role), Expires: time.Unix(r.ExpiresAt, 0)}, nil
}

// Close ends the session with this id (sign out) and returns the ID token
// it kept, for the issuer's sign-out ("" when it kept none); ending one
// that does not exist is not an error.
func (p *People) Close(ctx context.Context, id string) (Secret, error) {
	var rows []struct {
		Username, Role string
		IDToken        *string
	}
	if err := p.Service.read(ctx, func(db *gorm.DB) error {
		return db.Raw(`SELECT username, role, id_token FROM user_sessions WHERE id = ?`, sessionHash(id)).Scan(&rows).Error
	}); err != nil || len(rows) == 0 {
		return "", err
	}
	var hint Secret
	if rows[0].IDToken != nil {
		// A token that does not open (not this session's) is dropped:
		// sign-out goes on without the hint.
		hint, _ = openIDToken(id, *rows[0].IDToken)
	}
	return hint, p.Service.write(actedBy(ctx, "user:"+rows[0].Username, rows[0].Role), func(t *txn.Tx) error {
		res := t.Exec(`DELETE FROM user_sessions WHERE id = ?`, sessionHash(id))
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		return audit.Record(t, "session.end", "session", "user:"+rows[0].Username, map[string]any{"user": rows[0].Username, "reason": "signed out"}, nil)
	})
}

// actedBy is ctx, acted by actor with role when ctx names nobody (a
// sign-in is made by the person it signs in, with the role it gives).
func actedBy(ctx context.Context, actor, role string) context.Context {
	if a := audit.ActorFrom(ctx); a.Name == "system" {
		return audit.WithActorRole(ctx, actor, role, a.RequestID)
	}
	return ctx
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
	var out []OpenSession
	err := p.Service.read(ctx, func(db *gorm.DB) (err error) {
		out, err = listIn(db, p.now().Unix())
		return err
	})
	return out, err
}

// listIn is List on db (a transaction's handle, for End).
func listIn(db *gorm.DB, now int64) ([]OpenSession, error) {
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
	err := db.Raw(`
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
		return nil, fault.Errf(fault.CodeNotFound, "session", "no open session %q", ref)
	}
	if _, err := hex.DecodeString(ref[1:]); err != nil {
		return nil, fault.Errf(fault.CodeNotFound, "session", "no open session %q", ref)
	}
	var ended *OpenSession
	err := p.Service.write(ctx, func(t *txn.Tx) error {
		all, err := listIn(t.DB, t.Now.Unix())
		if err != nil {
			return err
		}
		for i := range all {
			if all[i].Ref == ref {
				ended = &all[i]
			}
		}
		if ended == nil {
			return fault.Errf(fault.CodeNotFound, "session", "no open session %q: it has ended already", ref)
		}
		table := "user_sessions"
		if ref[0] == 't' {
			table = "console_sessions"
		}
		if err := t.Exec(`DELETE FROM `+table+` WHERE substr(id, 1, 16) = ?`, ref[1:]).Error; err != nil {
			return err
		}
		return audit.Record(t, "session.end", "session", ended.Actor,
			map[string]any{"session": ended.Actor, "role": ended.Role, "since": ended.Since.UTC().Format(time.RFC3339), "reason": "ended by an admin"}, nil)
	})
	return ended, err
}
