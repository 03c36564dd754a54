package views

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/console"
	"github.com/ipledger/ipledger/fault"
)

// DPURow is one ExpectedDpu row of the form. Key is a random id that ties
// the row's error messages to it while rows are added and removed in place.
type DPURow struct {
	Key, Serial, IP, IPv6 string
}

// NewDPURow returns an empty row with a fresh key.
func NewDPURow() DPURow { return DPURow{Key: RowKey()} }

// RowKey is a fresh random row key.
func RowKey() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// EMForm is the ExpectedMachine form as typed. The BMC password field is
// write-only: it is never filled from the stored record (an empty field
// keeps the stored password).
type EMForm struct {
	ID          string
	Version     int64
	MAC         string
	Username    string
	PasswordSet bool
	// PasswordTyped: the post carried a new password (a refused save
	// does not echo it back; the form asks for it again).
	PasswordTyped bool
	Chassis       string
	Name          string
	Description   string
	Labels        string // one key=value per line
	Fallback      string // comma or space separated serials
	SkuID         string
	DPUs          []DPURow
}

// EMFormFrom fills the form from a stored record (never the password).
func EMFormFrom(em *allocator.ExpectedMachine) EMForm {
	f := EMForm{ID: em.ID, Version: em.Version, MAC: em.BmcMacAddress, Username: em.BmcUsername,
		PasswordSet: em.BmcPasswordSet, Chassis: em.ChassisSerialNumber, Name: em.Metadata.Name,
		Description: em.Metadata.Description, Fallback: strings.Join(em.FallbackDPUSerialNumbers, ", ")}
	if em.SkuID != nil {
		f.SkuID = *em.SkuID
	}
	var ls []string
	for _, l := range em.Metadata.Labels {
		if l.Value == "" {
			ls = append(ls, l.Key)
		} else {
			ls = append(ls, l.Key+"="+l.Value)
		}
	}
	f.Labels = strings.Join(ls, "\n")
	for _, d := range em.ExpectedDPUs {
		f.DPUs = append(f.DPUs, DPURow{Key: RowKey(), Serial: d.SerialNumber, IP: Str(d.LoopbackIP), IPv6: Str(d.LoopbackIPv6)})
	}
	return f
}

// Spec turns the form into the allocator's ExpectedMachineSpec (the same
// shape a REST PUT carries): the DPU list is always given (an empty form
// list clears it), an empty password keeps the stored one.
func (f EMForm) Spec(password string) allocator.ExpectedMachineSpec {
	s := allocator.ExpectedMachineSpec{BmcMacAddress: f.MAC, BmcUsername: f.Username, ChassisSerialNumber: f.Chassis,
		FallbackDPUSerialNumbers: []string{}, Metadata: &allocator.Metadata{Name: f.Name, Description: f.Description, Labels: []allocator.Label{}}}
	if password != "" {
		s.BmcPassword = &password
	}
	if f.SkuID != "" {
		sku := f.SkuID
		s.SkuID = &sku
	}
	s.FallbackDPUSerialNumbers = append(s.FallbackDPUSerialNumbers,
		strings.FieldsFunc(f.Fallback, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' })...)
	for _, line := range strings.Split(f.Labels, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		s.Metadata.Labels = append(s.Metadata.Labels, allocator.Label{Key: strings.TrimSpace(k), Value: strings.TrimSpace(v)})
	}
	dpus := []allocator.ExpectedDPU{}
	for _, i := range f.specRows() {
		d := f.DPUs[i]
		e := allocator.ExpectedDPU{SerialNumber: d.Serial}
		if d.IP != "" {
			ip := d.IP
			e.LoopbackIP = &ip
		}
		if d.IPv6 != "" {
			ip := d.IPv6
			e.LoopbackIPv6 = &ip
		}
		dpus = append(dpus, e)
	}
	s.ExpectedDPUs = &dpus
	return s
}

// Empty reports a row with no serial and no addresses: the new form shows
// one, and an untouched row is not an ExpectedDpu (it is left out of the
// spec, so a record without DPUs is valid).
func (d DPURow) Empty() bool {
	return strings.TrimSpace(d.Serial) == "" && strings.TrimSpace(d.IP) == "" && strings.TrimSpace(d.IPv6) == ""
}

// specRows lists the form rows that become ExpectedDpus, in order:
// expected_dpus[i] of the spec (and of the allocator's errors) is form row
// specRows()[i].
func (f EMForm) specRows() []int {
	var out []int
	for i, d := range f.DPUs {
		if !d.Empty() {
			out = append(out, i)
		}
	}
	return out
}

// The form's top-level fields, by the JSON path the allocator names in
// its errors.
var emFields = []string{"bmc_mac_address", "bmc_username", "bmc_password", "chassis_serial_number",
	"metadata.name", "metadata.description", "metadata.labels", "fallback_dpu_serial_numbers", "sku_id"}

var dpuField = regexp.MustCompile(`^expected_dpus\[(\d+)\](?:\.(serial_number|loopback_ip|loopback_ip_v6))?$`)
var indexed = regexp.MustCompile(`^(metadata\.labels|fallback_dpu_serial_numbers)\[\d+\].*$`)

// EMErrorID is the id of the element that shows the error of a field:
// "err-bmc_mac_address", or for a DPU row "err-dpu-<key>-loopback_ip".
// Errors inside labels or fallback serials go to their textarea.
func (f EMForm) EMErrorID(field string) string {
	if m := dpuField.FindStringSubmatch(field); m != nil {
		i, _ := strconv.Atoi(m[1]) // digits: dpuField says so
		if rows := f.specRows(); i < len(rows) {
			i = rows[i]
			part := m[2]
			if part == "" {
				part = "serial_number"
			}
			return "err-dpu-" + f.DPUs[i].Key + "-" + part
		}
		return "err-form"
	}
	if m := indexed.FindStringSubmatch(field); m != nil {
		field = m[1]
	}
	for _, k := range emFields {
		if k == field {
			return "err-" + strings.ReplaceAll(k, ".", "-")
		}
	}
	return "err-form"
}

// FieldMessages maps each error element id to its message(s).
type FieldMessages map[string]string

// Messages places allocator problems next to their fields.
func (f EMForm) Messages(problems []*fault.Error) FieldMessages {
	out := FieldMessages{}
	for _, p := range problems {
		id := f.EMErrorID(p.Field)
		msg := f.Words(p.Message)
		if id == "err-form" && p.Field != "" {
			msg = f.Words(p.Field) + ": " + msg
		}
		if out[id] != "" {
			out[id] += " · " + msg
		} else {
			out[id] = msg
		}
	}
	return out
}

// AllErrorIDs lists every error element of the form (each gets emptied or
// filled by as-you-type validation).
func (f EMForm) AllErrorIDs() []string {
	ids := []string{"err-form"}
	for _, k := range emFields {
		ids = append(ids, "err-"+strings.ReplaceAll(k, ".", "-"))
	}
	for _, d := range f.DPUs {
		for _, p := range []string{"serial_number", "loopback_ip", "loopback_ip_v6"} {
			ids = append(ids, "err-dpu-"+d.Key+"-"+p)
		}
	}
	return ids
}

// EMFormView is the create/edit page.
type EMFormView struct {
	Page
	Form     EMForm
	Msgs     FieldMessages
	Examples LoopbackExamples
}

// LoopbackExamples are the placeholders of a DPU row's loopback fields:
// values of this site's own pools, not another site's.
type LoopbackExamples struct {
	IPv4, IPv6 string
}

// Neutral examples (the documentation ranges of RFC 5737 and RFC 3849)
// for a site whose lo-ip or lo-ip-v6 has no explicit range yet.
const (
	neutralLoopbackIPv4 = "192.0.2.10"
	neutralLoopbackIPv6 = "2001:db8::10"
)

// NewLoopbackExamples takes each example from the first explicit
// (auto_assign = false) range of lo-ip and lo-ip-v6, where reservations
// must lie; a pool that is nil or has no explicit range gives the neutral
// example.
func NewLoopbackExamples(v4, v6 *allocator.Pool) LoopbackExamples {
	return LoopbackExamples{IPv4: firstExplicit(v4, neutralLoopbackIPv4), IPv6: firstExplicit(v6, neutralLoopbackIPv6)}
}

func firstExplicit(p *allocator.Pool, neutral string) string {
	if p == nil {
		return neutral
	}
	for _, r := range p.Ranges {
		if !r.AutoAssign {
			return r.First
		}
	}
	return neutral
}

// OrNeutral fills an example left empty (a fragment rendered without the
// site's pools) with the neutral one.
func (e LoopbackExamples) OrNeutral() LoopbackExamples {
	if e.IPv4 == "" {
		e.IPv4 = neutralLoopbackIPv4
	}
	if e.IPv6 == "" {
		e.IPv6 = neutralLoopbackIPv6
	}
	return e
}

// IsNew reports the create form.
func (v EMFormView) IsNew() bool { return v.Form.ID == "" }

// Action is the form's target.
func (v EMFormView) Action() string {
	if v.IsNew() {
		return "/expected-machines"
	}
	return "/expected-machines/" + v.Form.ID
}

// EMListView is the ExpectedMachines list with search.
type EMListView struct {
	Page
	Query string
	Items []allocator.ExpectedMachine
	Next  string
	Err   string
}

// NextURL keeps the search on the next page.
func (v EMListView) NextURL() string {
	return Query("/expected-machines", "q", v.Query, "cursor", v.Next)
}

// ImportResult is the outcome of one record of an imported file.
type ImportResult struct {
	Index   int
	MAC     string
	Outcome string // created, updated, failed
	// Problems are the record's messages: every problem of a failed
	// record, each naming expected_machines[i].field.
	Problems []string
}

// ImportView is the import page and its result.
type ImportView struct {
	Page
	Mode    string // merge or replace
	Err     string
	Results []ImportResult
	Done    bool
	// Counted, when set, are the counts of an import whose Results hold
	// only the failed records (the no-JS redirect carries no more).
	Counted *ImportCounts
}

// ImportCounts sums the outcomes of an import.
type ImportCounts struct {
	Created int `json:"c"`
	Updated int `json:"u"`
	Failed  int `json:"f"`
	Total   int `json:"t"`
}

// Tally counts the outcomes.
func (v ImportView) Tally() ImportCounts {
	if v.Counted != nil {
		return *v.Counted
	}
	n := ImportCounts{Total: len(v.Results)}
	for _, r := range v.Results {
		switch r.Outcome {
		case "created":
			n.Created++
		case "updated", "unchanged", "replaced":
			n.Updated++
		default:
			n.Failed++
		}
	}
	return n
}

// Summary is one line about the import.
func (v ImportView) Summary() string {
	n := v.Tally()
	s := fmt.Sprintf("%d created, %d updated, %d failed of %d records", n.Created, n.Updated, n.Failed, n.Total)
	if shown := len(v.Results); v.Counted != nil && n.Failed > shown {
		s += fmt.Sprintf(" (the first %d failures are listed)", shown)
	}
	return s
}

func i64(n int64) string { return fmt.Sprint(n) }

func dashed(field string) string { return strings.ReplaceAll(field, ".", "-") }

func importBadge(outcome string) string {
	switch outcome {
	case "created", "updated":
		return "ready"
	}
	return "conflict"
}

// Displayable replaces NUL characters (refused input) with U+FFFD so the
// re-rendered form shows where they were.
func (f EMForm) Displayable() EMForm {
	r := strings.NewReplacer("\x00", "\uFFFD")
	f.MAC, f.Username, f.Chassis, f.Name = r.Replace(f.MAC), r.Replace(f.Username), r.Replace(f.Chassis), r.Replace(f.Name)
	f.Description, f.Labels, f.Fallback, f.SkuID = r.Replace(f.Description), r.Replace(f.Labels), r.Replace(f.Fallback), r.Replace(f.SkuID)
	rows := make([]DPURow, len(f.DPUs))
	for i, d := range f.DPUs {
		rows[i] = DPURow{Key: r.Replace(d.Key), Serial: r.Replace(d.Serial), IP: r.Replace(d.IP), IPv6: r.Replace(d.IPv6)}
	}
	f.DPUs = rows
	return f
}

// SpecIndex is the expected_dpus index of form row i (the reverse of the
// mapping EMErrorID applies); a row that is not in the spec gets the
// index past the end (its message goes to the form).
func (f EMForm) SpecIndex(i int) int {
	for j, r := range f.specRows() {
		if r == i {
			return j
		}
	}
	return len(f.DPUs)
}

// Warnings places the allocator's pending-binding warnings
// (console.PendingLoopbacks) beside their reservation fields: element
// "warn-dpu-<key>-loopback_ip" of the row.
func (f EMForm) Warnings(ps []console.PendingLoopback) FieldMessages {
	out := FieldMessages{}
	for _, p := range ps {
		id := f.EMErrorID(p.Field)
		if !strings.HasPrefix(id, "err-dpu-") {
			continue
		}
		id = "warn-" + strings.TrimPrefix(id, "err-")
		msg := p.Message
		if p.Already {
			msg = "Already pending: " + msg
		}
		out[id] = msg
	}
	return out
}

// WithWarnings adds warnings to the messages, except under a field that
// has an error: a value refused (held elsewhere, outside the pool) will
// never apply, so saying when it "applies" would contradict the error.
func (m FieldMessages) WithWarnings(warnings FieldMessages) FieldMessages {
	for id, w := range warnings {
		if m["err-"+strings.TrimPrefix(id, "warn-")] == "" {
			m[id] = w
		}
	}
	return m
}

// WarnIDs lists every warning element of the form's DPU rows.
func (f EMForm) WarnIDs() []string {
	var ids []string
	for _, d := range f.DPUs {
		for _, p := range []string{"loopback_ip", "loopback_ip_v6"} {
			ids = append(ids, "warn-dpu-"+d.Key+"-"+p)
		}
	}
	return ids
}
