package allocator

import (
	"fmt"
	"net/netip"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/ident"
	"github.com/ipledger/ipledger/strictjson"
)

// emDPU is one validated expected DPU.
type emDPU struct {
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
	dpus      []emDPU
	dpusGiven bool // false keeps the stored list
	// clearPassword removes the stored password (PATCH "bmc_password": null).
	clearPassword bool
}

func (r *emRecord) f(field string) string { return strictjson.JoinField(r.prefix, field) }

// problems collects validation errors in field order.
type problems []*fault.Error

func (p *problems) add(e *fault.Error) { *p = append(*p, e) }

func (p problems) first() error {
	if len(p) == 0 {
		return nil
	}
	return p[0]
}

// normalize checks and normalizes the fields of one record that need no
// database (docs/reservations.md rules 1 and 2, MAC, metadata). It never fails
// fast: every problem is collected.
func normalize(prefix string, s ExpectedMachineSpec, ps *problems) *emRecord {
	r := &emRecord{prefix: prefix}
	mac, err := NormalizeMAC(s.BmcMacAddress, r.f("bmc_mac_address"))
	if err != nil {
		e, _ := fault.AsError(err)
		ps.add(e)
	}
	r.mac = mac
	text := func(field, v string, max int) string {
		if len(v) > max {
			ps.add(fault.Errf(fault.CodeInvalid, r.f(field), "%s is %d bytes long; at most %d", field, len(v), max))
		}
		return v
	}
	// visible refuses what an operator could not see (ident.Invisible).
	visible := func(field, v string, newlines bool) {
		if c, bad := ident.Invisible(v, newlines); bad {
			ps.add(invisibleError(r.f(field), v, c))
		}
	}
	r.username = text("bmc_username", s.BmcUsername, emMaxText)
	visible("bmc_username", r.username, false)
	if s.BmcPassword != nil && *s.BmcPassword != "" {
		pw := text("bmc_password", *s.BmcPassword, emMaxText)
		// PostgreSQL text cannot hold a NUL, SQLite's can: refused on both
		// alike, and the message never repeats the password.
		if i := strings.IndexFunc(pw, unicode.IsControl); i >= 0 {
			c, _ := utf8.DecodeRuneInString(pw[i:])
			ps.add(fault.Errf(fault.CodeInvalid, r.f("bmc_password"), "bmc_password holds the control character U+%04X at byte %d; want no control characters", c, i))
		}
		r.password = &pw
	}
	r.chassis = text("chassis_serial_number", strings.TrimSpace(s.ChassisSerialNumber), emMaxText)
	visible("chassis_serial_number", r.chassis, false)
	// fallback_dpu_serial_numbers keeps its NICo meaning and behaviour
	// unchanged (docs/reservations.md rule 4): stored as given.
	r.fallback = append([]string{}, s.FallbackDPUSerialNumbers...)
	r.meta = Metadata{Labels: []Label{}}
	if s.Metadata != nil {
		r.meta.Name = text("metadata.name", s.Metadata.Name, emMaxText)
		visible("metadata.name", r.meta.Name, false)
		r.meta.Description = text("metadata.description", s.Metadata.Description, emMaxDescription)
		visible("metadata.description", r.meta.Description, true)
		if len(s.Metadata.Labels) > emMaxLabels {
			ps.add(fault.Errf(fault.CodeInvalid, r.f("metadata.labels"), "at most %d labels, got %d", emMaxLabels, len(s.Metadata.Labels)))
		}
		seen := map[string]int{}
		for i, l := range s.Metadata.Labels {
			f := fmt.Sprintf("metadata.labels[%d]", i)
			k := strings.TrimSpace(l.Key)
			if k == "" {
				ps.add(fault.Errf(fault.CodeInvalid, r.f(f+".key"), "a label needs a non-empty key"))
			} else if j, dup := seen[k]; dup {
				ps.add(fault.Errf(fault.CodeInvalid, r.f(f+".key"), "label key %q is already used by metadata.labels[%d]", k, j))
			} else {
				seen[k] = i
			}
			text(f+".key", k, emMaxText)
			text(f+".value", l.Value, emMaxText)
			visible(f+".key", k, false)
			visible(f+".value", l.Value, false)
			r.meta.Labels = append(r.meta.Labels, Label{Key: k, Value: l.Value})
		}
	}
	if s.SkuID != nil {
		if v := strings.TrimSpace(*s.SkuID); v != "" {
			text("sku_id", v, emMaxText)
			visible("sku_id", v, false)
			r.sku = &v
		}
	}
	if s.ExpectedDPUs == nil {
		return r
	}
	r.dpusGiven = true
	list := *s.ExpectedDPUs
	if len(list) > emMaxDPUs {
		ps.add(fault.Errf(fault.CodeInvalid, r.f("expected_dpus"), "at most %d expected DPUs per machine, got %d", emMaxDPUs, len(list)))
	}
	serials, seen := map[string]int{}, [2]map[netip.Addr]int{{}, {}}
	for i, in := range list {
		d := emDPU{field: r.f(fmt.Sprintf("expected_dpus[%d]", i))}
		d.serial = strings.TrimSpace(in.SerialNumber)
		switch {
		case d.serial == "":
			ps.add(fault.Errf(fault.CodeInvalid, d.field+".serial_number", "serial_number is required"))
		case !ident.ValidSerial(d.serial):
			ps.add(fault.Errf(fault.CodeInvalid, d.field+".serial_number", "serial_number %q must be %s", in.SerialNumber, ident.SerialRule))
			d.serial = "" // left out of the collision checks
		default:
			// A serial is one DPU in any case (serialKey).
			if j, dup := serials[serialKey(d.serial)]; dup {
				ps.add(fault.Errf(fault.CodeInvalid, d.field+".serial_number", "serial_number %s is already used by expected_dpus[%d] of this machine", d.serial, j))
			} else {
				serials[serialKey(d.serial)] = i
			}
		}
		for j, raw := range []*string{in.LoopbackIP, in.LoopbackIPv6} {
			f := loopbackFamilies[j]
			*d.addr(f) = reservation(f, raw, d.field+"."+f.column, i, seen[j], ps)
		}
		r.dpus = append(r.dpus, d)
	}
	return r
}

// addr is the reservation of family f of the DPU (invalid when none).
func (d *emDPU) addr(f loopbackFamily) *netip.Addr {
	if f.name == FamilyIPv4 {
		return &d.v4
	}
	return &d.v6
}

// reservation checks one family's reservation of DPU i of a record
// (docs/reservations.md rule 2): an address of that family, not given to
// another DPU of the same record (seen). It returns the address, or an
// invalid one when raw is empty or refused (the problem is in ps).
func reservation(f loopbackFamily, raw *string, field string, i int, seen map[netip.Addr]int, ps *problems) netip.Addr {
	if raw == nil || strings.TrimSpace(*raw) == "" {
		return netip.Addr{}
	}
	a, err := parseAddr(strings.TrimSpace(*raw))
	switch {
	case err != nil:
		ps.add(fault.Errf(fault.CodeInvalid, field, "%v", err))
	case !f.holds(a):
		o := f.other()
		ps.add(fault.Errf(fault.CodeInvalid, field, "%q is not an %s address; an %s reservation goes in %s", *raw, f.label, o.label, o.column))
	default:
		if j, dup := seen[a]; dup {
			ps.add(fault.Errf(fault.CodeInvalid, field, "%s is already reserved by expected_dpus[%d] of this machine", a, j))
			return netip.Addr{}
		}
		seen[a] = i
		return a
	}
	return netip.Addr{}
}

// invisibleError is the 422 of a text breaking the visible-text rule
// (ident.Invisible): a host is shown by its name and a force delete is
// confirmed by typing it, so a bidirectional override or a zero-width
// space would make one host's name read as another's.
func invisibleError(field, v string, c rune) *fault.Error {
	return fault.Errf(fault.CodeInvalid, field, "%s %q holds the invisible or control character U+%04X; want %s", field, v, c, ident.VisibleRule)
}
