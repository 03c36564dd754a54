// Package upgrade holds what the upgrade test compares: the answers of a
// server's REST API for every list it serves, recorded from an older
// build by scripts/upgradefixture and read again from today's code by
// TestUpgradeFromOlderBuilds (docs/operations.md, "Upgrades"). Recording
// and reading use the same code, so a difference is the server's, not the
// client's. It imports nothing of ipledger: it talks HTTP only, to any
// build.
package upgrade

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Fixture is what a fixture's answers-<dialect>.json holds.
type Fixture struct {
	// Rev is the short commit of the build that wrote the database, and
	// Schema its schema version.
	Rev    string `json:"rev"`
	Schema int    `json:"schema"`
	// Dialect is sqlite or postgres; PGSchema the PostgreSQL schema the
	// dump was taken from (the test loads it under another name).
	Dialect  string `json:"dialect"`
	PGSchema string `json:"pg_schema,omitempty"`
	// Lists are the answers to every list, by path under /api/v1 (all
	// pages joined), as the old build gave them.
	Lists map[string]json.RawMessage `json:"lists"`
	// Tokens are the API tokens the old build made, with their values.
	Tokens []Token `json:"tokens"`
	// Sessions are console sessions the old build opened, by its token
	// login form and (where it has it) single sign-on.
	Sessions []Session `json:"sessions,omitempty"`
	// Next are writes the old build answered after the database was
	// stored: today's code, given the same requests on the stored
	// database, must answer them the same way.
	Next []Exchange `json:"next"`
}

// Token is an API token made through the old build's CLI.
type Token struct {
	Name  string `json:"name"`
	Role  string `json:"role"`
	Value string `json:"value"`
}

// Session is a console session: its cookie, whose it is and until when
// the old build would have honoured it.
type Session struct {
	Kind    string    `json:"kind"` // token or sso
	Name    string    `json:"name"` // the token's or the person's
	Role    string    `json:"role"`
	Cookie  string    `json:"cookie"` // name=value
	Expires time.Time `json:"expires"`
}

// Exchange is one request and the old build's answer to it.
type Exchange struct {
	Method string          `json:"method"`
	Path   string          `json:"path"`
	Body   json.RawMessage `json:"body,omitempty"`
	Status int             `json:"status"`
	Answer json.RawMessage `json:"answer,omitempty"`
}

// Client calls one server's REST API with one bearer token.
type Client struct {
	Base  string // e.g. http://127.0.0.1:8080
	Token string
	HTTP  *http.Client
}

// ErrNotFound is the answer 404 to a GET: the build has no such route.
var ErrNotFound = errors.New("404 not found")

// Do sends one request to /api/v1/PATH (a body as JSON) and returns the
// status and body.
func (c Client) Do(method, path string, body []byte) (int, []byte, error) {
	return c.DoType(method, path, "application/json", body)
}

// DoType is Do with a body of the given content type.
func (c Client) DoType(method, path, contentType string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, c.Base+"/api/v1/"+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	h := c.HTTP
	if h == nil {
		h = http.DefaultClient
	}
	res, err := h.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

// Walk reads the list at path, following next_cursor through every page,
// and returns its items as one JSON array; an answer that is not a page
// ({"items": …}) is returned as it is.
func (c Client) Walk(path string) (json.RawMessage, error) {
	var items []json.RawMessage
	cursor := ""
	for range 10000 {
		p := path
		if cursor != "" {
			sep := "?"
			if strings.Contains(p, "?") {
				sep = "&"
			}
			p += sep + "cursor=" + url.QueryEscape(cursor)
		}
		status, body, err := c.Do(http.MethodGet, p, nil)
		if err != nil {
			return nil, fmt.Errorf("GET %s: %w", p, err)
		}
		if status == http.StatusNotFound && cursor == "" {
			return nil, fmt.Errorf("GET %s: %w", p, ErrNotFound)
		}
		if status != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %d %s", p, status, body)
		}
		var page struct {
			Items      *[]json.RawMessage `json:"items"`
			NextCursor string             `json:"next_cursor"`
		}
		if err := json.Unmarshal(body, &page); err != nil || page.Items == nil {
			if cursor != "" {
				return nil, fmt.Errorf("GET %s: a later page is not a page: %s", p, body)
			}
			return json.RawMessage(body), nil
		}
		items = append(items, *page.Items...)
		if page.NextCursor == "" {
			if items == nil {
				items = []json.RawMessage{}
			}
			return json.Marshal(items)
		}
		cursor = page.NextCursor
	}
	return nil, fmt.Errorf("GET %s: more than 10000 pages", path)
}

// Record reads every list the server serves: pools, each pool and its
// allocations, ExpectedMachines, machines and each host and DPU, DPU
// bindings, the audit log, and (where the build has them) webhooks and
// each one's deliveries. A list the build does not serve (404) is left
// out.
func Record(c Client) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	get := func(path string) ([]map[string]any, error) {
		raw, err := c.Walk(path)
		if errors.Is(err, ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		out[path] = raw
		var items []map[string]any
		_ = json.Unmarshal(raw, &items)
		return items, nil
	}
	pools, err := get("pools")
	if err != nil {
		return nil, err
	}
	for _, p := range pools {
		name := url.PathEscape(fmt.Sprint(p["name"]))
		for _, path := range []string{"pools/" + name, "pools/" + name + "/allocations"} {
			if _, err := get(path); err != nil {
				return nil, err
			}
		}
	}
	machines, err := get("machines")
	if err != nil {
		return nil, err
	}
	for _, m := range machines {
		ids := []any{m["machine_id"]}
		if dpus, ok := m["dpus"].([]any); ok {
			for _, d := range dpus {
				if d, ok := d.(map[string]any); ok {
					ids = append(ids, d["machine_id"])
				}
			}
		}
		for _, id := range ids {
			if _, err := get("machines/" + url.PathEscape(fmt.Sprint(id))); err != nil {
				return nil, err
			}
		}
	}
	for _, path := range []string{"expected-machines", "dpu-bindings", "events"} {
		if _, err := get(path); err != nil {
			return nil, err
		}
	}
	hooks, err := get("webhooks")
	if err != nil {
		return nil, err
	}
	for _, h := range hooks {
		if _, err := get(fmt.Sprintf("webhooks/%v/deliveries", h["id"])); err != nil {
			return nil, err
		}
	}
	return out, nil
}
