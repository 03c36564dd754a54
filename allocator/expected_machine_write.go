package allocator

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ipledger/ipledger/apijson"
	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/strictjson"
	"github.com/ipledger/ipledger/txn"
)

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

// writeDPUs inserts the DPU rows of r for machine id, mapping a unique
// violation (a racing writer on a database without the loopback pools to
// lock) to 409 with the field.
func (t *tx) writeDPUs(id string, r *emRecord) error {
	rows := make([]models.ExpectedDPU, 0, len(r.dpus))
	for i, d := range r.dpus {
		row := models.ExpectedDPU{ExpectedMachineID: id, Position: i, SerialNumber: d.serial}
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
// expected_dpus to the 409 of docs/api.md naming the field.
func emConstraintError(err error, dpuField, macField string) error {
	if !database.IsUniqueViolation(err) {
		return err
	}
	name := err.Error()
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		name = pg.ConstraintName + " " + pg.ColumnName
	}
	switch {
	case strings.Contains(name, "loopback_ip_v6") || strings.Contains(name, "v6_key"):
		return fault.Errf(fault.CodeNotAvailable, dpuField+".loopback_ip_v6", "the IPv6 loopback is already declared by another ExpectedDpu")
	case strings.Contains(name, "loopback_ip") || strings.Contains(name, "v4_key"):
		return fault.Errf(fault.CodeNotAvailable, dpuField+".loopback_ip", "the IPv4 loopback is already declared by another ExpectedDpu")
	case strings.Contains(name, "serial"):
		return fault.Errf(fault.CodeConflict, dpuField+".serial_number", "the serial number is already declared by another ExpectedMachine")
	case strings.Contains(name, "bmc_mac"):
		return fault.Errf(fault.CodeConflict, macField, "the BMC MAC address is already used by another ExpectedMachine")
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
func (r *emRecord) dpuList() []ExpectedDPU {
	out := make([]ExpectedDPU, 0, len(r.dpus))
	for _, d := range r.dpus {
		ed := ExpectedDPU{SerialNumber: d.serial}
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
		FallbackDPUSerialNumbers: marshalJSONText(r.fallback), MetadataName: r.meta.Name, MetadataDescription: r.meta.Description,
		MetadataLabels: marshalJSONText(r.meta.Labels), SkuID: r.sku, Version: 1, CreatedAt: t.now, UpdatedAt: t.now}
	if r.password != nil {
		row.BmcPassword = *r.password
	}
	if err := t.Create(&row).Error; err != nil {
		return nil, emConstraintError(err, r.f("expected_dpus"), r.f("bmc_mac_address"))
	}
	if err := t.writeDPUs(id, r); err != nil {
		return nil, err
	}
	out := &ExpectedMachine{ID: id, Version: 1, BmcMacAddress: r.mac, BmcUsername: r.username, BmcPasswordSet: row.BmcPassword != "",
		ChassisSerialNumber: r.chassis, FallbackDPUSerialNumbers: r.fallback, Metadata: r.meta, SkuID: r.sku, ExpectedDPUs: r.dpuList()}
	return out, t.audit("expected_machine.create", "expected_machine", id, nil, emAudit{ExpectedMachine: *out, BmcPasswordChanged: r.password != nil})
}

// updateEM replaces stored record cur by r (PUT semantics: kept DPUs and
// password when r leaves them out). It writes nothing and keeps the version
// when nothing changes. dpusDeleted tells that the caller already removed
// cur's DPU rows (replace-all).
func (t *tx) updateEM(cur *models.ExpectedMachine, before *ExpectedMachine, r *emRecord, dpusDeleted bool) (*ExpectedMachine, bool, error) {
	u := planUpdateEM(cur, before, r)
	newPW, pwChanged, after := u.password, u.pwChanged, u.after
	if !u.changed {
		if dpusDeleted {
			if err := t.writeDPUs(cur.ID, r); err != nil {
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
		return nil, false, fault.Errf(fault.CodeStaleVersion, "", "ExpectedMachine %s changed meanwhile; read it again and retry", emLabelOf(cur))
	}
	if r.dpusGiven {
		if !dpusDeleted {
			if err := t.Where("expected_machine_id = ?", cur.ID).Delete(&models.ExpectedDPU{}).Error; err != nil {
				return nil, false, err
			}
		}
		if err := t.writeDPUs(cur.ID, r); err != nil {
			return nil, false, err
		}
	}
	out := after
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
// which absent keep (docs/reservations.md, docs/api.md). ifMatch is the If-Match
// precondition (412 stale_version on mismatch). The BMC MAC may change;
// the record keeps its id.
func (a *Allocator) ReplaceExpectedMachine(ctx context.Context, idOrMAC string, spec ExpectedMachineSpec, ifMatch txn.IfMatch) (*ExpectedMachine, error) {
	var out *ExpectedMachine
	err := a.write(ctx, func(t *tx) error {
		cur, err := t.lockEMForEdit(idOrMAC, ifMatch)
		if err != nil {
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
func (a *Allocator) PatchExpectedMachine(ctx context.Context, idOrMAC string, patch []byte, ifMatch txn.IfMatch) (*ExpectedMachine, error) {
	patch = strictjson.TrimBOM(patch)
	if err := apijson.Check(patch, apijson.Options{}); err != nil {
		return nil, err
	}
	var p map[string]any
	if err := json.Unmarshal(patch, &p); err != nil || p == nil {
		return nil, fault.Errf(fault.CodeBadRequest, "", "a merge patch must be a JSON object: %v", errOr(err, "got null"))
	}
	var out *ExpectedMachine
	err := a.write(ctx, func(t *tx) error {
		cur, err := t.lockEMForEdit(idOrMAC, ifMatch)
		if err != nil {
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
		if err := caseVariantMember(doc, p, ""); err != nil {
			return err
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
		var spec ExpectedMachineSpec
		if err := decodeSpec([]byte(marshalJSONText(merged)), "", &spec); err != nil {
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
				return fault.Errf(fault.CodeInvalid, "bmc_password", "bmc_password must be a JSON string or null")
			}
		}
		out, err = t.replaceEM(cur, spec, clearPW)
		return err
	})
	return out, err
}

// caseVariantMember refuses a patch member whose name differs from a
// member of the stored record only in case ("Metadata"): names match only
// in exact case, so it would merge in as an unknown member and the patch
// would silently change nothing.
func caseVariantMember(doc, patch map[string]any, path string) error {
	for k, v := range patch {
		if _, ok := doc[k]; ok {
			if dm, ok := doc[k].(map[string]any); ok {
				if pm, ok := v.(map[string]any); ok {
					if err := caseVariantMember(dm, pm, strictjson.JoinField(path, k)); err != nil {
						return err
					}
				}
			}
			continue
		}
		if k == "bmc_password" {
			continue
		}
		names := []string{"bmc_password"}
		if path != "" {
			names = nil
		}
		for dk := range doc {
			names = append(names, dk)
		}
		for _, dk := range names {
			if strings.EqualFold(dk, k) {
				f := strictjson.JoinField(path, k)
				return fault.Errf(fault.CodeInvalid, f, "%s: member %q differs from %q only in case (names match only in exact case); nothing was changed", f, k, dk)
			}
		}
	}
	return nil
}

func errOr(err error, s string) string {
	if err != nil {
		return err.Error()
	}
	return s
}

// DeleteExpectedMachine removes an ExpectedMachine and its ExpectedDpu
// reservations (the reserved values become ordinary free values of their
// explicit ranges; active DPUs keep their values, docs/reservations.md).
func (a *Allocator) DeleteExpectedMachine(ctx context.Context, idOrMAC string, ifMatch txn.IfMatch) error {
	return a.write(ctx, func(t *tx) error {
		cur, err := t.lockEMForEdit(idOrMAC, ifMatch)
		if err != nil {
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
	if err := t.Where("expected_machine_id = ?", cur.ID).Delete(&models.ExpectedDPU{}).Error; err != nil {
		return err
	}
	res := t.Where("id = ? AND version = ?", cur.ID, cur.Version).Delete(&models.ExpectedMachine{})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected != 1 {
		return fault.Errf(fault.CodeStaleVersion, "", "ExpectedMachine %s changed meanwhile; read it again and retry", emLabelOf(cur))
	}
	return t.audit("expected_machine.delete", "expected_machine", cur.ID, emAudit{ExpectedMachine: *before}, nil)
}

// lockEMForEdit prepares an ExpectedMachine write and locks the record,
// checking the If-Match precondition (412 stale_version on mismatch).
func (t *tx) lockEMForEdit(idOrMAC string, ifMatch txn.IfMatch) (*models.ExpectedMachine, error) {
	if err := t.prepareEM(); err != nil {
		return nil, err
	}
	cur, err := t.lockExpectedMachine(idOrMAC)
	if err != nil {
		return nil, err
	}
	if err := ifMatch.Check("ExpectedMachine "+emLabelOf(cur), cur.Version); err != nil {
		return nil, err
	}
	return cur, nil
}
