package allocator

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/models"
)

// This file holds the read models and small stores the operator console
// needs beyond the REST operations: the console's session key, token
// look-up by id (a session re-checks its token on every request), and a
// pool's usage over time rebuilt from the audit log.

const sessionKeySetting = "console_session_key"

// SessionKey returns the key that signs console session cookies: 32 random
// bytes, created once in the settings table and shared by every server
// process on the same database (first writer wins; the others read it).
// The key is never audited or logged.
func (a *Allocator) SessionKey(ctx context.Context) ([]byte, error) {
	read := func() (string, error) {
		var rows []models.Setting
		err := a.read(ctx, func(db *gorm.DB) error {
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
		err := a.write(ctx, func(t *tx) error {
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
		return nil, Errf(CodeInternal, "", "settings row %s is not a 32-byte hex key", sessionKeySetting)
	}
	return key, nil
}

// TokenByID returns the token with this id (its current name and role), or
// 401 unauthorized when it no longer exists: a console session carries the
// id of the token it was opened with and is re-checked on every request.
func (a *Allocator) TokenByID(ctx context.Context, id int64) (*Token, error) {
	var row models.APIToken
	err := a.read(ctx, func(db *gorm.DB) error { return db.Where("id = ?", id).Take(&row).Error })
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, Errf(CodeUnauthorized, "", "the token of this session no longer exists")
	}
	if err != nil {
		return nil, err
	}
	return &Token{ID: row.ID, Name: row.Name, Role: Role(row.Role)}, nil
}

// UsagePoint is the number of values of a pool held at the end of one UTC
// day: Allocated (owned) and Quarantined.
type UsagePoint struct {
	Day         time.Time `json:"day"`
	Allocated   int64     `json:"allocated"`
	Quarantined int64     `json:"quarantined"`
}

// PoolUsage returns one point per UTC day for the last `days` days (today
// last) of how many values of the pool were allocated and quarantined. It
// starts from today's counts and replays the pool's allocation audit
// actions per day backwards (allocation.create +1 allocated, .release −1,
// .quarantine moves one to quarantined, .reclaim moves one back,
// .unquarantine and .quarantine_expired −1 quarantined). The per-day
// counts come from pool_usage_days, the roll-up of those audit events that
// a trigger keeps in each write's transaction (migration 6), so the cost is
// days × actions rows, not the number of events or allocations. Days
// before the pool's first event show the earliest known counts. days must
// be 1 to 366 (422 invalid); an unknown pool is 404.
func (a *Allocator) PoolUsage(ctx context.Context, pool string, days int) ([]UsagePoint, error) {
	if days < 1 || days > 366 {
		return nil, Errf(CodeInvalid, "days", "days must be 1 to 366, got %d", days)
	}
	p, err := a.GetPool(ctx, pool)
	if err != nil {
		return nil, err
	}
	sum := func(xs ...string) int64 {
		t := new(big.Int)
		for _, x := range xs {
			if n, ok := new(big.Int).SetString(x, 10); ok {
				t.Add(t, n)
			}
		}
		return t.Int64()
	}
	alloc := sum(p.Stats.Auto.Allocated, p.Stats.Explicit.Allocated)
	quar := sum(p.Stats.Auto.Quarantined, p.Stats.Explicit.Quarantined)

	now := a.now().UTC()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	since := today.AddDate(0, 0, -(days - 1))
	type row struct {
		Day    string
		Action string
		N      int64
	}
	var rows []row
	// pool_usage_days is the per-day roll-up of the pool's allocation audit
	// events, kept by a trigger in the same transaction (migration 6): at
	// most days × actions rows, whatever the number of events.
	err = a.read(ctx, func(db *gorm.DB) error {
		return db.Raw(`SELECT day, action, n FROM pool_usage_days WHERE pool = ? AND day >= ?`,
			pool, since.Format("2006-01-02")).Scan(&rows).Error
	})
	if err != nil {
		return nil, err
	}
	type delta struct{ alloc, quar int64 }
	per := map[string]delta{}
	for _, r := range rows {
		d := per[r.Day]
		switch r.Action {
		case "allocation.create":
			d.alloc += r.N
		case "allocation.release":
			d.alloc -= r.N
		case "allocation.quarantine":
			d.alloc -= r.N
			d.quar += r.N
		case "allocation.reclaim":
			d.alloc += r.N
			d.quar -= r.N
		case "allocation.unquarantine", "allocation.quarantine_expired":
			d.quar -= r.N
		}
		per[r.Day] = d
	}
	out := make([]UsagePoint, days)
	for i := days - 1; i >= 0; i-- {
		day := since.AddDate(0, 0, i)
		out[i] = UsagePoint{Day: day, Allocated: max(alloc, 0), Quarantined: max(quar, 0)}
		d := per[day.Format("2006-01-02")]
		alloc -= d.alloc
		quar -= d.quar
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Day.Before(out[j].Day) })
	return out, nil
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

func sessionHash(id string) string { return hashToken("session:" + id) }

// CreateSession stores a console session for token tokenID that ends after
// ttl without use, and returns its random id (32 bytes, base64url): the
// cookie carries the id; the database keeps only its SHA-256. Expired
// sessions are swept in the same transaction. An unknown token is 401.
func (a *Allocator) CreateSession(ctx context.Context, tokenID int64, ttl time.Duration) (string, time.Time, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", time.Time{}, err
	}
	id := base64.RawURLEncoding.EncodeToString(b[:])
	var exp time.Time
	err := a.write(ctx, func(t *tx) error {
		now := t.now
		exp = now.Add(ttl)
		var n int64
		if err := t.Model(&models.APIToken{}).Where("id = ?", tokenID).Count(&n).Error; err != nil {
			return err
		}
		if n == 0 {
			return Errf(CodeUnauthorized, "", "the token of this session no longer exists")
		}
		if err := t.Exec(`DELETE FROM console_sessions WHERE expires_at <= ?`, now.Unix()).Error; err != nil {
			return err
		}
		return t.Exec(`INSERT INTO console_sessions (id, token_id, created_at, expires_at) VALUES (?, ?, ?, ?)`,
			sessionHash(id), tokenID, now.Unix(), exp.Unix()).Error
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
func (a *Allocator) Session(ctx context.Context, id string, ttl, renewEvery time.Duration) (*ConsoleSession, error) {
	type row struct {
		TokenID   int64
		ExpiresAt int64
		Name      string
		Role      string
	}
	var rows []row
	h := sessionHash(id)
	err := a.read(ctx, func(db *gorm.DB) error {
		return db.Raw(`SELECT s.token_id, s.expires_at, t.name, t.role FROM console_sessions s
			JOIN api_tokens t ON t.id = s.token_id WHERE s.id = ?`, h).Scan(&rows).Error
	})
	if err != nil {
		return nil, err
	}
	now := a.now()
	if len(rows) == 0 || now.Unix() >= rows[0].ExpiresAt {
		return nil, Errf(CodeUnauthorized, "", "this console session has ended: sign in again")
	}
	r := rows[0]
	s := &ConsoleSession{Token: Token{ID: r.TokenID, Name: r.Name, Role: Role(r.Role)}, Expires: time.Unix(r.ExpiresAt, 0)}
	if s.Expires.Sub(now) < ttl-renewEvery {
		exp := now.Add(ttl)
		err := a.write(ctx, func(t *tx) error {
			return t.Exec(`UPDATE console_sessions SET expires_at = ? WHERE id = ? AND expires_at < ?`,
				exp.Unix(), h, exp.Unix()).Error
		})
		if err != nil {
			return nil, err
		}
		s.Expires, s.Renewed = time.Unix(exp.Unix(), 0), true
	}
	return s, nil
}

// DeleteSession ends a console session (sign out). Ending one that does
// not exist is not an error.
func (a *Allocator) DeleteSession(ctx context.Context, id string) error {
	return a.write(ctx, func(t *tx) error {
		return t.Exec(`DELETE FROM console_sessions WHERE id = ?`, sessionHash(id)).Error
	})
}

// TokenInfo is a token as `ipledger token list` shows it: never the token
// or its hash.
type TokenInfo struct {
	Token
	CreatedAt time.Time `json:"created_at"`
	// Sessions is the number of live console sessions opened with it.
	Sessions int64 `json:"sessions"`
}

// ListTokens returns every API token by id, with its live console sessions.
func (a *Allocator) ListTokens(ctx context.Context) ([]TokenInfo, error) {
	var rows []models.APIToken
	if err := a.read(ctx, func(db *gorm.DB) error { return db.Order("id").Find(&rows).Error }); err != nil {
		return nil, err
	}
	type cnt struct {
		TokenID int64
		N       int64
	}
	var cs []cnt
	if err := a.read(ctx, func(db *gorm.DB) error {
		return db.Raw(`SELECT token_id, COUNT(*) AS n FROM console_sessions WHERE expires_at > ? GROUP BY token_id`, a.now().Unix()).Scan(&cs).Error
	}); err != nil {
		return nil, err
	}
	per := map[int64]int64{}
	for _, c := range cs {
		per[c.TokenID] = c.N
	}
	out := make([]TokenInfo, 0, len(rows))
	for _, r := range rows {
		out = append(out, TokenInfo{Token: Token{ID: r.ID, Name: r.Name, Role: Role(r.Role)}, CreatedAt: r.CreatedAt, Sessions: per[r.ID]})
	}
	return out, nil
}

// DeleteToken deletes the token with this id, or with this name when id is
// 0, and every console session opened with it, in one audited transaction
// (token.delete): its REST calls and console sessions stop at once. An
// unknown token is 404; a name held by several tokens is 409 (give the id).
func (a *Allocator) DeleteToken(ctx context.Context, id int64, name string) (*Token, error) {
	var out *Token
	err := a.write(ctx, func(t *tx) error {
		var rows []models.APIToken
		q := t.Model(&models.APIToken{})
		field := "id"
		if id != 0 {
			q = q.Where("id = ?", id)
		} else {
			field = "name"
			q = q.Where("name = ?", name)
		}
		if err := q.Order("id").Find(&rows).Error; err != nil {
			return err
		}
		switch {
		case len(rows) == 0 && id != 0:
			return Errf(CodeNotFound, field, "no token with id %d", id)
		case len(rows) == 0:
			return Errf(CodeNotFound, field, "no token named %q", name)
		case len(rows) > 1:
			return Errf(CodeConflict, field, "%d tokens are named %q: delete one by --id", len(rows), name)
		}
		r := rows[0]
		if err := t.Exec(`DELETE FROM console_sessions WHERE token_id = ?`, r.ID).Error; err != nil {
			return err
		}
		if err := t.Exec(`DELETE FROM api_tokens WHERE id = ?`, r.ID).Error; err != nil {
			return err
		}
		out = &Token{ID: r.ID, Name: r.Name, Role: Role(r.Role)}
		return t.audit("token.delete", "token", r.Name, map[string]any{"id": r.ID, "name": r.Name, "role": r.Role}, nil)
	})
	a.tokensChanged()
	return out, err
}

// ParseExpectedMachinesFileRecords reads the NICo file like
// ParseExpectedMachinesFile, but a record that does not decode (a type
// error, an unknown field) fails only itself: specs[i] is record i when
// bad[i] is nil, otherwise bad[i] is its error naming
// expected_machines[i]. The console's merge import uses it so that one
// broken record does not stop the others. err is set only when the file
// as a whole is unreadable.
func ParseExpectedMachinesFileRecords(b []byte) (specs []ExpectedMachineSpec, bad []error, err error) {
	var file map[string]json.RawMessage
	if err := json.Unmarshal(b, &file); err != nil || file == nil {
		_, perr := ParseExpectedMachinesFile(b)
		return nil, nil, perr
	}
	raw, ok := file["expected_machines"]
	var elems []json.RawMessage
	if !ok || string(raw) == "null" || json.Unmarshal(raw, &elems) != nil {
		_, perr := ParseExpectedMachinesFile(b)
		return nil, nil, perr
	}
	specs = make([]ExpectedMachineSpec, len(elems))
	bad = make([]error, len(elems))
	for i, e := range elems {
		specs[i], bad[i] = decodeSpec(e, fmt.Sprintf("expected_machines[%d]", i))
	}
	return specs, bad, nil
}
