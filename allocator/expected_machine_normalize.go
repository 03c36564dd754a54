package allocator

import (
	"fmt"
	"net/netip"
	"strings"
)

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
// database (docs/reservations.md rules 1 and 2, MAC, metadata). It never fails
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
	// unchanged (docs/reservations.md rule 4): stored as given.
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
			d.serial = "" // left out of the collision checks
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
