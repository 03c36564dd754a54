package allocator

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/models"
)

// Role is an API role; roles nest: admin ⊃ operator ⊃ viewer (DESIGN.md §10).
type Role string

// The three roles of DESIGN.md §5.
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
func (a *Allocator) CreateToken(ctx context.Context, name string, role Role, value string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 128 {
		return "", Errf(CodeInvalid, "name", "token name must be 1 to 128 characters")
	}
	if role.rank() == 0 {
		return "", Errf(CodeInvalid, "role", "unknown role %q: want viewer, operator or admin", role)
	}
	if value == "" {
		value = NewTokenValue()
	} else if len(value) < 16 {
		return "", Errf(CodeInvalid, "token", "a token must be at least 16 characters")
	}
	err := a.write(ctx, func(t *tx) error {
		row := models.APIToken{Name: name, Role: string(role), TokenHash: hashToken(value), CreatedAt: t.now}
		if err := t.Create(&row).Error; err != nil {
			return err
		}
		return t.audit("token.create", "token", name, nil, map[string]any{"id": row.ID, "name": name, "role": role})
	})
	return value, err
}

// EnsureAdminToken makes sure a token with exactly this value and role admin
// exists (IPLEDGER_ADMIN_TOKEN at start). It answers whether it created it.
func (a *Allocator) EnsureAdminToken(ctx context.Context, value string) (bool, error) {
	var rows []models.APIToken
	if err := a.read(ctx, func(db *gorm.DB) error {
		return db.Where("token_hash = ?", hashToken(value)).Find(&rows).Error
	}); err != nil {
		return false, err
	}
	if len(rows) > 0 {
		if rows[0].Role == string(RoleAdmin) {
			return false, nil
		}
		err := a.write(ctx, func(t *tx) error {
			return t.Model(&models.APIToken{}).Where("id = ?", rows[0].ID).Update("role", string(RoleAdmin)).Error
		})
		a.tokensChanged()
		return false, err
	}
	_, err := a.CreateToken(ctx, "bootstrap-admin", RoleAdmin, value)
	if e, ok := AsError(err); ok && e.Code == CodeConflict {
		return false, nil // another process created it at the same moment
	}
	return err == nil, err
}

// HasAdminToken reports whether any admin token exists.
func (a *Allocator) HasAdminToken(ctx context.Context) (bool, error) {
	var n int64
	err := a.read(ctx, func(db *gorm.DB) error {
		return db.Model(&models.APIToken{}).Where("role = ?", string(RoleAdmin)).Count(&n).Error
	})
	return n > 0, err
}

// Authenticate finds the token with this value; unknown is 401. While
// ListenForTokenChanges runs it answers known tokens from memory; any
// change to api_tokens, from any process, empties that memory.
func (a *Allocator) Authenticate(ctx context.Context, value string) (*Token, error) {
	if value == "" {
		return nil, Errf(CodeUnauthorized, "", "a bearer token is required")
	}
	hash := hashToken(value)
	cached, ok, gen := a.tokens.get(hash)
	if ok {
		return &cached, nil
	}
	var row models.APIToken
	tokenReads.Add(1)
	err := a.read(ctx, func(db *gorm.DB) error { return db.Where("token_hash = ?", hash).Take(&row).Error })
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, Errf(CodeUnauthorized, "", "unknown token")
	}
	if err != nil {
		return nil, err
	}
	tok := Token{ID: row.ID, Name: row.Name, Role: Role(row.Role)}
	a.tokens.put(hash, tok, gen)
	return &tok, nil
}

// tokensChanged empties this process's token cache after its own write to
// api_tokens, so that its next request cannot be answered from memory
// before the notification of that write arrives.
func (a *Allocator) tokensChanged() {
	a.tokens.flush()
}
