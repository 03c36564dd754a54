package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ipledger/ipledger/buildinfo"
)

type clientFlags struct {
	server string
	token  string
	output string
	// caCert, clientCert and clientKey are PEM files: the CA of the
	// server's certificate, and a client certificate for mutual TLS.
	caCert, clientCert, clientKey string
}

// client talks to the REST API for the CLI commands.
type client struct {
	base  string
	token string
	http  *http.Client
	json  bool
	// out is where the command prints (the command's standard output).
	out io.Writer
}

// client checks the flags and returns a client printing to out.
func (cf *clientFlags) client(out io.Writer) (*client, error) {
	if cf.output != "table" && cf.output != "json" {
		return nil, fmt.Errorf("--output %q: want table or json", cf.output)
	}
	u, err := url.Parse(cf.server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server %q is not an http(s) URL", cf.server)
	}
	hc := &http.Client{Timeout: 60 * time.Second}
	if cf.caCert != "" || cf.clientCert != "" || cf.clientKey != "" {
		tc, err := cf.tlsConfig()
		if err != nil {
			return nil, err
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = tc
		hc.Transport = tr
	}
	return &client{base: strings.TrimRight(cf.server, "/"), token: cf.token, http: hc, json: cf.output == "json", out: out}, nil
}

// tlsConfig trusts --ca-cert (instead of the system's roots) and presents
// --client-cert with --client-key.
func (cf *clientFlags) tlsConfig() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if cf.caCert != "" {
		pem, err := os.ReadFile(cf.caCert)
		if err != nil {
			return nil, fmt.Errorf("--ca-cert: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-cert %s holds no PEM certificate", cf.caCert)
		}
	}
	if (cf.clientCert == "") != (cf.clientKey == "") {
		return nil, fmt.Errorf("--client-cert and --client-key go together")
	}
	if cf.clientCert != "" {
		cert, err := tls.LoadX509KeyPair(cf.clientCert, cf.clientKey)
		if err != nil {
			return nil, fmt.Errorf("--client-cert/--client-key: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// apiError is the API's error body, printed by the CLI as is.
type apiError struct {
	Status int
	Code   string `json:"code"`
	Msg    string `json:"message"`
	Field  string `json:"field"`
}

func (e *apiError) Error() string {
	s := fmt.Sprintf("%s (%d): %s", e.Code, e.Status, e.Msg)
	if e.Field != "" {
		s += " [field " + e.Field + "]"
	}
	return s
}

// call sends a request; body may be nil, []byte (sent as is with ctype) or
// a value marshalled to JSON. A non-2xx answer becomes *apiError.
func (c *client) call(method, path string, body any, ctype string, headers map[string]string, out any) (http.Header, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(buf)
		if ctype == "" {
			ctype = "application/json"
		}
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("User-Agent", buildinfo.UserAgent("ipledger-cli"))
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach ipledger at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		var eb struct {
			Error *apiError `json:"error"`
		}
		if json.Unmarshal(data, &eb) == nil && eb.Error != nil {
			eb.Error.Status = resp.StatusCode
			return resp.Header, eb.Error
		}
		return resp.Header, &apiError{Status: resp.StatusCode, Code: "http_error", Msg: strings.TrimSpace(string(data))}
	}
	if out != nil && len(data) > 0 {
		if raw, ok := out.(*json.RawMessage); ok {
			*raw = append((*raw)[:0], data...)
		} else if err := json.Unmarshal(data, out); err != nil {
			return resp.Header, fmt.Errorf("unexpected answer from %s %s: %w", method, path, err)
		}
	}
	return resp.Header, nil
}

// get GETs path. With --output json it prints the answer as is and reports
// printed; otherwise it decodes the answer into out for a table.
func (c *client) get(path string, out any) (printed bool, err error) {
	var raw json.RawMessage
	if _, err := c.call("GET", path, nil, "", nil, &raw); err != nil {
		return false, err
	}
	if c.json {
		return true, c.printJSON(raw)
	}
	return false, json.Unmarshal(raw, out)
}

// printJSON writes an answer of the API on one line (output.go).
func (c *client) printJSON(raw []byte) error { return printJSON(c.out, raw) }

// table prints rows aligned for people.
func (c *client) table(header []string, rows [][]string) {
	w := tabwriter.NewWriter(c.out, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	w.Flush()
}

func esc(s string) string { return url.PathEscape(s) }

func orDash(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return *s
}

// listPages reads a list of the API (path with query q), following
// next_cursor page after page, and returns the items of every page. With
// onePage it stops after the first page and returns that page's
// next_cursor ("" on the last page).
func listPages[T any](c *client, path string, q url.Values, onePage bool) (items []T, next string, err error) {
	q = maps.Clone(q)
	for {
		var page struct {
			Items      []T    `json:"items"`
			NextCursor string `json:"next_cursor"`
		}
		if _, err := c.call("GET", path+"?"+q.Encode(), nil, "", nil, &page); err != nil {
			return nil, "", err
		}
		items = append(items, page.Items...)
		if page.NextCursor == "" || onePage {
			return items, page.NextCursor, nil
		}
		q.Set("cursor", page.NextCursor)
	}
}
