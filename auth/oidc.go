package auth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// Leeway is the clock skew tolerated on a token's exp and nbf.
const Leeway = 60 * time.Second

// discoveryRetryEvery is the shortest time between two discovery attempts
// while the issuer is unreachable.
const discoveryRetryEvery = 5 * time.Second

// CallbackPath is where the issuer sends the browser back: the redirect
// URI to register is EXTERNAL_URL + CallbackPath.
const CallbackPath = "/auth/oidc/callback"

// OIDCConfig configures single sign-on (docs/identity.md).
type OIDCConfig struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	// ExternalURL is the URL people use to reach ipledger.
	ExternalURL   string
	Scopes        []string
	GroupsClaim   string
	UsernameClaim string
	// APIAudience is what a bearer JWT's aud must contain (default the
	// client id).
	APIAudience string
	Roles       RoleMap
	// HTTPClient talks to the issuer (default: 10 s timeout).
	HTTPClient *http.Client
	// Now is the clock of token checks (tests); default time.Now.
	Now func() time.Time
	Log *slog.Logger
}

// OIDC is ipledger's OpenID Connect relying party (console sign-in) and
// its verifier of bearer JWTs from the same issuer. Discovery happens in
// the background and again on demand while the issuer is unreachable: an
// unreachable issuer never stops the server, it only makes SSO and JWTs
// unavailable until it answers.
type OIDC struct {
	cfg OIDCConfig

	// retryEvery is the shortest time between two discovery attempts
	// while the issuer is unreachable.
	retryEvery time.Duration

	mu      sync.Mutex
	d       *discovered
	attempt chan struct{} // closed when the running discovery ends
	lastTry time.Time
	lastErr error
}

type discovered struct {
	provider   *oidc.Provider
	keys       *keySet
	idTokens   *oidc.IDTokenVerifier
	apiTokens  *oidc.IDTokenVerifier
	oauth      oauth2.Config
	endSession string
}

// NewOIDC returns the relying party and starts discovery in the
// background.
func NewOIDC(cfg OIDCConfig) *OIDC {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = "groups"
	}
	if cfg.UsernameClaim == "" {
		cfg.UsernameClaim = "preferred_username"
	}
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = []string{oidc.ScopeOpenID, "profile", "email"}
	}
	if cfg.APIAudience == "" {
		cfg.APIAudience = cfg.ClientID
	}
	cfg.ExternalURL = strings.TrimRight(cfg.ExternalURL, "/")
	o := &OIDC{cfg: cfg, retryEvery: discoveryRetryEvery}
	go func() { _, _ = o.discover(context.Background()) }()
	return o
}

// GroupsClaim is the claim groups are read from (the refusal page names
// it).
func (o *OIDC) GroupsClaim() string { return o.cfg.GroupsClaim }

// IssuerOrigin is the issuer's scheme://host[:port], where sign-out sends
// the browser.
func (o *OIDC) IssuerOrigin() string {
	u, err := url.Parse(o.cfg.Issuer)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// RedirectURL is the redirect URI to register at the issuer.
func (o *OIDC) RedirectURL() string { return o.cfg.ExternalURL + CallbackPath }

// Ready reports whether discovery has succeeded, trying again when the
// last attempt is old enough.
func (o *OIDC) Ready(ctx context.Context) bool {
	_, err := o.discover(ctx)
	return err == nil
}

func (o *OIDC) discover(ctx context.Context) (*discovered, error) {
	o.mu.Lock()
	if d := o.d; d != nil {
		o.mu.Unlock()
		return d, nil
	}
	// One attempt at a time: a caller arriving during one waits for its
	// outcome (bounded by the attempt's own timeout), and none starts
	// sooner than retryEvery after the last, so an issuer that does not
	// answer costs each request at most one wait.
	if w := o.attempt; w != nil {
		o.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		o.mu.Lock()
		d, err := o.d, o.lastErr
		o.mu.Unlock()
		if d != nil {
			return d, nil
		}
		return nil, err
	}
	if !o.lastTry.IsZero() && time.Since(o.lastTry) < o.retryEvery {
		err := o.lastErr
		o.mu.Unlock()
		return nil, err
	}
	w := make(chan struct{})
	o.attempt, o.lastTry = w, time.Now()
	o.mu.Unlock()

	d, err := o.load(context.WithoutCancel(ctx))

	o.mu.Lock()
	defer o.mu.Unlock()
	o.attempt = nil
	close(w)
	if err != nil {
		o.lastErr = fmt.Errorf("single sign-on is unavailable: the issuer %s does not answer discovery: %v", o.cfg.Issuer, err)
		o.cfg.Log.Warn("OIDC discovery failed; retrying on demand", "issuer", o.cfg.Issuer, "error", err.Error())
		return nil, o.lastErr
	}
	o.d, o.lastErr = d, nil
	o.cfg.Log.Info("OIDC issuer discovered", "issuer", o.cfg.Issuer, "end_session", d.endSession != "")
	return d, nil
}

func (o *OIDC) load(ctx context.Context) (*discovered, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, o.cfg.HTTPClient), o.cfg.Issuer)
	if err != nil {
		return nil, err
	}
	var meta struct {
		JWKSURI    string `json:"jwks_uri"`
		EndSession string `json:"end_session_endpoint"`
	}
	if err := p.Claims(&meta); err != nil {
		return nil, err
	}
	if meta.JWKSURI == "" {
		return nil, errors.New("the discovery document has no jwks_uri")
	}
	keys := newKeySet(meta.JWKSURI, o.cfg.HTTPClient, o.cfg.Now)
	algs := make([]string, len(AsymmetricAlgs))
	for i, a := range AsymmetricAlgs {
		algs[i] = string(a)
	}
	verifier := func(aud string) *oidc.IDTokenVerifier {
		// exp and nbf are checked by checkTimes with Leeway; go-oidc's
		// own check has none on exp and five minutes on nbf.
		return oidc.NewVerifier(o.cfg.Issuer, keys, &oidc.Config{ClientID: aud, SupportedSigningAlgs: algs, SkipExpiryCheck: true})
	}
	return &discovered{
		provider:  p,
		keys:      keys,
		idTokens:  verifier(o.cfg.ClientID),
		apiTokens: verifier(o.cfg.APIAudience),
		oauth: oauth2.Config{
			ClientID: o.cfg.ClientID, ClientSecret: o.cfg.ClientSecret,
			Endpoint: p.Endpoint(), RedirectURL: o.RedirectURL(), Scopes: o.cfg.Scopes,
		},
		endSession: meta.EndSession,
	}, nil
}

// LoginState is what the browser keeps between the start of a sign-in and
// the callback (a signed, HttpOnly cookie): the state that binds the
// callback to this browser, the nonce the ID token must carry, the PKCE
// verifier, and where to go afterwards.
type LoginState struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Next     string `json:"x"`
}

func random() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Begin starts a sign-in: the issuer's authorization URL (code flow,
// PKCE S256, state, nonce) and the state to keep.
func (o *OIDC) Begin(ctx context.Context, next string) (string, LoginState, error) {
	d, err := o.discover(ctx)
	if err != nil {
		return "", LoginState{}, err
	}
	st := LoginState{State: random(), Nonce: random(), Verifier: oauth2.GenerateVerifier(), Next: next}
	u := d.oauth.AuthCodeURL(st.State, oidc.Nonce(st.Nonce), oauth2.S256ChallengeOption(st.Verifier))
	return u, st, nil
}

// Person is who a sign-in, a bearer JWT or the trusted proxy identified.
type Person struct {
	// Actor is the audit actor: "user:NAME" (or "service:SUB" for a
	// bearer JWT that names no user).
	Actor string
	Name  string
	Role  Role
}

// NoRoleError refuses a person none of whose groups has a role.
type NoRoleError struct {
	Name   string
	Claim  string
	Groups []string
}

func (e *NoRoleError) Error() string {
	return fmt.Sprintf("%s has no ipledger role: none of the groups in %s (%s) is mapped to a role",
		e.Name, e.Claim, strings.Join(e.Groups, ", "))
}

// LoginError is a refused callback: a wrong state, a code the issuer
// would not exchange, an ID token that does not verify. Its message names
// what failed, never a token.
type LoginError struct{ Reason string }

func (e *LoginError) Error() string { return "sign-in refused: " + e.Reason }

// Finish ends a sign-in at the callback: it checks state against the
// browser's, exchanges the code with the PKCE verifier, verifies the ID
// token (signature against the issuer's JWKS, iss, aud, exp, nonce), reads
// the name and groups (from the ID token, else from userinfo) and maps the
// groups to a role.
func (o *OIDC) Finish(ctx context.Context, st LoginState, state, code string) (*Person, error) {
	if st.State == "" || subtle.ConstantTimeCompare([]byte(st.State), []byte(state)) != 1 {
		return nil, &LoginError{"the state parameter does not match this browser's sign-in"}
	}
	if code == "" {
		return nil, &LoginError{"the issuer sent no code"}
	}
	d, err := o.discover(ctx)
	if err != nil {
		return nil, err
	}
	hctx := oidc.ClientContext(ctx, o.cfg.HTTPClient)
	tok, err := d.oauth.Exchange(hctx, code, oauth2.VerifierOption(st.Verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			return nil, &LoginError{fmt.Sprintf("the issuer refused the code (%s)", re.ErrorCode)}
		}
		return nil, &LoginError{"exchanging the code failed: " + err.Error()}
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, &LoginError{"the issuer returned no ID token"}
	}
	idt, err := d.idTokens.Verify(hctx, raw)
	if err != nil {
		return nil, &LoginError{"the ID token does not verify: " + err.Error()}
	}
	claims := map[string]any{}
	if err := idt.Claims(&claims); err != nil {
		return nil, &LoginError{"the ID token's claims do not parse"}
	}
	if err := checkTimes(claims, o.cfg.Now()); err != nil {
		return nil, &LoginError{err.Error()}
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(st.Nonce)) != 1 {
		return nil, &LoginError{"the ID token's nonce is not this sign-in's"}
	}
	groups, present, err := groupsFrom(claims, o.cfg.GroupsClaim)
	if err != nil {
		return nil, &LoginError{err.Error()}
	}
	if !present && d.provider.UserInfoEndpoint() != "" {
		ui, err := d.provider.UserInfo(hctx, oauth2.StaticTokenSource(tok))
		if err != nil {
			return nil, &LoginError{"reading userinfo failed: " + err.Error()}
		}
		uclaims := map[string]any{}
		if err := ui.Claims(&uclaims); err != nil {
			return nil, &LoginError{"the userinfo answer does not parse"}
		}
		if ui.Subject != idt.Subject {
			return nil, &LoginError{"userinfo describes another subject than the ID token"}
		}
		if groups, _, err = groupsFrom(uclaims, o.cfg.GroupsClaim); err != nil {
			return nil, &LoginError{err.Error()}
		}
		for k, v := range uclaims {
			if _, ok := claims[k]; !ok {
				claims[k] = v
			}
		}
	}
	name, err := usernameFrom(claims, o.cfg.UsernameClaim)
	if err != nil {
		return nil, &LoginError{err.Error()}
	}
	role, ok := o.cfg.Roles.Role(groups)
	if !ok {
		return nil, &NoRoleError{Name: name, Claim: o.cfg.GroupsClaim, Groups: groups}
	}
	return &Person{Actor: "user:" + name, Name: name, Role: role}, nil
}

// EndSessionURL is the issuer's end_session_endpoint with client_id and
// post_logout_redirect_uri (the login page), or "" when the issuer has
// none (or is unreachable): logout then ends only ipledger's session.
func (o *OIDC) EndSessionURL(ctx context.Context) string {
	d, err := o.discover(ctx)
	if err != nil || d.endSession == "" || !strings.HasPrefix(d.endSession, o.IssuerOrigin()+"/") {
		// An endpoint on another origin would be blocked by the console's
		// form-action policy.
		return ""
	}
	sep := "?"
	if strings.Contains(d.endSession, "?") {
		sep = "&"
	}
	q := url.Values{"client_id": {o.cfg.ClientID}, "post_logout_redirect_uri": {o.cfg.ExternalURL + "/login"}}
	return d.endSession + sep + q.Encode()
}

// checkTimes checks exp (required) and nbf with Leeway.
func checkTimes(claims map[string]any, now time.Time) error {
	exp, ok := numericDate(claims["exp"])
	if !ok {
		return errors.New("the token has no exp")
	}
	if now.After(exp.Add(Leeway)) {
		return fmt.Errorf("the token expired at %s", exp.UTC().Format(time.RFC3339))
	}
	if v, present := claims["nbf"]; present {
		nbf, ok := numericDate(v)
		if !ok {
			return errors.New("the token's nbf is not a date")
		}
		if now.Add(Leeway).Before(nbf) {
			return fmt.Errorf("the token is not valid before %s", nbf.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

func numericDate(v any) (time.Time, bool) {
	switch n := v.(type) {
	case float64:
		return time.Unix(int64(n), 0), true
	case json.Number:
		f, err := n.Float64()
		return time.Unix(int64(f), 0), err == nil
	}
	return time.Time{}, false
}
