// Package ledger is the manager's small client of ipledger's REST API
// (docs/api.md): pools, allocations and the change feed. The manager talks
// to ipledger only through it, never to its database, so every rule stays
// the allocator's and every change is in ipledger's audit log.
package ledger

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Config says how to reach ipledger and who the manager is there.
type Config struct {
	// URL is ipledger's base URL, e.g. https://ipledger.example:8443.
	URL string
	// Token is an operator-role API token (empty with a client certificate).
	Token string
	// CACert is a PEM file of the CA that signed ipledger's certificate
	// (empty: the system's roots).
	CACert string
	// ClientCert and ClientKey are a PEM client certificate and key for
	// mutual TLS.
	ClientCert, ClientKey string
	// UserAgent names the caller in ipledger's request logs.
	UserAgent string
}

// Client calls ipledger's REST API. It is safe for concurrent use.
type Client struct {
	base  *url.URL
	token string
	ua    string
	hc    *http.Client
}

// New checks cfg and builds a client. It does not call ipledger.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(cfg.URL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("ipledger URL %q must be an absolute http or https URL", cfg.URL)
	}
	if (cfg.ClientCert == "") != (cfg.ClientKey == "") {
		return nil, errors.New("a client certificate needs both --client-cert and --client-key")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	if cfg.CACert != "" || cfg.ClientCert != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if cfg.CACert != "" {
			pem, err := os.ReadFile(cfg.CACert)
			if err != nil {
				return nil, fmt.Errorf("CA certificate: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("CA certificate %s holds no PEM certificate", cfg.CACert)
			}
			tc.RootCAs = pool
		}
		if cfg.ClientCert != "" {
			// Re-read at each handshake, so a renewed certificate is
			// used without a restart.
			certFile, keyFile := cfg.ClientCert, cfg.ClientKey
			if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
				return nil, fmt.Errorf("client certificate: %w", err)
			}
			tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				c, err := tls.LoadX509KeyPair(certFile, keyFile)
				return &c, err
			}
		}
		tr.TLSClientConfig = tc
	}
	ua := cfg.UserAgent
	if ua == "" {
		ua = "ipledger-k8s"
	}
	return &Client{base: u, token: cfg.Token, ua: ua, hc: &http.Client{Transport: tr}}, nil
}

// Error is an error answer of ipledger: {"error": {code, message, field}}
// with its HTTP status.
type Error struct {
	Status  int
	Code    string
	Message string
	Field   string
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("ipledger: %d %s (%s): %s", e.Status, e.Code, e.Field, e.Message)
	}
	return fmt.Sprintf("ipledger: %d %s: %s", e.Status, e.Code, e.Message)
}

// IsCode tells whether err is an ipledger answer with that error code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// IsNotFound tells whether err is ipledger's 404.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// IsUnreachable tells whether err means ipledger could not answer: a
// network error, or 5xx.
func IsUnreachable(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.Status >= 500
	}
	return err != nil
}

// Retryable returns err when retrying later may help (ipledger could not
// be reached or failed: the controller retries with backoff), nil for a
// refusal, which waits for a change instead (the spec's, or ipledger's
// through the change feed).
func Retryable(err error) error {
	if IsUnreachable(err) {
		return err
	}
	return nil
}

// do sends one request to the API path made of segs (each escaped as one
// segment: an owner id may hold a slash) and decodes a 2xx JSON answer
// into out (when not nil); any other answer is an *Error.
func (c *Client) do(ctx context.Context, method string, segs []string, query url.Values, body, out any) (int, error) {
	path := "/api/v1"
	for _, s := range segs {
		path += "/" + url.PathEscape(s)
	}
	raw := c.base.String() + path
	if len(query) > 0 {
		raw += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, raw, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.ua)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("ipledger %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("ipledger %s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var e struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
				Field   string `json:"field"`
			} `json:"error"`
		}
		if json.Unmarshal(b, &e) != nil || e.Error.Code == "" {
			e.Error.Code = http.StatusText(resp.StatusCode)
			e.Error.Message = strings.TrimSpace(string(b))
		}
		return resp.StatusCode, &Error{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message, Field: e.Error.Field}
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("ipledger %s %s: decoding the answer: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// timeout bounds one short call; long polls set their own.
const timeout = 30 * time.Second
