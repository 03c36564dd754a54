package allocator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/ipledger/ipledger/models"
)

// ExpectedMachines: a host the site expects to ingest, with its NICo fields
// and the per-DPU loopback reservations of DESIGN.md §4. Every door (REST
// create/PUT/PATCH/replace-all, the CLI through REST, the console) writes
// through the functions of this file, and every one of them validates with
// the same code (validateRecords) inside the write's transaction, holding
// the row locks of the pools lo-ip and lo-ip-v6, so two operators racing to
// reserve one value cannot both win. The unique constraints of
// expected_dpus (serial_number, loopback_ip, loopback_ip_v6 and their sort
// keys) and of expected_machines (bmc_mac_address) back the rules in the
// database; their violations surface as 409 naming the field.

// Limits on free-text fields (DESIGN.md is silent; docs/decisions.md).
const (
	emMaxText        = 256
	emMaxDescription = 1024
	emMaxLabels      = 64
	emMaxDpus        = 16
)

var emSerialRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Label is one metadata label.
type Label struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Metadata is the NICo metadata of an ExpectedMachine. An empty metadata is
// {"name": "", "description": "", "labels": []} (DESIGN.md §10).
type Metadata struct {
	Name        string  `json:"name"`
	Description string  `json:"description"`
	Labels      []Label `json:"labels"`
}

// ExpectedDpu is one expected DPU: its serial number (globally unique) and
// optional loopback reservations, an IPv4 address of pool lo-ip and an IPv6
// address of pool lo-ip-v6 (DESIGN.md §4). Absent reservations are null
// in responses; in requests null, absent and "" all mean "none".
type ExpectedDpu struct {
	SerialNumber string  `json:"serial_number"`
	LoopbackIP   *string `json:"loopback_ip"`
	LoopbackIPv6 *string `json:"loopback_ip_v6"`
}

// ExpectedMachine is an ExpectedMachine as every response shows it
// (DESIGN.md §5). The BMC password is write-only: responses say only
// whether one is stored (bmc_password_set). ExpectedDpus is never null.
type ExpectedMachine struct {
	ID                       string        `json:"id"`
	Version                  int64         `json:"version"`
	BmcMacAddress            string        `json:"bmc_mac_address"`
	BmcUsername              string        `json:"bmc_username"`
	BmcPasswordSet           bool          `json:"bmc_password_set"`
	ChassisSerialNumber      string        `json:"chassis_serial_number"`
	FallbackDpuSerialNumbers []string      `json:"fallback_dpu_serial_numbers"`
	Metadata                 Metadata      `json:"metadata"`
	SkuID                    *string       `json:"sku_id"`
	ExpectedDpus             []ExpectedDpu `json:"expected_dpus"`
}

// ExpectedMachineSpec is an ExpectedMachine as a client sends it (POST,
// PUT, one record of a replace-all file). Compatibility with older clients
// (DESIGN.md §4): ExpectedDpus nil (absent, or null in a PUT) keeps the
// stored list and an empty slice clears it; BmcPassword nil or "" keeps the
// stored password. Every other field absent is reset to empty by a PUT.
// Read-only fields a client echoes back (id, version, bmc_password_set) are
// ignored.
type ExpectedMachineSpec struct {
	BmcMacAddress            string         `json:"bmc_mac_address"`
	BmcUsername              string         `json:"bmc_username"`
	BmcPassword              *string        `json:"bmc_password,omitempty"`
	ChassisSerialNumber      string         `json:"chassis_serial_number"`
	FallbackDpuSerialNumbers []string       `json:"fallback_dpu_serial_numbers"`
	Metadata                 *Metadata      `json:"metadata,omitempty"`
	SkuID                    *string        `json:"sku_id"`
	ExpectedDpus             *[]ExpectedDpu `json:"expected_dpus,omitempty"`
}

// IfMatch is an optimistic-concurrency precondition: the record versions a
// writer accepts (the If-Match header). Empty matches every version (no
// If-Match, or If-Match: *); a version that matches none is 412
// stale_version.
type IfMatch []int64

func (m IfMatch) check(what string, v int64) error {
	if len(m) == 0 {
		return nil
	}
	for _, x := range m {
		if x == v {
			return nil
		}
	}
	return Errf(CodeStaleVersion, "", "%s is at version %d, not %s: it changed since it was read; read it again and retry", what, v, m.String())
}

func (m IfMatch) String() string {
	var s []string
	for _, v := range m {
		s = append(s, fmt.Sprint(v))
	}
	return strings.Join(s, " or ")
}

// ExpectedMachineFilter selects ExpectedMachines; empty fields match all.
type ExpectedMachineFilter struct {
	// BmcMacAddress matches exactly (any case, ':' or '-').
	BmcMacAddress string
	// SerialNumber matches the chassis serial, an expected DPU's serial or
	// a fallback DPU serial, exactly.
	SerialNumber string
	// Label is "key" (any value) or "key=value".
	Label string
	// Search is a case-insensitive substring of the BMC MAC, chassis
	// serial, metadata name or an expected DPU's serial (console search).
	Search string
	// Limit defaults to 100 and is capped at 1000.
	Limit int
	// Cursor is the next_cursor of the previous page.
	Cursor string
}

// ExpectedMachinePage is one page of ExpectedMachines ordered by BMC MAC.
type ExpectedMachinePage struct {
	Items      []ExpectedMachine `json:"items"`
	NextCursor string            `json:"next_cursor,omitempty"`
}

// NormalizeMAC accepts a 48-bit MAC address in any case, with ':' or '-'
// between the six octets, and returns it lower-case with ':' (DESIGN.md
// §10); anything else is 422 invalid on field.
func NormalizeMAC(s, field string) (string, error) {
	in := strings.TrimSpace(s)
	if in == "" {
		return "", Errf(CodeInvalid, field, "%s is required", field)
	}
	sep := byte(':')
	if len(in) == 17 {
		sep = in[2]
	}
	ok := len(in) == 17 && (sep == ':' || sep == '-')
	if ok {
		for i := 2; i < 17; i += 3 {
			if in[i] != sep {
				ok = false
			}
		}
	}
	var hw net.HardwareAddr
	if ok {
		var err error
		hw, err = net.ParseMAC(strings.ReplaceAll(in, "-", ":"))
		ok = err == nil && len(hw) == 6
	}
	if !ok {
		return "", Errf(CodeInvalid, field, "%q is not a MAC address: want six hex octets separated by ':' or '-', e.g. 1a:1b:1c:1d:1e:1f", s)
	}
	return hw.String(), nil
}

// looksLikeMAC tells whether an {id} path segment is a MAC address rather
// than a UUID.
func looksLikeMAC(s string) bool {
	_, err := NormalizeMAC(s, "id")
	return err == nil
}

// ---------------------------------------------------------------------------
// Decoding (shared by REST and the console's file import)

// DecodeExpectedMachineSpec reads one ExpectedMachine JSON object. Broken
// JSON is 400 bad_request; a field of the wrong JSON type is 422 invalid
// naming it with its index (expected_dpus[1].loopback_ip).
func DecodeExpectedMachineSpec(b []byte) (ExpectedMachineSpec, error) {
	return decodeSpec(b, "")
}

func decodeSpec(b []byte, prefix string) (ExpectedMachineSpec, error) {
	var s ExpectedMachineSpec
	var shape map[string]json.RawMessage
	if err := json.Unmarshal(b, &shape); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if prefix != "" {
				return s, Errf(CodeInvalid, prefix, "%s must be a JSON object, not %s", prefix, te.Value)
			}
			return s, Errf(CodeBadRequest, "", "request body must be a JSON object, not %s", te.Value)
		}
		return s, Errf(CodeBadRequest, "", "request body is not valid JSON: %v", err)
	}
	if shape == nil {
		if prefix != "" {
			return s, Errf(CodeInvalid, prefix, "%s must be a JSON object, not null", prefix)
		}
		return s, Errf(CodeBadRequest, "", "request body must be a JSON object, not null")
	}
	// Decode expected_dpus element by element so that a type error names
	// its index.
	var dpus *[]ExpectedDpu
	if raw, ok := shape["expected_dpus"]; ok && string(raw) != "null" {
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			return s, Errf(CodeInvalid, joinField(prefix, "expected_dpus"), "expected_dpus must be a JSON array of objects")
		}
		list := make([]ExpectedDpu, 0, len(elems))
		for i, e := range elems {
			var d ExpectedDpu
			if err := json.Unmarshal(e, &d); err != nil {
				f := joinField(prefix, fmt.Sprintf("expected_dpus[%d]", i))
				var te *json.UnmarshalTypeError
				if errors.As(err, &te) && te.Field != "" {
					return s, Errf(CodeInvalid, f+"."+te.Field, "%s must be a JSON %s, not %s", te.Field, te.Type.String(), te.Value)
				}
				return s, Errf(CodeInvalid, f, "each expected DPU must be a JSON object {serial_number, loopback_ip, loopback_ip_v6}")
			}
			list = append(list, d)
		}
		dpus = &list
	}
	delete(shape, "expected_dpus")
	rest, _ := json.Marshal(shape)
	if err := json.Unmarshal(rest, &s); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return s, Errf(CodeInvalid, joinField(prefix, te.Field), "%s must be a JSON %s, not %s", te.Field, te.Type.String(), te.Value)
		}
		return s, Errf(CodeInvalid, prefix, "%v", err)
	}
	s.ExpectedDpus = dpus
	return s, nil
}

// ParseExpectedMachinesFile reads the NICo expected-machines file
// {"expected_machines": [...]} as is (the body of replace-all and the
// console's import). Errors name the record: expected_machines[3].bmc_username.
func ParseExpectedMachinesFile(b []byte) ([]ExpectedMachineSpec, error) {
	var file map[string]json.RawMessage
	if err := json.Unmarshal(b, &file); err != nil || file == nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) || (err == nil && file == nil) {
			return nil, Errf(CodeBadRequest, "", `the body must be a JSON object {"expected_machines": [...]}`)
		}
		return nil, Errf(CodeBadRequest, "", "the file is not valid JSON: %v", err)
	}
	raw, ok := file["expected_machines"]
	if !ok || string(raw) == "null" {
		return nil, Errf(CodeInvalid, "expected_machines", `expected_machines is required: the file format is {"expected_machines": [...]} (an empty list removes every ExpectedMachine)`)
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, Errf(CodeInvalid, "expected_machines", "expected_machines must be a JSON array")
	}
	out := make([]ExpectedMachineSpec, 0, len(elems))
	for i, e := range elems {
		s, err := decodeSpec(e, fmt.Sprintf("expected_machines[%d]", i))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func joinField(prefix, f string) string {
	if prefix == "" {
		return f
	}
	if f == "" {
		return prefix
	}
	return prefix + "." + f
}

// ---------------------------------------------------------------------------
// Validation: one function for every door

// emDpu is one validated expected DPU.
type emDpu struct {
	field  string // expected_dpus[i] with the record's prefix
	serial string
	v4, v6 netip.Addr // invalid when not reserved
	// kept marks a stored DPU that a replace-all record keeps because it
	// left expected_dpus out.
	kept bool
}

// emRecord is one validated ExpectedMachine as it will be stored.
type emRecord struct {
	prefix    string
	selfID    string // the stored record it replaces, "" when new
	mac       string
	username  string
	password  *string // nil keeps the stored one
	chassis   string
	fallback  []string
	meta      Metadata
	sku       *string
	dpus      []emDpu
	dpusGiven bool // false keeps the stored list
	// clearPassword removes the stored password (PATCH "bmc_password": null).
	clearPassword bool
}

func (r *emRecord) f(field string) string { return joinField(r.prefix, field) }

// problems collects validation errors in field order.
type problems []*Error

func (p *problems) add(e *Error) { *p = append(*p, e) }

func (p problems) first() error {
	if len(p) == 0 {
		return nil
	}
	return p[0]
}

// normalize checks and normalizes the fields of one record that need no
// database (DESIGN.md §4 rules 1 and 2, MAC, metadata). It never fails
// fast: every problem is collected.
func normalize(prefix string, s ExpectedMachineSpec, ps *problems) *emRecord {
	r := &emRecord{prefix: prefix}
	mac, err := NormalizeMAC(s.BmcMacAddress, r.f("bmc_mac_address"))
	if err != nil {
		e, _ := AsError(err)
		ps.add(e)
	}
	r.mac = mac
	text := func(field, v string, max int) string {
		if len(v) > max {
			ps.add(Errf(CodeInvalid, r.f(field), "%s is %d bytes long; at most %d", field, len(v), max))
		}
		return v
	}
	r.username = text("bmc_username", s.BmcUsername, emMaxText)
	if s.BmcPassword != nil && *s.BmcPassword != "" {
		pw := text("bmc_password", *s.BmcPassword, emMaxText)
		r.password = &pw
	}
	r.chassis = text("chassis_serial_number", strings.TrimSpace(s.ChassisSerialNumber), emMaxText)
	// fallback_dpu_serial_numbers keeps its NICo meaning and behaviour
	// unchanged (DESIGN.md §4 rule 4): stored as given.
	r.fallback = append([]string{}, s.FallbackDpuSerialNumbers...)
	r.meta = Metadata{Labels: []Label{}}
	if s.Metadata != nil {
		r.meta.Name = text("metadata.name", s.Metadata.Name, emMaxText)
		r.meta.Description = text("metadata.description", s.Metadata.Description, emMaxDescription)
		if len(s.Metadata.Labels) > emMaxLabels {
			ps.add(Errf(CodeInvalid, r.f("metadata.labels"), "at most %d labels, got %d", emMaxLabels, len(s.Metadata.Labels)))
		}
		seen := map[string]int{}
		for i, l := range s.Metadata.Labels {
			f := fmt.Sprintf("metadata.labels[%d]", i)
			k := strings.TrimSpace(l.Key)
			if k == "" {
				ps.add(Errf(CodeInvalid, r.f(f+".key"), "a label needs a non-empty key"))
			} else if j, dup := seen[k]; dup {
				ps.add(Errf(CodeInvalid, r.f(f+".key"), "label key %q is already used by metadata.labels[%d]", k, j))
			} else {
				seen[k] = i
			}
			text(f+".key", k, emMaxText)
			text(f+".value", l.Value, emMaxText)
			r.meta.Labels = append(r.meta.Labels, Label{Key: k, Value: l.Value})
		}
	}
	if s.SkuID != nil {
		if v := strings.TrimSpace(*s.SkuID); v != "" {
			text("sku_id", v, emMaxText)
			r.sku = &v
		}
	}
	if s.ExpectedDpus == nil {
		return r
	}
	r.dpusGiven = true
	list := *s.ExpectedDpus
	if len(list) > emMaxDpus {
		ps.add(Errf(CodeInvalid, r.f("expected_dpus"), "at most %d expected DPUs per machine, got %d", emMaxDpus, len(list)))
	}
	serials, v4s, v6s := map[string]int{}, map[netip.Addr]int{}, map[netip.Addr]int{}
	for i, in := range list {
		d := emDpu{field: r.f(fmt.Sprintf("expected_dpus[%d]", i))}
		d.serial = strings.TrimSpace(in.SerialNumber)
		switch {
		case d.serial == "":
			ps.add(Errf(CodeInvalid, d.field+".serial_number", "serial_number is required"))
		case !emSerialRE.MatchString(d.serial):
			ps.add(Errf(CodeInvalid, d.field+".serial_number", "serial_number %q must be 1 to 64 letters, digits, '_', '.' or '-'", in.SerialNumber))
		default:
			if j, dup := serials[d.serial]; dup {
				ps.add(Errf(CodeInvalid, d.field+".serial_number", "serial_number %s is already used by expected_dpus[%d] of this machine", d.serial, j))
			} else {
				serials[d.serial] = i
			}
		}
		if in.LoopbackIP != nil && strings.TrimSpace(*in.LoopbackIP) != "" {
			a, err := parseAddr(strings.TrimSpace(*in.LoopbackIP))
			switch {
			case err != nil:
				ps.add(Errf(CodeInvalid, d.field+".loopback_ip", "%v", err))
			case !a.Is4():
				ps.add(Errf(CodeInvalid, d.field+".loopback_ip", "%q is not an IPv4 address; an IPv6 reservation goes in loopback_ip_v6", *in.LoopbackIP))
			default:
				if j, dup := v4s[a]; dup {
					ps.add(Errf(CodeInvalid, d.field+".loopback_ip", "%s is already reserved by expected_dpus[%d] of this machine", a, j))
				} else {
					v4s[a] = i
					d.v4 = a
				}
			}
		}
		if in.LoopbackIPv6 != nil && strings.TrimSpace(*in.LoopbackIPv6) != "" {
			a, err := parseAddr(strings.TrimSpace(*in.LoopbackIPv6))
			switch {
			case err != nil:
				ps.add(Errf(CodeInvalid, d.field+".loopback_ip_v6", "%v", err))
			case !a.Is6():
				ps.add(Errf(CodeInvalid, d.field+".loopback_ip_v6", "%q is not an IPv6 address; an IPv4 reservation goes in loopback_ip", *in.LoopbackIPv6))
			default:
				if j, dup := v6s[a]; dup {
					ps.add(Errf(CodeInvalid, d.field+".loopback_ip_v6", "%s is already reserved by expected_dpus[%d] of this machine", a, j))
				} else {
					v6s[a] = i
					d.v6 = a
				}
			}
		}
		r.dpus = append(r.dpus, d)
	}
	return r
}

// loopbackPools are the two pools reservations refer to, as locked (or
// read) by the validating transaction, with their ranges.
type loopbackPools struct {
	v4, v6             *models.Pool
	v4Ranges, v6Ranges []models.PoolRange
}

func (t *tx) loopbackPools() (*loopbackPools, error) {
	m, err := t.lockPools(PoolLoopbackV4, PoolLoopbackV6)
	if err != nil {
		return nil, err
	}
	lp := &loopbackPools{v4: m[PoolLoopbackV4], v6: m[PoolLoopbackV6]}
	for _, x := range []struct {
		p  *models.Pool
		rs *[]models.PoolRange
	}{{lp.v4, &lp.v4Ranges}, {lp.v6, &lp.v6Ranges}} {
		if x.p == nil {
			continue
		}
		if err := t.Where("pool_id = ?", x.p.ID).Order("first_key").Find(x.rs).Error; err != nil {
			return nil, err
		}
	}
	return lp, nil
}

// checkMember applies the pool half of DESIGN.md §4 rule 3: the value lies
// in an auto_assign=false range of its family's pool, which must exist.
// These are 422 invalid (outside the pool, auto-assign range).
func checkMember(p *models.Pool, ranges []models.PoolRange, want PoolType, poolName, field string, a netip.Addr, ps *problems) bool {
	if p == nil {
		ps.add(Errf(CodeInvalid, field, "%s cannot be reserved: pool %q does not exist (define it before reserving %s loopbacks)", a, poolName, want))
		return false
	}
	if PoolType(p.Type) != want {
		ps.add(Errf(CodeInvalid, field, "%s cannot be reserved: pool %q is of type %s, not %s", a, poolName, p.Type, want))
		return false
	}
	k := fromAddr(a).key()
	for _, r := range ranges {
		if r.FirstKey <= k && k <= r.LastKey {
			if r.AutoAssign {
				ps.add(Errf(CodeInvalid, field, "%s is in an auto-assign range (%s..%s) of pool %q; a reservation must lie in an auto_assign=false range",
					a, r.FirstValue, r.LastValue, poolName))
				return false
			}
			return true
		}
	}
	ps.add(Errf(CodeInvalid, field, "%s is not in pool %q", a, poolName))
	return false
}

// validateRecords is THE validation of ExpectedMachines (DESIGN.md §4),
// used by every write and by ValidateExpectedMachine. recs are the
// records the request writes (already normalized, syntax problems in ps);
// replaced are the ids of stored records whose DPU rows the request
// replaces or removes (their stored declarations do not collide); all is
// true for replace-all, where every stored record is replaced. Problems
// come in three passes so that a request is reported malformed (422)
// before it is reported colliding (409): syntax (normalize), pool
// membership, then collisions with stored state.
func (t *tx) validateRecords(recs []*emRecord, replaced map[string]bool, all bool, ps *problems) error {
	lp, err := t.loopbackPools()
	if err != nil {
		return err
	}
	// Pass 2: duplicates across records (replace-all) and pool membership.
	macs := map[string]string{}
	serials, v4s, v6s := map[string]string{}, map[netip.Addr]string{}, map[netip.Addr]string{}
	for _, r := range recs {
		if r.mac != "" && len(recs) > 1 {
			if other, dup := macs[r.mac]; dup {
				ps.add(Errf(CodeInvalid, r.f("bmc_mac_address"), "bmc_mac_address %s is already used by %s", r.mac, other))
			} else {
				macs[r.mac] = r.prefix
			}
		}
		for i := range r.dpus {
			d := &r.dpus[i]
			if d.kept {
				continue
			}
			if d.serial != "" {
				if other, dup := serials[d.serial]; dup && len(recs) > 1 {
					ps.add(Errf(CodeInvalid, d.field+".serial_number", "serial_number %s is already used by %s", d.serial, other))
				} else if !dup {
					serials[d.serial] = d.field
				}
			}
			if d.v4.IsValid() {
				if other, dup := v4s[d.v4]; dup && len(recs) > 1 {
					ps.add(Errf(CodeInvalid, d.field+".loopback_ip", "%s is already reserved by %s", d.v4, other))
					d.v4 = netip.Addr{}
				} else if !checkMember(lp.v4, lp.v4Ranges, TypeIPv4, PoolLoopbackV4, d.field+".loopback_ip", d.v4, ps) {
					d.v4 = netip.Addr{}
				} else {
					v4s[d.v4] = d.field
				}
			}
			if d.v6.IsValid() {
				if other, dup := v6s[d.v6]; dup && len(recs) > 1 {
					ps.add(Errf(CodeInvalid, d.field+".loopback_ip_v6", "%s is already reserved by %s", d.v6, other))
					d.v6 = netip.Addr{}
				} else if !checkMember(lp.v6, lp.v6Ranges, TypeIPv6, PoolLoopbackV6, d.field+".loopback_ip_v6", d.v6, ps) {
					d.v6 = netip.Addr{}
				} else {
					v6s[d.v6] = d.field
				}
			}
		}
	}
	if len(*ps) > 0 {
		return nil
	}
	// Pass 3: collisions with stored state (409), field order. The
	// allocations and quarantines of every requested value are read at
	// once (a replace-all of thousands of records stays a few queries).
	held, err := t.heldValues(lp, recs)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if !all && r.mac != "" {
			var other models.ExpectedMachine
			q := t.Where("bmc_mac_address = ?", r.mac)
			if r.selfID != "" {
				q = q.Where("id <> ?", r.selfID)
			}
			err := q.Take(&other).Error
			if err == nil {
				ps.add(Errf(CodeConflict, r.f("bmc_mac_address"), "bmc_mac_address %s is already used by ExpectedMachine %s", r.mac, other.ID))
			} else if !errors.Is(err, gorm.ErrRecordNotFound) {
				return err
			}
		}
		for _, d := range r.dpus {
			if d.kept {
				continue
			}
			if err := t.checkDpuCollisions(d, lp, held, replaced, all, ps); err != nil {
				return err
			}
		}
	}
	// Kept DPUs of replace-all records are part of the final state: a
	// DPU written by the file may not collide with them.
	for _, r := range recs {
		for _, d := range r.dpus {
			if !d.kept {
				continue
			}
			owner := fmt.Sprintf("%s (kept: %s leaves expected_dpus out)", r.mac, r.prefix)
			if f, dup := serials[d.serial]; dup {
				ps.add(Errf(CodeConflict, f+".serial_number", "serial_number %s is declared by ExpectedMachine %s", d.serial, owner))
			}
			if f, dup := v4s[d.v4]; d.v4.IsValid() && dup {
				ps.add(Errf(CodeNotAvailable, f+".loopback_ip", "%s is declared for DPU %s of ExpectedMachine %s", d.v4, d.serial, owner))
			}
			if f, dup := v6s[d.v6]; d.v6.IsValid() && dup {
				ps.add(Errf(CodeNotAvailable, f+".loopback_ip_v6", "%s is declared for DPU %s of ExpectedMachine %s", d.v6, d.serial, owner))
			}
		}
	}
	return nil
}

// checkDpuCollisions applies the stored-state half of DESIGN.md §4 rules 1
// and 3 to one DPU: serial declared by another ExpectedMachine (409
// conflict); value declared by another ExpectedDpu, allocated to an owner
// other than this serial's DPU, or quarantined for another machine (409
// not_available).
func (t *tx) checkDpuCollisions(d emDpu, lp *loopbackPools, held map[string]*models.Allocation, replaced map[string]bool, all bool, ps *problems) error {
	other := func(col, val string) (*models.ExpectedDpu, error) {
		if all {
			return nil, nil
		}
		var rows []models.ExpectedDpu
		if err := t.Where(col+" = ?", val).Find(&rows).Error; err != nil {
			return nil, err
		}
		for i := range rows {
			if !replaced[rows[i].ExpectedMachineID] {
				return &rows[i], nil
			}
		}
		return nil, nil
	}
	if d.serial != "" {
		o, err := other("serial_number", d.serial)
		if err != nil {
			return err
		}
		if o != nil {
			ps.add(Errf(CodeConflict, d.field+".serial_number", "serial_number %s is already declared by ExpectedMachine %s", d.serial, t.emLabel(o.ExpectedMachineID)))
		}
	}
	owner := Owner{Type: OwnerTypeMachine, ID: DPUMachineID(d.serial)}
	for _, fam := range []struct {
		a     netip.Addr
		p     *models.Pool
		col   string
		field string
	}{{d.v4, lp.v4, "loopback_ip_key", d.field + ".loopback_ip"}, {d.v6, lp.v6, "loopback_ip_v6_key", d.field + ".loopback_ip_v6"}} {
		if !fam.a.IsValid() || fam.p == nil {
			continue
		}
		k := fromAddr(fam.a).key()
		o, err := other(fam.col, k)
		if err != nil {
			return err
		}
		if o != nil {
			ps.add(Errf(CodeNotAvailable, fam.field, "%s is declared for DPU %s of ExpectedMachine %s", fam.a, o.SerialNumber, t.emLabel(o.ExpectedMachineID)))
			continue
		}
		al := held[heldKey(fam.p.ID, k)]
		if al == nil {
			continue
		}
		if al.State == models.StateQuarantined {
			if t.a.hold > 0 && al.QuarantinedAt != nil && !al.QuarantinedAt.After(t.now.Add(-t.a.hold)) {
				continue // the hold ran out: the value is free
			}
			if deref(al.FormerOwnerType) != owner.Type || deref(al.FormerOwnerID) != owner.ID {
				ps.add(Errf(CodeNotAvailable, fam.field, "%s is quarantined for another machine (former owner %s/%s)", fam.a, deref(al.FormerOwnerType), deref(al.FormerOwnerID)))
			}
			continue
		}
		if deref(al.OwnerType) != owner.Type || deref(al.OwnerID) != owner.ID {
			ps.add(Errf(CodeNotAvailable, fam.field, "%s is allocated to %s/%s, not to DPU %s", fam.a, deref(al.OwnerType), deref(al.OwnerID), d.serial))
		}
	}
	return nil
}

func heldKey(poolID int64, key string) string { return fmt.Sprintf("%d/%s", poolID, key) }

// heldValues reads the allocation rows (allocated or quarantined) of the
// values the records reserve, keyed by heldKey.
func (t *tx) heldValues(lp *loopbackPools, recs []*emRecord) (map[string]*models.Allocation, error) {
	out := map[string]*models.Allocation{}
	keys := map[int64][]string{}
	for _, r := range recs {
		for _, d := range r.dpus {
			if d.kept {
				continue
			}
			if d.v4.IsValid() && lp.v4 != nil {
				keys[lp.v4.ID] = append(keys[lp.v4.ID], fromAddr(d.v4).key())
			}
			if d.v6.IsValid() && lp.v6 != nil {
				keys[lp.v6.ID] = append(keys[lp.v6.ID], fromAddr(d.v6).key())
			}
		}
	}
	for pid, ks := range keys {
		for start := 0; start < len(ks); start += 500 {
			end := min(start+500, len(ks))
			var rows []models.Allocation
			if err := t.Where("pool_id = ? AND value_key IN ?", pid, ks[start:end]).Find(&rows).Error; err != nil {
				return nil, err
			}
			for i := range rows {
				out[heldKey(pid, rows[i].ValueKey)] = &rows[i]
			}
		}
	}
	return out, nil
}

// emLabel names a stored ExpectedMachine for messages: "ID (MAC)".
func (t *tx) emLabel(id string) string {
	var em models.ExpectedMachine
	if err := t.Where("id = ?", id).Take(&em).Error; err != nil {
		return id
	}
	return em.ID + " (" + em.BmcMacAddress + ")"
}

// ValidateExpectedMachine checks one ExpectedMachine without writing it and
// returns the first problem as an *Error with its field (nil when the
// record would be accepted now). id is the stored record the spec would
// replace ("" for a new one). The rules are the ones every write applies
// (DESIGN.md §4): the console uses it for as-you-type validation.
func (a *Allocator) ValidateExpectedMachine(ctx context.Context, id string, spec ExpectedMachineSpec) error {
	ps, err := a.ExpectedMachineProblems(ctx, id, spec)
	if err != nil {
		return err
	}
	if len(ps) == 0 {
		return nil
	}
	return ps[0]
}

// ExpectedMachineProblems is ValidateExpectedMachine returning every
// problem found, in field order (422 problems before 409 ones), so that a
// form can show each one beside its field.
func (a *Allocator) ExpectedMachineProblems(ctx context.Context, id string, spec ExpectedMachineSpec) ([]*Error, error) {
	var ps problems
	t := &tx{DB: a.db.WithContext(ctx), a: a, ctx: ctx, now: a.now(), locked: map[string]*models.Pool{}}
	r := normalize("", spec, &ps)
	replaced := map[string]bool{}
	if id != "" {
		cur, err := findExpectedMachine(t.DB, id)
		if err != nil {
			return nil, mapDBError(err)
		}
		r.selfID = cur.ID
		replaced[cur.ID] = r.dpusGiven
	}
	if len(ps) == 0 {
		if err := t.validateRecords([]*emRecord{r}, replaced, false, &ps); err != nil {
			return nil, mapDBError(err)
		}
	}
	return ps, nil
}

// ---------------------------------------------------------------------------
// Reading

// lockExpectedMachine finds a record inside a write transaction and, on
// PostgreSQL, takes its row lock, so that two writers of one record queue
// instead of the later one failing its version check (a write without
// If-Match must not answer 412).
func (t *tx) lockExpectedMachine(idOrMAC string) (*models.ExpectedMachine, error) {
	db := t.DB
	if t.a.dialect == models.Postgres {
		db = db.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	return findExpectedMachine(db, idOrMAC)
}

func findExpectedMachine(db *gorm.DB, idOrMAC string) (*models.ExpectedMachine, error) {
	var em models.ExpectedMachine
	var err error
	if looksLikeMAC(idOrMAC) {
		mac, _ := NormalizeMAC(idOrMAC, "id")
		err = db.Where("bmc_mac_address = ?", mac).Take(&em).Error
	} else {
		err = db.Where("id = ?", strings.TrimSpace(idOrMAC)).Take(&em).Error
	}
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, Errf(CodeNotFound, "", "no ExpectedMachine with id or BMC MAC %q", idOrMAC)
	}
	if err != nil {
		return nil, err
	}
	return &em, nil
}

func expectedMachinesOut(db *gorm.DB, rows []models.ExpectedMachine) ([]ExpectedMachine, error) {
	out := make([]ExpectedMachine, 0, len(rows))
	if len(rows) == 0 {
		return out, nil
	}
	ids := make([]string, len(rows))
	for i := range rows {
		ids[i] = rows[i].ID
	}
	var dpus []models.ExpectedDpu
	for start := 0; start < len(ids); start += 500 {
		var chunk []models.ExpectedDpu
		if err := db.Where("expected_machine_id IN ?", ids[start:min(start+500, len(ids))]).Order("expected_machine_id, position").Find(&chunk).Error; err != nil {
			return nil, err
		}
		dpus = append(dpus, chunk...)
	}
	by := map[string][]ExpectedDpu{}
	for _, d := range dpus {
		by[d.ExpectedMachineID] = append(by[d.ExpectedMachineID], ExpectedDpu{SerialNumber: d.SerialNumber, LoopbackIP: d.LoopbackIP, LoopbackIPv6: d.LoopbackIPv6})
	}
	for i := range rows {
		r := &rows[i]
		em := ExpectedMachine{ID: r.ID, Version: r.Version, BmcMacAddress: r.BmcMacAddress, BmcUsername: r.BmcUsername,
			BmcPasswordSet: r.BmcPassword != "", ChassisSerialNumber: r.ChassisSerialNumber, SkuID: r.SkuID,
			Metadata:                 Metadata{Name: r.MetadataName, Description: r.MetadataDescription, Labels: []Label{}},
			FallbackDpuSerialNumbers: []string{}, ExpectedDpus: by[r.ID]}
		_ = json.Unmarshal([]byte(r.FallbackDpuSerialNumbers), &em.FallbackDpuSerialNumbers)
		_ = json.Unmarshal([]byte(r.MetadataLabels), &em.Metadata.Labels)
		if em.FallbackDpuSerialNumbers == nil {
			em.FallbackDpuSerialNumbers = []string{}
		}
		if em.Metadata.Labels == nil {
			em.Metadata.Labels = []Label{}
		}
		if em.ExpectedDpus == nil {
			em.ExpectedDpus = []ExpectedDpu{}
		}
		out = append(out, em)
	}
	return out, nil
}

func expectedMachineOut(db *gorm.DB, row *models.ExpectedMachine) (*ExpectedMachine, error) {
	out, err := expectedMachinesOut(db, []models.ExpectedMachine{*row})
	if err != nil {
		return nil, err
	}
	return &out[0], nil
}

// GetExpectedMachine returns one ExpectedMachine by its UUID or its BMC
// MAC address (any case, ':' or '-'), or 404 not_found.
func (a *Allocator) GetExpectedMachine(ctx context.Context, idOrMAC string) (*ExpectedMachine, error) {
	var out *ExpectedMachine
	err := a.read(ctx, func(db *gorm.DB) error {
		row, err := findExpectedMachine(db, idOrMAC)
		if err != nil {
			return err
		}
		out, err = expectedMachineOut(db, row)
		return err
	})
	return out, err
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// ListExpectedMachines returns one page of ExpectedMachines ordered by BMC
// MAC, keyset-paginated (next_cursor is the last MAC of the page). A
// malformed MAC filter or cursor is 422 invalid.
func (a *Allocator) ListExpectedMachines(ctx context.Context, f ExpectedMachineFilter) (*ExpectedMachinePage, error) {
	f.Limit = clampEMLimit(f.Limit)
	var mac, cursor string
	if f.BmcMacAddress != "" {
		m, err := NormalizeMAC(f.BmcMacAddress, "bmc_mac_address")
		if err != nil {
			return nil, err
		}
		mac = m
	}
	if f.Cursor != "" {
		m, err := NormalizeMAC(f.Cursor, "cursor")
		if err != nil {
			return nil, Errf(CodeInvalid, "cursor", "cursor %q is not one this API returned", f.Cursor)
		}
		cursor = m
	}
	page := &ExpectedMachinePage{Items: []ExpectedMachine{}}
	err := a.read(ctx, func(db *gorm.DB) error {
		q := db.Model(&models.ExpectedMachine{})
		if mac != "" {
			q = q.Where("bmc_mac_address = ?", mac)
		}
		// contains is an exact, case-sensitive substring test on both
		// databases (LIKE is case-insensitive on SQLite).
		contains := "instr(%s, ?) > 0"
		if a.dialect == models.Postgres {
			contains = "strpos(%s, ?) > 0"
		}
		if s := strings.TrimSpace(f.SerialNumber); s != "" {
			q = q.Where("(chassis_serial_number = ? OR id IN (SELECT expected_machine_id FROM expected_dpus WHERE serial_number = ?) OR "+
				fmt.Sprintf(contains, "fallback_dpu_serial_numbers")+")", s, s, jsonString(s))
		}
		if l := strings.TrimSpace(f.Label); l != "" {
			k, v, hasValue := strings.Cut(l, "=")
			pat := `{"key":` + jsonString(strings.TrimSpace(k)) + `,"value":`
			if hasValue {
				pat += jsonString(v) + "}"
			}
			q = q.Where(fmt.Sprintf(contains, "metadata_labels"), pat)
		}
		if s := strings.ToLower(strings.TrimSpace(f.Search)); s != "" {
			c := func(col string) string { return fmt.Sprintf(contains, "LOWER("+col+")") }
			q = q.Where("("+c("bmc_mac_address")+" OR "+c("chassis_serial_number")+" OR "+c("metadata_name")+
				" OR id IN (SELECT expected_machine_id FROM expected_dpus WHERE "+c("serial_number")+"))", s, s, s, s)
		}
		if cursor != "" {
			q = q.Where("bmc_mac_address > ?", cursor)
		}
		var rows []models.ExpectedMachine
		if err := q.Order("bmc_mac_address").Limit(f.Limit + 1).Find(&rows).Error; err != nil {
			return err
		}
		if len(rows) > f.Limit {
			rows = rows[:f.Limit]
			page.NextCursor = rows[len(rows)-1].BmcMacAddress
		}
		items, err := expectedMachinesOut(db, rows)
		page.Items = items
		return err
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

func clampEMLimit(n int) int {
	if n <= 0 {
		return 100
	}
	if n > 1000 {
		return 1000
	}
	return n
}

// ---------------------------------------------------------------------------
// Writing

// emAudit is an ExpectedMachine as audit events record it: never the
// password, only whether one is set and whether this change set it.
type emAudit struct {
	ExpectedMachine
	BmcPasswordChanged bool `json:"bmc_password_changed,omitempty"`
}

// prepare locks the loopback pools and frees their expired quarantines,
// so that validation and the database see the same state.
func (t *tx) prepareEM() error {
	m, err := t.lockPools(PoolLoopbackV4, PoolLoopbackV6)
	if err != nil {
		return err
	}
	for _, n := range []string{PoolLoopbackV4, PoolLoopbackV6} {
		if p := m[n]; p != nil {
			if err := t.purgeExpired(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeDpus inserts the DPU rows of r for machine id, mapping a unique
// violation (a racing writer on a database without the loopback pools to
// lock) to 409 with the field.
func (t *tx) writeDpus(id string, r *emRecord) error {
	rows := make([]models.ExpectedDpu, 0, len(r.dpus))
	for i, d := range r.dpus {
		row := models.ExpectedDpu{ExpectedMachineID: id, Position: i, SerialNumber: d.serial}
		if d.v4.IsValid() {
			row.LoopbackIP, row.LoopbackIPKey = strp(d.v4.String()), strp(fromAddr(d.v4).key())
		}
		if d.v6.IsValid() {
			row.LoopbackIPv6, row.LoopbackIPv6Key = strp(d.v6.String()), strp(fromAddr(d.v6).key())
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		return nil
	}
	if len(rows) == 1 || r.prefix != "" {
		// One statement per record. A violation here means a writer raced
		// this one without a pool lock to queue on; with several rows the
		// field names the record's list.
		if err := t.Create(&rows).Error; err != nil {
			field := r.f("expected_dpus")
			if len(rows) == 1 {
				field = r.dpus[0].field
			}
			return emConstraintError(err, field, r.f("bmc_mac_address"))
		}
		return nil
	}
	for i := range rows {
		if err := t.Create(&rows[i]).Error; err != nil {
			return emConstraintError(err, r.dpus[i].field, r.f("bmc_mac_address"))
		}
	}
	return nil
}

// emConstraintError maps a unique violation of expected_machines /
// expected_dpus to the 409 of DESIGN.md §5 naming the field.
func emConstraintError(err error, dpuField, macField string) error {
	if !models.IsUniqueViolation(err) {
		return err
	}
	name := err.Error()
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		name = pg.ConstraintName + " " + pg.ColumnName
	}
	switch {
	case strings.Contains(name, "loopback_ip_v6") || strings.Contains(name, "v6_key"):
		return Errf(CodeNotAvailable, dpuField+".loopback_ip_v6", "the IPv6 loopback is already declared by another ExpectedDpu")
	case strings.Contains(name, "loopback_ip") || strings.Contains(name, "v4_key"):
		return Errf(CodeNotAvailable, dpuField+".loopback_ip", "the IPv4 loopback is already declared by another ExpectedDpu")
	case strings.Contains(name, "serial"):
		return Errf(CodeConflict, dpuField+".serial_number", "the serial number is already declared by another ExpectedMachine")
	case strings.Contains(name, "bmc_mac"):
		return Errf(CodeConflict, macField, "the BMC MAC address is already used by another ExpectedMachine")
	}
	return err
}

func marshalJSONText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// rowValues are the expected_machines columns a write sets from r.
func (r *emRecord) rowValues() map[string]any {
	return map[string]any{
		"bmc_mac_address":             r.mac,
		"bmc_username":                r.username,
		"chassis_serial_number":       r.chassis,
		"fallback_dpu_serial_numbers": marshalJSONText(r.fallback),
		"metadata_name":               r.meta.Name,
		"metadata_description":        r.meta.Description,
		"metadata_labels":             marshalJSONText(r.meta.Labels),
		"sku_id":                      r.sku,
	}
}

// dpuList is the record's DPUs as the API shows them.
func (r *emRecord) dpuList() []ExpectedDpu {
	out := make([]ExpectedDpu, 0, len(r.dpus))
	for _, d := range r.dpus {
		ed := ExpectedDpu{SerialNumber: d.serial}
		if d.v4.IsValid() {
			ed.LoopbackIP = strp(d.v4.String())
		}
		if d.v6.IsValid() {
			ed.LoopbackIPv6 = strp(d.v6.String())
		}
		out = append(out, ed)
	}
	return out
}

// insertEM stores a new ExpectedMachine from a validated record.
func (t *tx) insertEM(r *emRecord, id string) (*ExpectedMachine, error) {
	row := models.ExpectedMachine{ID: id, BmcMacAddress: r.mac, BmcUsername: r.username, ChassisSerialNumber: r.chassis,
		FallbackDpuSerialNumbers: marshalJSONText(r.fallback), MetadataName: r.meta.Name, MetadataDescription: r.meta.Description,
		MetadataLabels: marshalJSONText(r.meta.Labels), SkuID: r.sku, Version: 1, CreatedAt: t.now, UpdatedAt: t.now}
	if r.password != nil {
		row.BmcPassword = *r.password
	}
	if err := t.Create(&row).Error; err != nil {
		return nil, emConstraintError(err, r.f("expected_dpus"), r.f("bmc_mac_address"))
	}
	if err := t.writeDpus(id, r); err != nil {
		return nil, err
	}
	out := &ExpectedMachine{ID: id, Version: 1, BmcMacAddress: r.mac, BmcUsername: r.username, BmcPasswordSet: row.BmcPassword != "",
		ChassisSerialNumber: r.chassis, FallbackDpuSerialNumbers: r.fallback, Metadata: r.meta, SkuID: r.sku, ExpectedDpus: r.dpuList()}
	return out, t.audit("expected_machine.create", "expected_machine", id, nil, emAudit{ExpectedMachine: *out, BmcPasswordChanged: r.password != nil})
}

// updateEM replaces stored record cur by r (PUT semantics: kept DPUs and
// password when r leaves them out). It writes nothing and keeps the version
// when nothing changes. dpusDeleted tells that the caller already removed
// cur's DPU rows (replace-all).
func (t *tx) updateEM(cur *models.ExpectedMachine, before *ExpectedMachine, r *emRecord, dpusDeleted bool) (*ExpectedMachine, bool, error) {
	after := *before
	after.BmcMacAddress, after.BmcUsername, after.ChassisSerialNumber = r.mac, r.username, r.chassis
	after.FallbackDpuSerialNumbers, after.Metadata, after.SkuID = r.fallback, r.meta, r.sku
	newPW := cur.BmcPassword
	if r.password != nil {
		newPW = *r.password
	} else if r.clearPassword {
		newPW = ""
	}
	pwChanged := newPW != cur.BmcPassword
	after.BmcPasswordSet = newPW != ""
	if r.dpusGiven {
		after.ExpectedDpus = r.dpuList()
	}
	if !pwChanged && marshalJSONText(after) == marshalJSONText(before) {
		if dpusDeleted {
			if err := t.writeDpus(cur.ID, r); err != nil {
				return nil, false, err
			}
		}
		return before, false, nil
	}
	vals := r.rowValues()
	vals["version"] = cur.Version + 1
	vals["updated_at"] = t.now
	if pwChanged {
		vals["bmc_password"] = newPW
	}
	res := t.Model(&models.ExpectedMachine{}).Where("id = ? AND version = ?", cur.ID, cur.Version).Updates(vals)
	if res.Error != nil {
		return nil, false, emConstraintError(res.Error, r.f("expected_dpus"), r.f("bmc_mac_address"))
	}
	if res.RowsAffected != 1 {
		return nil, false, Errf(CodeStaleVersion, "", "ExpectedMachine %s changed meanwhile; read it again and retry", cur.ID)
	}
	if r.dpusGiven {
		if !dpusDeleted {
			if err := t.Where("expected_machine_id = ?", cur.ID).Delete(&models.ExpectedDpu{}).Error; err != nil {
				return nil, false, err
			}
		}
		if err := t.writeDpus(cur.ID, r); err != nil {
			return nil, false, err
		}
	}
	out := after
	out.Version = cur.Version + 1
	if err := t.audit("expected_machine.update", "expected_machine", cur.ID, emAudit{ExpectedMachine: *before},
		emAudit{ExpectedMachine: out, BmcPasswordChanged: pwChanged}); err != nil {
		return nil, false, err
	}
	return &out, true, nil
}

// CreateExpectedMachine validates and stores a new ExpectedMachine
// (POST). Absent expected_dpus means none. Problems are 422 invalid
// (malformed, outside the pool, auto-assign range, duplicate in the
// request) or 409 (BMC MAC or serial used by another record: conflict; a
// value declared, allocated or quarantined elsewhere: not_available), each
// naming its field; nothing is written then.
func (a *Allocator) CreateExpectedMachine(ctx context.Context, spec ExpectedMachineSpec) (*ExpectedMachine, error) {
	var out *ExpectedMachine
	err := a.write(ctx, func(t *tx) error {
		if err := t.prepareEM(); err != nil {
			return err
		}
		var ps problems
		r := normalize("", spec, &ps)
		if len(ps) == 0 {
			if err := t.validateRecords([]*emRecord{r}, map[string]bool{}, false, &ps); err != nil {
				return err
			}
		}
		if err := ps.first(); err != nil {
			return err
		}
		var err error
		out, err = t.insertEM(r, uuid.NewString())
		return err
	})
	return out, err
}

// ReplaceExpectedMachine is PUT: it replaces every field the spec carries
// and resets absent ones to empty, except expected_dpus and bmc_password,
// which absent keep (DESIGN.md §4, §10). ifMatch is the If-Match
// precondition (412 stale_version on mismatch). The BMC MAC may change;
// the record keeps its id.
func (a *Allocator) ReplaceExpectedMachine(ctx context.Context, idOrMAC string, spec ExpectedMachineSpec, ifMatch IfMatch) (*ExpectedMachine, error) {
	var out *ExpectedMachine
	err := a.write(ctx, func(t *tx) error {
		if err := t.prepareEM(); err != nil {
			return err
		}
		cur, err := t.lockExpectedMachine(idOrMAC)
		if err != nil {
			return err
		}
		if err := ifMatch.check("ExpectedMachine "+cur.ID, cur.Version); err != nil {
			return err
		}
		out, err = t.replaceEM(cur, spec, false)
		return err
	})
	return out, err
}

func (t *tx) replaceEM(cur *models.ExpectedMachine, spec ExpectedMachineSpec, clearPassword bool) (*ExpectedMachine, error) {
	var ps problems
	r := normalize("", spec, &ps)
	r.selfID = cur.ID
	r.clearPassword = clearPassword
	if len(ps) == 0 {
		if err := t.validateRecords([]*emRecord{r}, map[string]bool{cur.ID: r.dpusGiven}, false, &ps); err != nil {
			return nil, err
		}
	}
	if err := ps.first(); err != nil {
		return nil, err
	}
	before, err := expectedMachineOut(t.DB, cur)
	if err != nil {
		return nil, err
	}
	out, _, err := t.updateEM(cur, before, r, false)
	return out, err
}

// mergePatch applies an RFC 7396 JSON merge patch to target.
func mergePatch(target any, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	tm, ok := target.(map[string]any)
	if !ok {
		tm = map[string]any{}
	}
	for k, v := range pm {
		if v == nil {
			delete(tm, k)
		} else {
			tm[k] = mergePatch(tm[k], v)
		}
	}
	return tm
}

// PatchExpectedMachine is PATCH with JSON merge patch semantics (RFC 7396):
// members absent from patch keep their value, null removes (resets) a
// member, objects (metadata) merge, arrays replace. "expected_dpus": null
// clears the reservations like []; "bmc_password": null clears the
// password, a non-empty string sets it, absent or "" keeps it. A patch
// that is not a JSON object is 400 bad_request.
func (a *Allocator) PatchExpectedMachine(ctx context.Context, idOrMAC string, patch []byte, ifMatch IfMatch) (*ExpectedMachine, error) {
	var p map[string]any
	if err := json.Unmarshal(patch, &p); err != nil || p == nil {
		return nil, Errf(CodeBadRequest, "", "a merge patch must be a JSON object: %v", errOr(err, "got null"))
	}
	var out *ExpectedMachine
	err := a.write(ctx, func(t *tx) error {
		if err := t.prepareEM(); err != nil {
			return err
		}
		cur, err := t.lockExpectedMachine(idOrMAC)
		if err != nil {
			return err
		}
		if err := ifMatch.check("ExpectedMachine "+cur.ID, cur.Version); err != nil {
			return err
		}
		cur0, err := expectedMachineOut(t.DB, cur)
		if err != nil {
			return err
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(marshalJSONText(cur0)), &doc); err != nil {
			return err
		}
		for _, k := range []string{"id", "version", "bmc_password_set"} {
			delete(doc, k)
			delete(p, k)
		}
		pw, pwGiven := p["bmc_password"]
		delete(p, "bmc_password")
		merged := mergePatch(doc, p).(map[string]any)
		if v, ok := p["expected_dpus"]; !ok {
			// Untouched reservations are kept as they are, not validated
			// again: a patch of the name never fails on a reservation.
			delete(merged, "expected_dpus")
		} else if v == nil {
			merged["expected_dpus"] = []any{} // "expected_dpus": null clears
		}
		spec, err := decodeSpec([]byte(marshalJSONText(merged)), "")
		if err != nil {
			return err
		}
		clearPW := false
		if pwGiven {
			switch v := pw.(type) {
			case nil:
				clearPW = true
			case string:
				spec.BmcPassword = &v
			default:
				return Errf(CodeInvalid, "bmc_password", "bmc_password must be a JSON string or null")
			}
		}
		out, err = t.replaceEM(cur, spec, clearPW)
		return err
	})
	return out, err
}

func errOr(err error, s string) string {
	if err != nil {
		return err.Error()
	}
	return s
}

// DeleteExpectedMachine removes an ExpectedMachine and its ExpectedDpu
// reservations (the reserved values become ordinary free values of their
// explicit ranges; active DPUs keep their values, DESIGN.md §4).
func (a *Allocator) DeleteExpectedMachine(ctx context.Context, idOrMAC string, ifMatch IfMatch) error {
	return a.write(ctx, func(t *tx) error {
		if err := t.prepareEM(); err != nil {
			return err
		}
		cur, err := t.lockExpectedMachine(idOrMAC)
		if err != nil {
			return err
		}
		if err := ifMatch.check("ExpectedMachine "+cur.ID, cur.Version); err != nil {
			return err
		}
		return t.deleteEM(cur)
	})
}

func (t *tx) deleteEM(cur *models.ExpectedMachine) error {
	before, err := expectedMachineOut(t.DB, cur)
	if err != nil {
		return err
	}
	if err := t.Where("expected_machine_id = ?", cur.ID).Delete(&models.ExpectedDpu{}).Error; err != nil {
		return err
	}
	res := t.Where("id = ? AND version = ?", cur.ID, cur.Version).Delete(&models.ExpectedMachine{})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected != 1 {
		return Errf(CodeStaleVersion, "", "ExpectedMachine %s changed meanwhile; read it again and retry", cur.ID)
	}
	return t.audit("expected_machine.delete", "expected_machine", cur.ID, emAudit{ExpectedMachine: *before}, nil)
}

// ReplaceAllExpectedMachines makes the stored ExpectedMachines exactly the
// given list (PUT /api/v1/expected-machines, the NICo file), atomically:
// every record is validated first, against the final state (two records
// may swap reservations), and one bad record changes nothing; the error's
// field names the record (expected_machines[3].expected_dpus[0].loopback_ip).
// A record whose BMC MAC is stored keeps its id (and, when it leaves them
// out, its expected_dpus and password); stored records absent from the
// list are deleted. It returns the records in list order.
func (a *Allocator) ReplaceAllExpectedMachines(ctx context.Context, specs []ExpectedMachineSpec) ([]ExpectedMachine, error) {
	var out []ExpectedMachine
	err := a.write(ctx, func(t *tx) error {
		if err := t.prepareEM(); err != nil {
			return err
		}
		var stored []models.ExpectedMachine
		q := t.DB
		if t.a.dialect == models.Postgres {
			q = q.Clauses(clause.Locking{Strength: "UPDATE"})
		}
		if err := q.Order("bmc_mac_address").Find(&stored).Error; err != nil {
			return err
		}
		byMAC := map[string]*models.ExpectedMachine{}
		for i := range stored {
			byMAC[stored[i].BmcMacAddress] = &stored[i]
		}
		var ps problems
		recs := make([]*emRecord, len(specs))
		for i, s := range specs {
			recs[i] = normalize(fmt.Sprintf("expected_machines[%d]", i), s, &ps)
		}
		var storedDpus map[string][]models.ExpectedDpu // loaded when a record keeps its list
		replaced := map[string]bool{}
		for _, st := range stored {
			replaced[st.ID] = true
		}
		for _, r := range recs {
			cur := byMAC[r.mac]
			if cur == nil {
				continue
			}
			r.selfID = cur.ID
			if !r.dpusGiven {
				if storedDpus == nil {
					storedDpus = map[string][]models.ExpectedDpu{}
					var all []models.ExpectedDpu
					if err := t.Order("expected_machine_id, position").Find(&all).Error; err != nil {
						return err
					}
					for _, d := range all {
						storedDpus[d.ExpectedMachineID] = append(storedDpus[d.ExpectedMachineID], d)
					}
				}
				for _, k := range storedDpus[cur.ID] {
					d := emDpu{field: r.f("expected_dpus"), serial: k.SerialNumber, kept: true}
					if k.LoopbackIP != nil {
						d.v4, _ = netip.ParseAddr(*k.LoopbackIP)
					}
					if k.LoopbackIPv6 != nil {
						d.v6, _ = netip.ParseAddr(*k.LoopbackIPv6)
					}
					r.dpus = append(r.dpus, d)
				}
			}
		}
		if len(ps) == 0 {
			if err := t.validateRecords(recs, replaced, true, &ps); err != nil {
				return err
			}
		}
		if err := ps.first(); err != nil {
			return err
		}
		// Write: remove records absent from the list, then the DPU rows of
		// every record that gives its list (so values may move between
		// records), then upsert each record.
		inFile := map[string]bool{}
		for _, r := range recs {
			inFile[r.mac] = true
		}
		deleted := 0
		for i := range stored {
			if !inFile[stored[i].BmcMacAddress] {
				if err := t.deleteEM(&stored[i]); err != nil {
					return err
				}
				deleted++
			}
		}
		var kept []models.ExpectedMachine
		var rewrite []string
		for _, r := range recs {
			if cur := byMAC[r.mac]; cur != nil {
				kept = append(kept, *cur)
				if r.dpusGiven {
					rewrite = append(rewrite, cur.ID)
				}
			}
		}
		outs, err := expectedMachinesOut(t.DB, kept)
		if err != nil {
			return err
		}
		befores := map[string]*ExpectedMachine{}
		for i := range outs {
			befores[outs[i].ID] = &outs[i]
		}
		for start := 0; start < len(rewrite); start += 500 {
			if err := t.Where("expected_machine_id IN ?", rewrite[start:min(start+500, len(rewrite))]).Delete(&models.ExpectedDpu{}).Error; err != nil {
				return err
			}
		}
		created, updated := 0, 0
		out = make([]ExpectedMachine, 0, len(recs))
		for _, r := range recs {
			if cur := byMAC[r.mac]; cur != nil {
				if !r.dpusGiven {
					r.dpus = nil // kept rows stay where they are
				}
				em, changed, err := t.updateEM(cur, befores[cur.ID], r, r.dpusGiven)
				if err != nil {
					return err
				}
				if changed {
					updated++
				}
				out = append(out, *em)
				continue
			}
			em, err := t.insertEM(r, uuid.NewString())
			if err != nil {
				return err
			}
			created++
			out = append(out, *em)
		}
		return t.audit("expected_machine.replace_all", "expected_machine", "*", nil, map[string]int{
			"records": len(recs), "created": created, "updated": updated, "deleted": deleted, "unchanged": len(recs) - created - updated})
	})
	return out, err
}
