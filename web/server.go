// Package web assembles ipledger's HTTP server: routes, middleware (request
// id, structured logging, metrics, authentication, roles, CSRF for console
// sessions), the error handler, and embedded static files.
package web

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/console"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/feed"
	"github.com/ipledger/ipledger/handlers"
	"github.com/ipledger/ipledger/webhook"
)

// Config is what the server is built from.
type Config struct {
	Allocator *allocator.Allocator
	// DB is the database the services below, the audit log and the
	// readiness checks use, the allocator's own (nil: the one the
	// Allocator was made with, for tests that build a server in one line).
	DB *gorm.DB
	// Auth keeps API tokens and console sessions; nil makes one over DB.
	Auth *auth.Service
	// Feed is the change feed and Webhooks the webhooks, wired to each
	// other and to every writer's commit hook by the caller; nil makes
	// them over DB (a feed made here queues the
	// deliveries of Webhooks). Their workers run only where RunFeed and
	// Run are called: serve starts them.
	Feed     *feed.Feed
	Webhooks *webhook.Service
	Logger   *slog.Logger
	// Registry receives the server's metrics; nil makes a fresh one.
	// Ignored when Metrics is set.
	Registry *prometheus.Registry
	// Metrics are the server's metrics, made by NewMetrics before the
	// allocator so that its hooks count into them (nil: fresh metrics,
	// without allocation change and batch counts).
	Metrics *Metrics
	// SecureCookies marks console cookies Secure (set behind TLS).
	SecureCookies bool
	// RequestTimeout bounds each request's work (default 30s), so a stuck
	// database answers 503 instead of hanging.
	RequestTimeout time.Duration
	// BulkTimeout bounds the requests that carry a whole file of work —
	// a replace-all of ExpectedMachines, a bulk allocation — (default 5
	// minutes): a replace-all of 60,000 records takes seconds, but tens of
	// seconds on a machine shared with other work, and it is atomic, so
	// cutting it short loses all of it.
	BulkTimeout time.Duration
	// StreamKeepAlive is the idle interval of the event stream's comment
	// lines (15s when 0).
	StreamKeepAlive time.Duration
	// Identity configures single sign-on, JWTs, the trusted proxy,
	// client certificates and the sessions' lifetime.
	Identity Identity
	// TLS, when set, makes Serve speak HTTPS (and gRPC over HTTP/2) with
	// these files, re-read when they change.
	TLS *auth.TLSFiles
}

// Server is the assembled echo application.
type Server struct {
	e       *echo.Echo
	a       *allocator.Allocator
	db      *gorm.DB         // the database, for readiness checks
	events  *audit.Log       // the audit log, for the handlers
	reads   *console.Console // the console's read models over a
	auth    *auth.Service
	log     *slog.Logger
	api     *handlers.API
	metrics *metrics
	cfg     Config
	// sessions authenticates console sessions; nil until the console is
	// mounted.
	sessions SessionAuth
	// signIns knows the ID tokens received at console sign-ins, which
	// are never bearer credentials.
	signIns *auth.People
	// htmlError renders errors of console pages; nil renders JSON.
	htmlError func(err error, c echo.Context)
	// stopping ends when an http.Server of this Server shuts down; event
	// streams and long polls end with it, so a graceful shutdown does not
	// wait for readers that would otherwise stay for minutes.
	stopping context.Context
	stop     context.CancelFunc
}

// SessionAuth lets the console's session cookie authenticate requests.
type SessionAuth interface {
	// Identify returns the identity of a valid session cookie, or nil.
	Identify(c echo.Context) *handlers.Caller
	// CheckCSRF verifies the CSRF token of a state-changing request made
	// with a session (form field or X-CSRF-Token header).
	CheckCSRF(c echo.Context) error
}

// New builds the server with every route registered.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(cfg.Registry)
	}
	if cfg.DB == nil {
		cfg.DB = cfg.Allocator.DB()
	}
	if cfg.Webhooks == nil {
		cfg.Webhooks = webhook.New(cfg.DB, webhook.Options{Logger: cfg.Logger})
	}
	if cfg.Feed == nil {
		cfg.Feed = feed.New(cfg.DB, feed.Options{Logger: cfg.Logger})
		cfg.Feed.SetDeliveries(cfg.Webhooks)
	}
	if cfg.Auth == nil {
		cfg.Auth = auth.New(cfg.DB, auth.Options{Logger: cfg.Logger, OnCommit: cfg.Feed.Committed})
	}
	cfg.Registry = cfg.Metrics.reg
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.BulkTimeout == 0 {
		cfg.BulkTimeout = 5 * time.Minute
	}
	if cfg.TLS != nil {
		cfg.SecureCookies = true // console cookies are Secure behind TLS
	}
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	s := &Server{e: e, a: cfg.Allocator, db: cfg.DB, events: audit.NewLog(cfg.DB), reads: console.New(cfg.Allocator, cfg.DB), auth: cfg.Auth, log: cfg.Logger, cfg: cfg,
		signIns: &auth.People{Service: cfg.Auth}}
	s.api = &handlers.API{A: cfg.Allocator, Feed: cfg.Feed, Hooks: cfg.Webhooks, AuditLog: s.events, StreamKeepAlive: cfg.StreamKeepAlive}
	s.stopping, s.stop = context.WithCancel(context.Background())
	s.metrics = cfg.Metrics
	s.metrics.watch(cfg.Allocator, cfg.DB, cfg.Feed, cfg.Webhooks)
	e.HTTPErrorHandler = s.handleError
	e.IPExtractor = clientIP(cfg.Identity.Proxy)
	e.Use(sanitizeRequestID)
	e.Use(middleware.RequestIDWithConfig(middleware.RequestIDConfig{
		Generator: func() string { return auth.NewTokenValue()[4:26] },
	}))
	e.Use(s.recoverer)
	e.Use(s.logRequests)
	e.Use(s.metrics.middleware)
	e.Use(s.timeout)
	e.Use(rejectNUL)
	e.Use(s.proxyGuard)
	s.routes()
	s.grpcRoutes()
	return s
}

// Echo returns the underlying echo instance (tests, route enumeration).
func (s *Server) Echo() *echo.Echo { return s.e }

// Handler is the server as an http.Handler.
func (s *Server) Handler() http.Handler {
	if handlerWrap != nil {
		return handlerWrap(s.e)
	}
	return s.e
}

// handlerWrap, when set, wraps what Handler (and so HTTPServer) returns.
// Production leaves it nil; this package's tests set it to check every
// API answer they receive against the OpenAPI document.
var handlerWrap func(http.Handler) http.Handler

// HTTPServer is the http.Server that Serve runs: HTTP/1.1 and HTTP/2
// cleartext (prior knowledge, as gRPC clients speak it) on one listener,
// so REST, the console and gRPC share the address.
//
// With Config.TLS it is HTTPS: HTTP/1.1 and HTTP/2 negotiated by ALPN, the
// certificate re-read when its files change.
func (s *Server) HTTPServer() *http.Server {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	srv.RegisterOnShutdown(s.stop)
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	if s.cfg.TLS != nil {
		srv.Protocols.SetHTTP2(true)
		srv.TLSConfig = s.cfg.TLS.Config()
	} else {
		srv.Protocols.SetUnencryptedHTTP2(true)
	}
	return srv
}

// Serve listens on addr until ctx ends, then shuts down gracefully: the
// listener closes, event streams end (their clients reconnect elsewhere),
// long polls answer with what they have, and other in-flight requests get
// up to 20 seconds to finish.
func (s *Server) Serve(ctx context.Context, addr string, ready func(addr string)) error {
	srv := s.HTTPServer()
	ln, err := listen(addr)
	if err != nil {
		return err
	}
	if ready != nil {
		ready(ln.Addr().String())
	}
	errc := make(chan error, 1)
	if s.cfg.TLS != nil {
		go func() { errc <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { errc <- srv.Serve(ln) }()
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (s *Server) timeout(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if p := c.Request().URL.Path; strings.HasPrefix(p, "/api/") {
			limit := s.cfg.RequestTimeout
			switch {
			case p == "/api/v1/events:stream":
				// An event stream lasts as long as its reader, or until
				// the server shuts down.
				ctx, cancel := context.WithCancel(c.Request().Context())
				defer context.AfterFunc(s.stopping, cancel)()
				defer cancel()
				c.SetRequest(c.Request().WithContext(ctx))
				return next(c)
			case p == "/api/v1/events" && c.QueryParams().Has("wait"):
				limit += feed.MaxFeedWait // a long poll waits first
				// Shutdown ends the wait: the poll answers with what it
				// has (an empty page is a true answer).
				ctx, cancel := context.WithCancel(c.Request().Context())
				defer context.AfterFunc(s.stopping, cancel)()
				defer cancel()
				c.SetRequest(c.Request().WithContext(ctx))
			case isBulk(c.Request().Method, p):
				limit = s.cfg.BulkTimeout
			}
			ctx, cancel := context.WithTimeout(c.Request().Context(), limit)
			defer cancel()
			c.SetRequest(c.Request().WithContext(ctx))
		}
		return next(c)
	}
}

// isBulk tells the requests that get BulkTimeout: PUT of the whole
// ExpectedMachine list and bulk allocations.
func isBulk(method, path string) bool {
	return (method == http.MethodPut && strings.TrimSuffix(path, "/") == "/api/v1/expected-machines") ||
		(method == http.MethodPost && strings.HasSuffix(path, "/allocations:batch"))
}

func (s *Server) recoverer(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				s.log.Error("panic in handler", "request_id", requestID(c), "path", c.Request().URL.Path, "panic", r)
				err = errors.New("panic in handler")
			}
		}()
		return next(c)
	}
}

func requestID(c echo.Context) string { return c.Response().Header().Get(echo.HeaderXRequestID) }

func (s *Server) logRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		actor, role := "", ""
		if id := handlers.CallerOf(c); id != nil {
			actor, role = id.Name, string(id.Role)
		}
		lvl := slog.LevelInfo
		if c.Response().Status >= 500 {
			lvl = slog.LevelError
		}
		// LogAttrs with typed attributes: one line per request, without
		// boxing each value in an interface first.
		s.log.LogAttrs(c.Request().Context(), lvl, "request",
			slog.String("request_id", requestID(c)), slog.String("method", c.Request().Method),
			slog.String("path", c.Request().URL.Path), slog.String("route", c.Path()),
			slog.Int("status", c.Response().Status), slog.Int64("bytes", c.Response().Size),
			slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
			slog.String("actor", actor), slog.String("role", role), slog.String("remote", c.RealIP()))
		return nil
	}
}

func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	if _, status := handlers.ToAPIError(err); status == http.StatusServiceUnavailable {
		// docs/api.md "Errors": a 503 is worth retrying, and says when.
		c.Response().Header().Set("Retry-After", RetryAfterSeconds)
	}
	var jr *jwtRefused
	if errors.As(err, &jr) {
		c.Response().Header().Set("WWW-Authenticate", WWWAuthenticateInvalid)
	}
	if s.htmlError != nil && !strings.HasPrefix(c.Request().URL.Path, "/api/") &&
		!strings.HasPrefix(c.Request().URL.Path, "/healthz") && !strings.HasPrefix(c.Request().URL.Path, "/readyz") {
		// An error raised before the console's own middleware ran (an
		// unknown path, a NUL in the query of the header search) still
		// belongs to a signed-in operator: identify the session so the
		// error page keeps the navigation instead of offering "Sign in".
		if handlers.CallerOf(c) == nil && s.sessions != nil {
			if id := s.sessions.Identify(c); id != nil {
				handlers.SetCaller(c, id)
			}
		}
		if renderNoRole(c, err) || renderProxyRefused(c, err) {
			return
		}
		s.htmlError(err, c)
		return
	}
	if e, ok := fault.AsError(err); ok && e.Code == fault.CodeInternal {
		s.log.Error("internal error", "request_id", requestID(c), "error", err)
	}
	_ = handlers.WriteError(c, err)
}

// RetryAfterSeconds is the Retry-After header of every 503 answer (REST
// and console): a database that is restarting or failing over is
// usually back within seconds.
const RetryAfterSeconds = "5"

// authenticate resolves the caller from a bearer token (ipledger's own or
// a JWT of the issuer), else the trusted proxy's header or a client
// certificate, else a console session; anonymous callers are 401. It puts
// the actor on the request context for audit events.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		var id *handlers.Caller
		var err error
		if h := c.Request().Header.Get(echo.HeaderAuthorization); h != "" {
			if id, err = s.bearerIdentity(c.Request().Context(), h, requestID(c)); err != nil {
				return err
			}
		} else if id, err = s.ambient(c); err != nil {
			return err
		} else if id == nil && s.sessions != nil {
			id = s.sessions.Identify(c)
		}
		if id == nil {
			return fault.Errf(fault.CodeUnauthorized, "", "authentication required: send Authorization: Bearer <token>")
		}
		handlers.SetCaller(c, id)
		c.SetRequest(c.Request().WithContext(audit.WithActorRole(c.Request().Context(), id.Name, string(id.Role), requestID(c))))
		return next(c)
	}
}

// bearerIdentity resolves an Authorization value "Bearer <token>" (the
// REST header and the gRPC metadata alike) to the token's identity; the
// audit actor is "token:NAME". With single sign-on configured, a JWT is
// verified against the issuer instead (actor "user:NAME" or
// "service:SUB"); a refused one is 401 invalid_token, and logged with
// why (never the token): an ID token tried as one, say, is someone
// replaying a sign-in.
func (s *Server) bearerIdentity(ctx context.Context, h, rid string) (*handlers.Caller, error) {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") { // the scheme is case-insensitive (RFC 7235)
		return nil, fault.Errf(fault.CodeUnauthorized, "", "Authorization must be \"Bearer <token>\"")
	}
	tok = strings.TrimSpace(tok)
	if o := s.cfg.Identity.OIDC; o != nil && auth.LooksLikeJWT(tok) {
		who, err := o.VerifyBearer(ctx, tok, s.signIns)
		if err != nil {
			if auth.IsInvalidToken(err) {
				s.log.Warn("bearer JWT refused", "request_id", rid, "reason", err.Error())
			}
			return nil, identityError(err)
		}
		return &handlers.Caller{Name: who.Actor, Role: who.Role}, nil
	}
	t, err := s.auth.Authenticate(ctx, tok)
	if err != nil {
		return nil, err
	}
	return &handlers.Caller{Name: "token:" + t.Name, Role: t.Role}, nil
}

// allow is the role check of every authenticated door (REST, gRPC).
func allow(id *handlers.Caller, role auth.Role) error {
	if id == nil {
		return fault.Errf(fault.CodeUnauthorized, "", "authentication required")
	}
	if !id.Role.Allows(role) {
		return fault.Errf(fault.CodeForbidden, "", "role %s may not do this; it needs %s", id.Role, role)
	}
	return nil
}

// require wraps a handler with a role check; session callers of a
// state-changing method must also pass the CSRF check.
func (s *Server) require(role auth.Role, h echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := handlers.CallerOf(c)
		if err := allow(id, role); err != nil {
			return err
		}
		if id.Session && s.sessions != nil && isUnsafe(c.Request().Method) {
			if err := s.sessions.CheckCSRF(c); err != nil {
				return err
			}
		}
		if id.Ambient && isUnsafe(c.Request().Method) {
			if err := crossSite(c); err != nil {
				return err
			}
		}
		return h(c)
	}
}

func isUnsafe(m string) bool {
	return m != http.MethodGet && m != http.MethodHead && m != http.MethodOptions
}

// requestIDRE is what a client's own X-Request-Id may be; anything else
// is replaced by a generated id.
var requestIDRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// sanitizeRequestID drops a client's X-Request-Id that is not a short
// token: the id is written into every audit event and log line of the
// request, and bytes that are not UTF-8 there made PostgreSQL refuse the
// audit event, and so the whole write, with a 500.
func sanitizeRequestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Request().Header
		if v, ok := h[echo.HeaderXRequestID]; ok && (len(v) != 1 || !requestIDRE.MatchString(v[0])) {
			h.Del(echo.HeaderXRequestID)
		}
		return next(c)
	}
}

// rejectNUL refuses a NUL character, or bytes that are not UTF-8, in the
// path or the query with 422 invalid naming where: PostgreSQL cannot store
// either (SQLite would, and the two databases would then disagree), and
// no name, address or identifier of ipledger needs them; a filter that
// PostgreSQL cannot compare was a 500. JSON bodies are checked where they
// are decoded (apijson.Check).
func rejectNUL(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if strings.ContainsRune(r.URL.Path, 0) {
			return fault.Errf(fault.CodeInvalid, "path", "the request path contains a NUL character")
		}
		if !utf8.ValidString(r.URL.Path) {
			return fault.Errf(fault.CodeInvalid, "path", "the request path is not valid UTF-8")
		}
		api := strings.HasPrefix(r.URL.Path, "/api/")
		for k, vs := range r.URL.Query() {
			// A parameter given twice is ambiguous, as a JSON member
			// given twice is: this server reads the first, a proxy or
			// a log reader may take the last (?owner_id=a&owner_id=b on
			// a release).
			if api && len(vs) > 1 {
				return fault.Errf(fault.CodeInvalid, strings.ToValidUTF8(k, "\ufffd"), "query parameter %q is given %d times; give it once", strings.ToValidUTF8(k, "\ufffd"), len(vs))
			}
			for _, v := range vs {
				if strings.ContainsRune(k, 0) || strings.ContainsRune(v, 0) {
					return fault.Errf(fault.CodeInvalid, k, "query parameter %q contains a NUL character", k)
				}
				if !utf8.ValidString(k) || !utf8.ValidString(v) {
					return fault.Errf(fault.CodeInvalid, strings.ToValidUTF8(k, "\ufffd"), "query parameter %q is not valid UTF-8", strings.ToValidUTF8(k, "\ufffd"))
				}
			}
		}
		// Bodies are checked where they are read: JSON bodies by
		// handlers.UnmarshalJSON, console forms by the console after
		// sign-in (consoleFormNUL). Parsing a form here would consume a
		// JSON body that a client sent with curl's default form type.
		return next(c)
	}
}
