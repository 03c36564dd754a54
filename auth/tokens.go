package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/txn"
)

// Role is an API role; roles nest: admin ⊃ operator ⊃ viewer (docs/api.md).
type Role string

// The three roles of docs/api.md.
const (
	RoleViewer   Role = "viewer"
	RoleOperator Role = "operator"
	RoleAdmin    Role = "admin"
)

// ParseRole accepts exactly the three role names.
func ParseRole(s string) (Role, bool) {
	switch Role(s) {
	case RoleViewer, RoleOperator, RoleAdmin:
		return Role(s), true
	}
	return "", false
}

func (r Role) rank() int {
	switch r {
	case RoleViewer:
		return 1
	case RoleOperator:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

// Allows reports whether r includes need.
func (r Role) Allows(need Role) bool { return r.rank() >= need.rank() && need.rank() > 0 }

// Token is an API token's public part.
type Token struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
	Role Role   `json:"role"`
}

func hashToken(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

// NewTokenValue returns a fresh random token: "ipl_" and 43 base64url
// characters (256 bits).
func NewTokenValue() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return "ipl_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// CreateToken stores a token (only its SHA-256) with a name and role. An
// empty value gets a fresh random one. It returns the value to show once.
func (s *Service) CreateToken(ctx context.Context, name string, role Role, value string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 128 {
		return "", fault.Errf(fault.CodeInvalid, "name", "token name must be 1 to 128 characters")
	}
	if role.rank() == 0 {
		return "", fault.Errf(fault.CodeInvalid, "role", "unknown role %q: want viewer, operator or admin", role)
	}
	if value == "" {
		value = NewTokenValue()
	} else if len(value) < 16 {
		return "", fault.Errf(fault.CodeInvalid, "token", "a token must be at least 16 characters")
	}
	err := s.write(ctx, func(t *txn.Tx) error {
		// Token names are unique (the audit actor token:NAME names one
		// token); the unique index of migration 12 backs this check.
		var taken []models.APIToken
		if err := t.Where("name = ?", name).Limit(1).Find(&taken).Error; err != nil {
			return err
		}
		if len(taken) > 0 {
			return tokenNameTaken(name, taken[0].ID)
		}
		row := models.APIToken{Name: name, Role: string(role), TokenHash: hashToken(value), CreatedAt: t.Now}
		if err := t.Create(&row).Error; err != nil {
			if database.IsConstraintViolation(err) && strings.Contains(err.Error(), "name") {
				return tokenNameTaken(name, 0)
			}
			return err
		}
		return audit.Record(t, "token.create", "token", name, nil, map[string]any{"id": row.ID, "name": name, "role": role})
	})
	return value, err
}

// EnsureAdminToken makes sure a token with exactly this value and role admin
// exists (IPLEDGER_ADMIN_TOKEN at start). It answers whether it created it.
func (s *Service) EnsureAdminToken(ctx context.Context, value string) (bool, error) {
	var rows []models.APIToken
	if err := s.read(ctx, func(db *gorm.DB) error {
		return db.Where("token_hash = ?", hashToken(value)).Find(&rows).Error
	}); err != nil {
		return false, err
	}
	if len(rows) > 0 {
		if rows[0].Role == string(RoleAdmin) {
			return false, nil
		}
		err := s.write(ctx, func(t *txn.Tx) error {
			return t.Model(&models.APIToken{}).Where("id = ?", rows[0].ID).Update("role", string(RoleAdmin)).Error
		})
		s.tokensChanged()
		return false, err
	}
	// A token named bootstrap-admin may exist with another value (the
	// variable was changed): this one gets a name of its own.
	for _, name := range []string{"bootstrap-admin", "bootstrap-admin-" + hashToken(value)[:8]} {
		_, err := s.CreateToken(ctx, name, RoleAdmin, value)
		e, ok := fault.AsError(err)
		if !ok || e.Code != fault.CodeConflict {
			return err == nil, err
		}
		// Another process may have created it at the same moment.
		if err := s.read(ctx, func(db *gorm.DB) error {
			return db.Where("token_hash = ?", hashToken(value)).Find(&rows).Error
		}); err != nil {
			return false, err
		}
		if len(rows) > 0 {
			return false, nil
		}
	}
	return false, fault.Errf(fault.CodeConflict, "name", "cannot name the IPLEDGER_ADMIN_TOKEN token: bootstrap-admin and its variant are taken")
}

func tokenNameTaken(name string, id int64) error {
	if id != 0 {
		return fault.Errf(fault.CodeConflict, "name", "a token named %q already exists (id %d): token names are unique, choose another or delete that one", name, id)
	}
	return fault.Errf(fault.CodeConflict, "name", "a token named %q already exists: token names are unique, choose another or delete that one", name)
}

// TokenNameDuplicates lists the token names that several tokens shared
// before names became unique (migration 12 keeps them all): `ipledger
// migrate` and the start-up log report them, so that an operator deletes
// the extra ones by id.
func TokenNameDuplicates(ctx context.Context, db *gorm.DB) ([]string, error) {
	var names []string
	err := db.WithContext(ctx).Raw(`SELECT name FROM api_tokens GROUP BY name HAVING COUNT(*) > 1 ORDER BY name`).Scan(&names).Error
	return names, err
}

// HasAdminToken reports whether any admin token exists.
func (s *Service) HasAdminToken(ctx context.Context) (bool, error) {
	var n int64
	err := s.read(ctx, func(db *gorm.DB) error {
		return db.Model(&models.APIToken{}).Where("role = ?", string(RoleAdmin)).Count(&n).Error
	})
	return n > 0, err
}

// Authenticate finds the token with this value; unknown is 401. While
// ListenForTokenChanges runs it answers known tokens from memory; any
// change to api_tokens, from any process, empties that memory.
func (s *Service) Authenticate(ctx context.Context, value string) (*Token, error) {
	if value == "" {
		return nil, fault.Errf(fault.CodeUnauthorized, "", "a bearer token is required")
	}
	hash := hashToken(value)
	cached, ok, gen := s.tokens.get(hash)
	if ok {
		return &cached, nil
	}
	var row models.APIToken
	s.tokenReads.Add(1)
	err := s.read(ctx, func(db *gorm.DB) error { return db.Where("token_hash = ?", hash).Take(&row).Error })
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fault.Errf(fault.CodeUnauthorized, "", "unknown token")
	}
	if err != nil {
		return nil, err
	}
	tok := Token{ID: row.ID, Name: row.Name, Role: Role(row.Role)}
	s.tokens.put(hash, tok, gen)
	return &tok, nil
}

// tokensChanged empties this process's token cache after its own write to
// api_tokens, so that its next request cannot be answered from memory
// before the notification of that write arrives.
func (s *Service) tokensChanged() {
	s.tokens.flush()
}

// TokenByID returns the token with this id (its current name and role), or
// 401 unauthorized when it no longer exists: a console session carries the
// id of the token it was opened with and is re-checked on every request.
func (s *Service) TokenByID(ctx context.Context, id int64) (*Token, error) {
	var row models.APIToken
	err := s.read(ctx, func(db *gorm.DB) error { return db.Where("id = ?", id).Take(&row).Error })
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fault.Errf(fault.CodeUnauthorized, "", "the token of this session no longer exists")
	}
	if err != nil {
		return nil, err
	}
	return &Token{ID: row.ID, Name: row.Name, Role: Role(row.Role)}, nil
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
func (s *Service) ListTokens(ctx context.Context) ([]TokenInfo, error) {
	var rows []models.APIToken
	if err := s.read(ctx, func(db *gorm.DB) error { return db.Order("id").Find(&rows).Error }); err != nil {
		return nil, err
	}
	type cnt struct {
		TokenID int64
		N       int64
	}
	var cs []cnt
	if err := s.read(ctx, func(db *gorm.DB) error {
		return db.Raw(`SELECT token_id, COUNT(*) AS n FROM console_sessions WHERE expires_at > ? GROUP BY token_id`, s.now().Unix()).Scan(&cs).Error
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
func (s *Service) DeleteToken(ctx context.Context, id int64, name string) (*Token, error) {
	var out *Token
	err := s.write(ctx, func(t *txn.Tx) error {
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
			return fault.Errf(fault.CodeNotFound, field, "no token with id %d", id)
		case len(rows) == 0:
			return fault.Errf(fault.CodeNotFound, field, "no token named %q", name)
		case len(rows) > 1:
			return fault.Errf(fault.CodeConflict, field, "%d tokens are named %q: delete one by --id", len(rows), name)
		}
		r := rows[0]
		if err := t.Exec(`DELETE FROM console_sessions WHERE token_id = ?`, r.ID).Error; err != nil {
			return err
		}
		if err := t.Exec(`DELETE FROM api_tokens WHERE id = ?`, r.ID).Error; err != nil {
			return err
		}
		out = &Token{ID: r.ID, Name: r.Name, Role: Role(r.Role)}
		return audit.Record(t, "token.delete", "token", r.Name, map[string]any{"id": r.ID, "name": r.Name, "role": r.Role}, nil)
	})
	s.tokensChanged()
	return out, err
}
