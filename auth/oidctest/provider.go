// Package oidctest runs a real OpenID Connect provider inside a test
// process: zitadel's op package with its example storage and login page
// (discovery, JWKS, authorization code with PKCE, userinfo, end session),
// with the users and groups a test gives it.
package oidctest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// User is a person the provider knows.
type User struct {
	Username string
	Password string
	Email    string
	Groups   []string
}

// Options shape the provider.
type Options struct {
	// Users by id (the ID token's sub).
	Users map[string]User
	// RedirectURIs registered for the client.
	RedirectURIs []string
	// PostLogoutRedirectURIs registered for the client: where its
	// end_session_endpoint may send the browser after sign-out.
	PostLogoutRedirectURIs []string
	// GroupsInIDToken puts the groups (and the profile claims) in the ID
	// token; otherwise they come only from the userinfo endpoint.
	GroupsInIDToken bool
	// JWTAccessTokens makes the provider's access tokens JWTs (RFC 9068
	// style, as Keycloak's, Okta's and Entra's are) instead of opaque
	// strings: audience the client id, no nonce, and the person's
	// preferred_username and groups, as an issuer's claim mappers add
	// them. The client-credentials service (ServiceClientID) gets JWTs
	// addressed to the client id too, with ServiceGroups.
	JWTAccessTokens bool
	// ServiceGroups are the groups of the client-credentials service's
	// access tokens.
	ServiceGroups []string
}

// ServiceClientID and ServiceClientSecret are the provider's
// client-credentials service: a machine client of the issuer (the
// example storage's service user).
const (
	ServiceClientID     = "sid1"
	ServiceClientSecret = "verysecret"
)

// Provider is a running provider.
type Provider struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	Server       *httptest.Server
	st           *store
	down         atomic.Bool
}

// SetDown makes every endpoint answer 503 (an unreachable issuer) or
// serve again.
func (p *Provider) SetDown(down bool) { p.down.Store(down) }

// Start runs a provider until the test ends.
func Start(t testing.TB, o Options) *Provider {
	t.Helper()
	var mu sync.Mutex
	var h http.Handler
	var p *Provider
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		mu.Lock()
		hh := h
		mu.Unlock()
		hh.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p = &Provider{Issuer: srv.URL, ClientID: "ipledger-test", ClientSecret: "ipledger-test-secret-0123456789", Server: srv}
	users := users{}
	for id, u := range o.Users {
		users[id] = u
	}
	client := storage.WebClient(p.ClientID, p.ClientSecret, o.RedirectURIs...)
	st := &store{Storage: storage.NewStorageWithClients(users, map[string]*storage.Client{p.ClientID: client}), users: users,
		inIDToken: o.GroupsInIDToken, postLogout: o.PostLogoutRedirectURIs,
		jwtAccess: o.JWTAccessTokens, serviceGroups: o.ServiceGroups, audience: p.ClientID}
	p.st = st
	router := exampleop.SetupServer(p.Issuer, st, nil, false)
	mu.Lock()
	h = router
	mu.Unlock()
	return p
}

type users map[string]User

func (u users) toStorage(id string) *storage.User {
	x, ok := u[id]
	if !ok {
		return nil
	}
	return &storage.User{ID: id, Username: x.Username, Password: x.Password, Email: x.Email, EmailVerified: true, FirstName: x.Username, LastName: "Test"}
}

func (u users) GetUserByID(id string) *storage.User { return u.toStorage(id) }
func (u users) GetUserByUsername(name string) *storage.User {
	for id, x := range u {
		if x.Username == name {
			return u.toStorage(id)
		}
	}
	return nil
}
func (u users) ExampleClientID() string { return storage.ServiceUserID }

// store adds the groups claim to the example storage.
type store struct {
	*storage.Storage
	users         users
	inIDToken     bool
	postLogout    []string
	keys          keyring
	jwtAccess     bool
	serviceGroups []string
	// audience is what the service's access tokens are addressed to.
	audience string
}

type client struct {
	op.Client
	assert     bool
	postLogout []string
	jwtAccess  bool
}

func (c client) IDTokenUserinfoClaimsAssertion() bool { return c.assert }
func (c client) PostLogoutRedirectURIs() []string     { return c.postLogout }
func (c client) AccessTokenType() op.AccessTokenType {
	if c.jwtAccess {
		return op.AccessTokenTypeJWT
	}
	return c.Client.AccessTokenType()
}

func (s *store) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return client{c, s.inIDToken, s.postLogout, s.jwtAccess}, nil
}

func (s *store) ClientCredentials(ctx context.Context, id, secret string) (op.Client, error) {
	c, err := s.Storage.ClientCredentials(ctx, id, secret)
	if err != nil {
		return nil, err
	}
	return client{c, false, nil, s.jwtAccess}, nil
}

// ClientCredentialsTokenRequest addresses the service's access tokens to
// the relying party's client id, as an audience mapper does.
func (s *store) ClientCredentialsTokenRequest(ctx context.Context, id string, scopes []string) (op.TokenRequest, error) {
	if _, err := s.Storage.ClientCredentialsTokenRequest(ctx, id, scopes); err != nil {
		return nil, err
	}
	return &oidc.JWTTokenRequest{Subject: id, Audience: []string{s.audience}, Scopes: scopes}, nil
}

// GetPrivateClaimsFromScopes puts the person's name and groups (or the
// service's groups) in a JWT access token.
func (s *store) GetPrivateClaimsFromScopes(ctx context.Context, userID, clientID string, scopes []string) (map[string]any, error) {
	claims, err := s.Storage.GetPrivateClaimsFromScopes(ctx, userID, clientID, scopes)
	if err != nil {
		return nil, err
	}
	if claims == nil {
		claims = map[string]any{}
	}
	if u, ok := s.users[userID]; ok {
		claims["preferred_username"] = u.Username
		if len(u.Groups) > 0 {
			claims["groups"] = u.Groups
		}
	} else if userID == ServiceClientID && len(s.serviceGroups) > 0 {
		claims["groups"] = s.serviceGroups
	}
	return claims, nil
}

func (s *store) addGroups(ui *oidc.UserInfo, sub string) {
	if g := s.users[sub].Groups; len(g) > 0 {
		ui.AppendClaims("groups", g)
	}
}

func (s *store) SetUserinfoFromRequest(ctx context.Context, ui *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, ui, req, scopes); err != nil {
		return err
	}
	if s.inIDToken {
		s.addGroups(ui, req.GetSubject())
	}
	return nil
}

func (s *store) SetUserinfoFromToken(ctx context.Context, ui *oidc.UserInfo, tokenID, subject, origin string) error {
	if err := s.Storage.SetUserinfoFromToken(ctx, ui, tokenID, subject, origin); err != nil {
		return err
	}
	s.addGroups(ui, subject)
	return nil
}

// Exchange redeems a code at the token endpoint (as the client) and
// returns the ID token.
func (p *Provider) Exchange(redirectURI, code, verifier string) (string, error) {
	id, _, err := p.Tokens(redirectURI, code, verifier)
	return id, err
}

// Tokens redeems a code at the token endpoint (as the client) and
// returns the ID token and the access token.
func (p *Provider) Tokens(redirectURI, code, verifier string) (idToken, accessToken string, err error) {
	cfg := oauth2.Config{ClientID: p.ClientID, ClientSecret: p.ClientSecret, RedirectURL: redirectURI,
		Endpoint: oauth2.Endpoint{TokenURL: p.Issuer + "/oauth/token"}}
	tok, err := cfg.Exchange(context.Background(), code, oauth2.VerifierOption(verifier))
	if err != nil {
		return "", "", err
	}
	idToken, _ = tok.Extra("id_token").(string)
	return idToken, tok.AccessToken, nil
}

// ServiceToken is an access token of the client-credentials service
// (ServiceClientID), as a machine client of the issuer gets one.
func (p *Provider) ServiceToken() (string, error) {
	cfg := clientcredentials.Config{ClientID: ServiceClientID, ClientSecret: ServiceClientSecret,
		TokenURL: p.Issuer + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}
	tok, err := cfg.Token(context.Background())
	if err != nil {
		return "", err
	}
	return tok.AccessToken, nil
}
