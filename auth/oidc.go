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

// DiscoveryRetryEvery is the default shortest time between two discovery
// attempts while the issuer is unreachable: the background retries start
// there and double up to discoveryRetryMax; a caller that needs the issuer
// (the login page, a bearer JWT) brings the next attempt forward, but
// never closer than this to the last.
const DiscoveryRetryEvery = 5 * time.Second

// discoveryRetryMax caps the background retries' backoff.
const discoveryRetryMax = time.Minute

// maxEndSessionURL bounds the sign-out URL with its id_token_hint: the
// request line limit of common web servers and proxies in front of
// issuers (nginx, Envoy) is 8 KiB.
const maxEndSessionURL = 8000

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
	// DiscoveryRetry is the shortest time between two discovery attempts
	// (default DiscoveryRetryEvery).
	DiscoveryRetry time.Duration
	Log            *slog.Logger
}

// OIDC is ipledger's OpenID Connect relying party (console sign-in) and
// its verifier of bearer JWTs from the same issuer. Discovery (the
// discovery document and the key set) runs in a background goroutine
// until it succeeds; nothing else ever waits for it. Every other method
// answers from what discovery has found so far, so an issuer that is down,
// or that accepts connections and never answers, never stops the server
// nor holds up a page or a request: it only makes SSO and JWTs
// unavailable until it answers.
type OIDC struct {
	cfg OIDCConfig

	// retryEvery is the shortest time between two discovery attempts
	// while the issuer is unreachable; retryMax caps the backoff.
	retryEvery, retryMax time.Duration

	// kick asks the background discovery to try again now (buffered: a
	// caller never waits on it).
	kick chan struct{}

	mu      sync.Mutex
	d       *discovered
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
	if cfg.DiscoveryRetry <= 0 {
		cfg.DiscoveryRetry = DiscoveryRetryEvery
	}
	cfg.ExternalURL = strings.TrimRight(cfg.ExternalURL, "/")
	o := &OIDC{cfg: cfg, retryEvery: cfg.DiscoveryRetry, retryMax: max(discoveryRetryMax, cfg.DiscoveryRetry), kick: make(chan struct{}, 1)}
	go o.discoverLoop()
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

// Ready reports whether discovery has succeeded. It never waits: while
// discovery has not succeeded it asks for another attempt (see
// discoverLoop) and answers false.
func (o *OIDC) Ready() bool {
	_, err := o.current()
	return err == nil
}

// current returns what discovery found, or why there is nothing yet,
// without waiting; when there is nothing it asks the background discovery
// to try again.
func (o *OIDC) current() (*discovered, error) {
	o.mu.Lock()
	d, err := o.d, o.lastErr
	o.mu.Unlock()
	if d != nil {
		return d, nil
	}
	select {
	case o.kick <- struct{}{}:
	default:
	}
	if err == nil {
		err = fmt.Errorf("single sign-on is unavailable: the issuer %s has not answered discovery yet", o.cfg.Issuer)
	}
	return nil, err
}

// discoverLoop runs discovery until it succeeds: at once, then again after
// a backoff that starts at retryEvery and doubles up to retryMax. A kick
// (someone needed the issuer) starts the next attempt early, but never
// sooner than retryEvery after the last one, so an unreachable issuer
// costs it at most one request per retryEvery however busy the login page
// is. Each attempt is bounded by load's timeout.
func (o *OIDC) discoverLoop() {
	for n := 0; ; n++ {
		if n > 0 {
			o.wait(n)
		}
		o.mu.Lock()
		o.lastTry = time.Now()
		o.mu.Unlock()
		d, err := o.load(context.Background())
		o.mu.Lock()
		if err == nil {
			o.d, o.lastErr = d, nil
			o.mu.Unlock()
			o.cfg.Log.Info("OIDC issuer discovered", "issuer", o.cfg.Issuer, "end_session", d.endSession != "")
			return
		}
		o.lastErr = fmt.Errorf("single sign-on is unavailable: the issuer %s does not answer discovery: %v", o.cfg.Issuer, err)
		o.mu.Unlock()
		o.cfg.Log.Warn("OIDC discovery failed; retrying in the background", "issuer", o.cfg.Issuer, "attempt", n+1, "error", err.Error())
	}
}

// wait sleeps before the attempt after n failed ones: the backoff, cut
// short by a kick once retryEvery has passed since the last attempt.
func (o *OIDC) wait(n int) {
	o.mu.Lock()
	every, most, last := o.retryEvery, o.retryMax, o.lastTry
	o.mu.Unlock()
	backoff := every
	for i := 1; i < n && backoff < most; i++ {
		backoff *= 2
	}
	timer := time.NewTimer(min(backoff, most))
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return
		case <-o.kick:
			o.mu.Lock()
			every = o.retryEvery
			o.mu.Unlock()
			if time.Since(last) >= every {
				return
			}
		}
	}
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
	// The key set is fetched now, so that the first bearer JWT or sign-in
	// after discovery does not wait on the issuer.
	if err := keys.prime(ctx); err != nil {
		return nil, err
	}
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
	d, err := o.current()
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
	// IDToken is the ID token of a sign-in through the issuer (empty for
	// a bearer JWT or the proxy): kept sealed with the session, for
	// sign-out's id_token_hint, and remembered by hash until
	// IDTokenExpires, as no bearer credential (signin_tokens.go).
	IDToken        Secret
	IDTokenExpires time.Time
}

// NoRoleError refuses a person none of whose groups has a role.
type NoRoleError struct {
	Name   string
	Claim  string
	Groups []string
	// IDToken and IDTokenExpires are the ID token of a refused sign-in
	// (empty for a bearer JWT or the proxy): it reached ipledger, and is
	// remembered as no bearer credential all the same.
	IDToken        Secret
	IDTokenExpires time.Time
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
// token (signature against the issuer's JWKS, iss, aud, exp, nonce, azp), reads
// the name and groups (from the ID token, else from userinfo) and maps the
// groups to a role.
func (o *OIDC) Finish(ctx context.Context, st LoginState, state, code string) (*Person, error) {
	if st.State == "" || subtle.ConstantTimeCompare([]byte(st.State), []byte(state)) != 1 {
		return nil, &LoginError{"the state parameter does not match this browser's sign-in"}
	}
	if code == "" {
		return nil, &LoginError{"the issuer sent no code"}
	}
	d, err := o.current()
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
	exp, _ := numericDate(claims["exp"]) // checkTimes required it
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(st.Nonce)) != 1 {
		return nil, &LoginError{"the ID token's nonce is not this sign-in's"}
	}
	if err := checkAZP(idt.Audience, claims["azp"], o.cfg.ClientID); err != nil {
		return nil, &LoginError{err.Error()}
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
		return nil, &NoRoleError{Name: name, Claim: o.cfg.GroupsClaim, Groups: groups, IDToken: Secret(raw), IDTokenExpires: exp}
	}
	return &Person{Actor: "user:" + name, Name: name, Role: role, IDToken: Secret(raw), IDTokenExpires: exp}, nil
}

// checkAZP holds an ID token to OIDC Core 3.1.3.7: one with several
// audiences must name ipledger's client as its authorized party (azp),
// and an azp, when present, must be the client id. An ID token issued to
// another client that merely lists ipledger among its audiences is that
// client's sign-in, not ours.
func checkAZP(aud []string, azp any, clientID string) error {
	s, present := azp.(string)
	switch {
	case azp != nil && (!present || s != clientID):
		return fmt.Errorf("the ID token was issued to another client (azp %.80q), not %s", fmt.Sprint(azp), clientID)
	case len(aud) > 1 && azp == nil:
		return fmt.Errorf("the ID token has several audiences (%s) and no azp naming %s", strings.Join(aud, ", "), clientID)
	}
	return nil
}

// EndSessionURL is the issuer's end_session_endpoint with client_id,
// post_logout_redirect_uri (the login page) and, when the session kept
// it, id_token_hint (the ID token of the sign-in: Okta requires it, others
// use it to skip asking the person to confirm), or "" when the issuer has
// none (or is unreachable): logout then ends only ipledger's session.
func (o *OIDC) EndSessionURL(idTokenHint Secret) string {
	d, err := o.current()
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
	plain := d.endSession + sep + q.Encode()
	if idTokenHint == "" {
		return plain
	}
	q.Set("id_token_hint", idTokenHint.Reveal())
	if u := d.endSession + sep + q.Encode(); len(u) <= maxEndSessionURL {
		return u
	}
	// A URL this long would be refused by the issuer's front end (many
	// allow 8 KB of request line): sign out without the hint.
	return plain
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
