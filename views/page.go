// Package views holds the operator console's templ templates and, next to
// each template, the view-model it renders. Views only present: every
// number and rule comes from the allocator; templ escapes all text.
package views

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/url"
	"strings"
	"time"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/fault"
)

// Page is what every full page needs: the signed-in user, the CSRF token of
// the session (hidden field of each form and hx-headers of <body>), the
// active navigation entry and an optional one-time flash message.
type Page struct {
	Title     string
	Nav       string
	User      string
	Role      auth.Role
	CSRF      string
	Flash     string
	FlashKind string // ok, warn, bad, info
	// FlashLinks follow the flash message (after a force delete: the
	// quarantined values).
	FlashLinks []Link
	// Query is the text of the header's search box.
	Query string
	// SignOutNote replaces the Sign out button when nothing ipledger
	// does would sign the person out (behind a proxy without a sign-out
	// URL, or with a client certificate).
	SignOutNote string
}

// Link is a link with its text.
type Link struct {
	Href string `json:"h"`
	Text string `json:"t"`
}

// Can reports whether the user's role includes need: controls a role may
// not use are not rendered (the server refuses them anyway).
func (p Page) Can(need auth.Role) bool { return p.Role.Allows(need) }

// CanOperate is Can(operator).
func (p Page) CanOperate() bool { return p.Can(auth.RoleOperator) }

// CanAdmin is Can(admin).
func (p Page) CanAdmin() bool { return p.Can(auth.RoleAdmin) }

// HXHeaders is the hx-headers value of <body>: every htmx request carries
// the CSRF token in X-CSRF-Token.
func (p Page) HXHeaders() string {
	b, _ := json.Marshal(map[string]string{"X-CSRF-Token": p.CSRF})
	return string(b)
}

// CSRFField is the name of the hidden CSRF form field.
const CSRFField = "csrf_token"

// Errors maps a field name of a form to its message; "" is the form-level
// message.
type Errors map[string]string

// FromError turns an allocator error into form errors keyed by its field
// (the JSON path, e.g. "expected_dpus[1].loopback_ip").
func FromError(err error) Errors {
	if err == nil {
		return nil
	}
	if e, ok := fault.AsError(err); ok {
		return Errors{e.Field: e.Message}
	}
	return Errors{"": err.Error()}
}

// Get returns the message for a field.
func (e Errors) Get(field string) string { return e[field] }

// Has reports a message for a field.
func (e Errors) Has(field string) bool { _, ok := e[field]; return ok }

// Unclaimed returns the messages whose field is not one of known (shown at
// the top of the form, so no error is ever swallowed).
func (e Errors) Unclaimed(known ...string) []string {
	var out []string
	for f, m := range e {
		claimed := false
		for _, k := range known {
			if f == k {
				claimed = true
				break
			}
		}
		if !claimed {
			if f != "" {
				m = f + ": " + m
			}
			out = append(out, m)
		}
	}
	return out
}

func fieldClass(e Errors, field string) string {
	if e.Has(field) {
		return "field invalid"
	}
	return "field"
}

// Seg is one segment of a utilization bar.
type Seg struct {
	Class string
	Pct   float64
	Label string
}

// Style is the segment's CSS width.
func (s Seg) Style() string { return fmt.Sprintf("width:%.3f%%", s.Pct) }

// PoolBar is one pool's utilization: the share of the whole pool that is
// allocated in auto_assign ranges, allocated in explicit ranges, reserved
// (declared by an ExpectedDpu, not yet allocated) and quarantined.
type PoolBar struct {
	Name      string
	Type      string
	Size      string
	Free      string
	Used      float64
	Segs      []Seg
	Hot       bool
	Ranges    int
	AutoAlloc string
	ExplAlloc string
	Reserved  string
	Quar      string
	// The explicit (auto_assign=false) ranges on their own: the scarce
	// part operators watch. ExplicitUsed counts allocated, reserved and
	// quarantined values of those ranges.
	HasExplicit   bool
	ExplicitSize  string
	ExplicitTaken string
	ExplicitFree  string
	ExplicitUsed  float64
	ExplicitHot   bool
}

// ExplicitUsedText is the explicit ranges' share in use.
func (b PoolBar) ExplicitUsedText() string {
	if b.ExplicitUsed > 0 && b.ExplicitUsed < 0.001 {
		return "<0.1%"
	}
	return fmt.Sprintf("%.1f%%", b.ExplicitUsed*100)
}

// ExplicitStyle is the width of the explicit ranges' bar.
func (b PoolBar) ExplicitStyle() string { return fmt.Sprintf("width:%.3f%%", b.ExplicitUsed*100) }

// HotThreshold is the share of a pool in use above which the dashboard and
// the NOC wallboard raise an alert (pools above 80 %, docs/console.md).
const HotThreshold = 0.80

// NewPoolBar computes a pool's bar from its stats.
func NewPoolBar(p allocator.Pool) PoolBar {
	num := func(s string) *big.Float {
		f, ok := new(big.Float).SetString(s)
		if !ok {
			return new(big.Float)
		}
		return f
	}
	size := new(big.Float).Add(num(p.Stats.Auto.Size), num(p.Stats.Explicit.Size))
	free := new(big.Float).Add(num(p.Stats.Auto.Free), num(p.Stats.Explicit.Free))
	quar := new(big.Float).Add(num(p.Stats.Auto.Quarantined), num(p.Stats.Explicit.Quarantined))
	resv := new(big.Float).Add(num(p.Stats.Auto.Reserved), num(p.Stats.Explicit.Reserved))
	pct := func(x *big.Float) float64 {
		if size.Sign() == 0 {
			return 0
		}
		r, _ := new(big.Float).Quo(x, size).Float64()
		return r * 100
	}
	b := PoolBar{Name: p.Name, Type: string(p.Type), Used: p.Stats.Used(), Ranges: len(p.Ranges),
		Size: bigText(size), Free: bigText(free), AutoAlloc: p.Stats.Auto.Allocated, ExplAlloc: p.Stats.Explicit.Allocated,
		Reserved: bigText(resv), Quar: bigText(quar)}
	b.Hot = b.Used > HotThreshold
	if es := num(p.Stats.Explicit.Size); es.Sign() > 0 {
		taken := new(big.Float).Sub(es, num(p.Stats.Explicit.Free))
		r, _ := new(big.Float).Quo(taken, es).Float64()
		b.HasExplicit, b.ExplicitSize, b.ExplicitTaken, b.ExplicitUsed = true, bigText(es), bigText(taken), r
		b.ExplicitFree = p.Stats.Explicit.Free
		b.ExplicitHot = r > HotThreshold
	}
	b.Segs = []Seg{
		{"auto", pct(num(p.Stats.Auto.Allocated)), "allocated (auto-assign ranges): " + Count(p.Stats.Auto.Allocated)},
		{"explicit", pct(num(p.Stats.Explicit.Allocated)), "allocated (explicit ranges): " + Count(p.Stats.Explicit.Allocated)},
		{"reserved", pct(resv), "reserved for an ExpectedDpu: " + Count(bigText(resv))},
		{"quarantined", pct(quar), "quarantined: " + Count(bigText(quar))},
	}
	return b
}

// UsedText is the share in use as a percentage with one decimal (values
// below 0.1 % but above zero show as "<0.1%", so a busy /64 never reads 0).
func (b PoolBar) UsedText() string {
	if b.Used > 0 && b.Used < 0.001 {
		return "<0.1%"
	}
	return fmt.Sprintf("%.1f%%", b.Used*100)
}

func bigText(f *big.Float) string {
	i, _ := f.Int(nil)
	return i.String()
}

// Short abbreviates a huge decimal count (an IPv6 pool's size) as "1.8e19";
// a count of at most 12 digits is shown whole, with separators (Count).
func Short(s string) string {
	if len(s) <= 12 {
		return Count(s)
	}
	f, ok := new(big.Float).SetString(s)
	if !ok {
		return s
	}
	return f.Text('g', 3)
}

// When formats a time for tables: UTC, to the second.
func When(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }

// WhenPtr formats an optional time.
func WhenPtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return When(*t)
}

// Str dereferences an optional string.
func Str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// PoolURL is a pool's console page.
func PoolURL(name string) string { return "/pools/" + url.PathEscape(name) }

// Query builds "?k=v&..." from pairs, leaving out empty values.
func Query(base string, kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	if len(q) == 0 {
		return base
	}
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + q.Encode()
}

func itoa(n int) string { return fmt.Sprint(n) }

func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return "—"
	}
	var b strings.Builder
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
	return strings.TrimSpace(b.String())
}

// ShortID abbreviates a 66-character machine_id for tables ("fm100ds…x7k2q");
// the full id is in the title and the copy button.
func ShortID(id string) string {
	if len(id) <= 20 {
		return id
	}
	return id[:12] + "…" + id[len(id)-6:]
}

// Plural is "1 match" or "3 matches".
func Plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return CountInt(n) + " " + many
}

// RemovalSummary says what a machine delete did to its values: "2 values
// released, 1 returned to its reservation, 1 quarantined" ("no value
// held" when there was none), in that order.
func RemovalSummary(values []allocator.ImpactValue) string {
	n := map[string]int{}
	for _, v := range values {
		n[v.Action]++
	}
	var parts []string
	if k := n[allocator.ActionRelease]; k > 0 {
		parts = append(parts, Plural(k, "value", "values")+" released")
	}
	if k := n[allocator.ActionReturnToReservation]; k > 0 {
		parts = append(parts, Plural(k, "value returned to its reservation", "values returned to their reservations"))
	}
	if k := n[allocator.ActionQuarantine]; k > 0 {
		parts = append(parts, Plural(k, "value", "values")+" quarantined")
	}
	if len(parts) == 0 {
		return "no value held"
	}
	return strings.Join(parts, ", ")
}
