package allocator

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/google/uuid"
	"gorm.io/gorm/clause"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/txn"
)

// ImportMode says what an import of a NICo expected-machines file does
// with the stored records.
type ImportMode string

const (
	// ImportMerge updates each record whose BMC MAC is stored (PUT
	// semantics, the record keeps its id) and creates the others; stored
	// records absent from the file stay as they are.
	ImportMerge ImportMode = "merge"
	// ImportReplace makes the stored records exactly the file
	// (ReplaceAllExpectedMachines).
	ImportReplace ImportMode = "replace"
)

// ParseImportMode reads an import mode; "" is merge.
func ParseImportMode(s string) (ImportMode, error) {
	switch m := ImportMode(strings.TrimSpace(s)); m {
	case "":
		return ImportMerge, nil
	case ImportMerge, ImportReplace:
		return m, nil
	}
	return "", fault.Errf(fault.CodeInvalid, "mode", "unknown import mode %q: want merge or replace", s)
}

// Outcomes of one record of an import.
const (
	ImportCreated   = "created"
	ImportUpdated   = "updated"
	ImportUnchanged = "unchanged"
	ImportReplaced  = "replaced" // part of the new list (replace mode)
	ImportFailed    = "failed"
	ImportSkipped   = "not written" // a valid record of a refused import
)

// ImportRecord is what an import did with one record of the file.
type ImportRecord struct {
	Index         int    `json:"index"`
	BmcMacAddress string `json:"bmc_mac_address"`
	Outcome       string `json:"outcome"`
	ID            string `json:"id,omitempty"`
	// Problems are every problem of a failed record, fields prefixed with
	// expected_machines[i].
	Problems []*fault.Error `json:"problems,omitempty"`
}

// ImportResult is the outcome of an import. Created, Updated and
// Unchanged count merge outcomes; a replace reports every record as
// replaced.
type ImportResult struct {
	Mode      ImportMode        `json:"mode"`
	Created   int               `json:"created"`
	Updated   int               `json:"updated"`
	Unchanged int               `json:"unchanged"`
	Items     []ExpectedMachine `json:"items"`
	Records   []ImportRecord    `json:"-"`
}

// Failed counts the records that failed.
func (r *ImportResult) Failed() int {
	n := 0
	for _, rec := range r.Records {
		if rec.Outcome == ImportFailed {
			n++
		}
	}
	return n
}

// ImportExpectedMachines writes a list of ExpectedMachines atomically: in
// one transaction, all records or none. Every record is validated against
// the state the import leaves (two records may swap reservations); when
// any record is refused nothing is written, the result lists every
// problem of every record (Records), and the error is the first of them.
func (a *Allocator) ImportExpectedMachines(ctx context.Context, specs []ExpectedMachineSpec, mode ImportMode) (*ImportResult, error) {
	return a.importExpectedMachines(ctx, specs, make([]error, len(specs)), mode)
}

// ImportExpectedMachinesFile decodes a NICo expected-machines file record
// by record and imports it (ImportExpectedMachines): a record that does
// not decode is one more failed record. A file that is not
// {"expected_machines": [...]} is an error of its own (no result).
func (a *Allocator) ImportExpectedMachinesFile(ctx context.Context, data []byte, mode ImportMode) (*ImportResult, error) {
	specs, bad, err := ParseExpectedMachinesFileRecords(data)
	if err != nil {
		return nil, err
	}
	return a.importExpectedMachines(ctx, specs, bad, mode)
}

func (a *Allocator) importExpectedMachines(ctx context.Context, specs []ExpectedMachineSpec, bad []error, mode ImportMode) (*ImportResult, error) {
	if _, err := ParseImportMode(string(mode)); err != nil {
		return nil, err
	}
	for _, err := range bad {
		if err != nil {
			if _, ok := fault.AsError(err); !ok {
				return nil, err
			}
		}
	}
	if mode == ImportReplace {
		return a.importReplace(ctx, specs, bad)
	}
	var res *ImportResult
	err := a.write(ctx, func(t *tx) error {
		var err error
		res, err = t.importMerge(specs, bad)
		return err
	})
	return res, err
}

// refused builds the result of a refused import from every problem (in
// validation order: malformed before colliding) and returns it with the
// first problem.
func refused(mode ImportMode, specs []ExpectedMachineSpec, ps []*fault.Error) (*ImportResult, error) {
	res := &ImportResult{Mode: mode, Records: make([]ImportRecord, len(specs))}
	for i, s := range specs {
		res.Records[i] = ImportRecord{Index: i, BmcMacAddress: s.BmcMacAddress, Outcome: ImportSkipped}
	}
	for _, p := range ps {
		if i, ok := importIndex(p.Field); ok && i < len(specs) {
			res.Records[i].Outcome = ImportFailed
			res.Records[i].Problems = append(res.Records[i].Problems, p)
		}
	}
	return res, ps[0]
}

// importIndex reads i from "expected_machines[i]...".
func importIndex(field string) (int, bool) {
	var i int
	if _, err := fmt.Sscanf(field, "expected_machines[%d]", &i); err != nil {
		return 0, false
	}
	return i, true
}

// importMerge is the merge of one transaction: validate every record,
// then write each one with the functions of the single-record writes.
func (t *tx) importMerge(specs []ExpectedMachineSpec, bad []error) (*ImportResult, error) {
	if err := t.prepareEM(); err != nil {
		return nil, err
	}
	var ps problems
	recs := make([]*emRecord, 0, len(specs))
	at := make([]int, 0, len(specs)) // recs[j] is record at[j] of the file
	for i, s := range specs {
		if e, ok := fault.AsError(bad[i]); ok {
			ps.add(e)
			continue
		}
		recs = append(recs, normalize(fmt.Sprintf("expected_machines[%d]", i), s, &ps))
		at = append(at, i)
	}
	stored, err := t.storedByMAC(recs)
	if err != nil {
		return nil, err
	}
	replaced := map[string]bool{}
	for _, r := range recs {
		if cur := stored[r.mac]; cur != nil && r.mac != "" {
			r.selfID = cur.ID
			replaced[cur.ID] = r.dpusGiven
		}
	}
	t.everyProblem = true
	err = t.validateRecords(recs, replaced, false, &ps)
	t.everyProblem = false
	if err != nil {
		return nil, err
	}
	if len(ps) > 0 {
		return refused(ImportMerge, specs, ps)
	}

	// Write: first the DPU rows of every stored record that gives its
	// list (so that values and serials may move between records), then
	// each record.
	var kept []models.ExpectedMachine
	var rewrite []string
	for _, r := range recs {
		if cur := stored[r.mac]; cur != nil {
			kept = append(kept, *cur)
			if r.dpusGiven {
				rewrite = append(rewrite, cur.ID)
			}
		}
	}
	outs, err := expectedMachinesOut(t.DB, kept)
	if err != nil {
		return nil, err
	}
	befores := map[string]*ExpectedMachine{}
	for i := range outs {
		befores[outs[i].ID] = &outs[i]
	}
	for start := 0; start < len(rewrite); start += 500 {
		if err := t.Where("expected_machine_id IN ?", rewrite[start:min(start+500, len(rewrite))]).Delete(&models.ExpectedDPU{}).Error; err != nil {
			return nil, err
		}
	}
	res := &ImportResult{Mode: ImportMerge, Items: make([]ExpectedMachine, 0, len(recs)), Records: make([]ImportRecord, 0, len(recs))}
	for j, r := range recs {
		rec := ImportRecord{Index: at[j], BmcMacAddress: r.mac}
		var em *ExpectedMachine
		if cur := stored[r.mac]; cur != nil {
			var changed bool
			em, changed, err = t.updateEM(cur, befores[cur.ID], r, r.dpusGiven)
			if err != nil {
				return nil, err
			}
			rec.Outcome = ImportUnchanged
			if changed {
				rec.Outcome = ImportUpdated
				res.Updated++
			} else {
				res.Unchanged++
			}
		} else {
			em, err = t.insertEM(r, uuid.NewString())
			if err != nil {
				return nil, err
			}
			rec.Outcome = ImportCreated
			res.Created++
		}
		rec.ID = em.ID
		res.Items = append(res.Items, *em)
		res.Records = append(res.Records, rec)
	}
	return res, t.audit("expected_machine.import", "expected_machine", "*", nil, map[string]any{
		"mode": ImportMerge, "records": len(recs), "created": res.Created, "updated": res.Updated, "unchanged": res.Unchanged})
}

// storedByMAC reads (on PostgreSQL: locks) the stored records whose BMC
// MAC one of recs carries.
func (t *tx) storedByMAC(recs []*emRecord) (map[string]*models.ExpectedMachine, error) {
	var macs []string
	for _, r := range recs {
		if r.mac != "" {
			macs = append(macs, r.mac)
		}
	}
	out := map[string]*models.ExpectedMachine{}
	for start := 0; start < len(macs); start += 500 {
		var rows []models.ExpectedMachine
		q := t.Where("bmc_mac_address IN ?", macs[start:min(start+500, len(macs))])
		if t.a.dialect == models.Postgres {
			q = q.Clauses(clause.Locking{Strength: "UPDATE"})
		}
		if err := q.Find(&rows).Error; err != nil {
			return nil, err
		}
		for i := range rows {
			out[rows[i].BmcMacAddress] = &rows[i]
		}
	}
	return out, nil
}

// importReplace is ReplaceAllExpectedMachines (one transaction). When it
// is refused, or a record does not decode, every problem of every record
// is listed: importReplaceProblems validates the list as replace-all does,
// reading only, and the problem replace-all named is added when it found
// another.
func (a *Allocator) importReplace(ctx context.Context, specs []ExpectedMachineSpec, bad []error) (*ImportResult, error) {
	var cause error
	decoded := true
	for _, err := range bad {
		decoded = decoded && err == nil
	}
	if decoded {
		items, err := a.ReplaceAllExpectedMachines(ctx, specs)
		if err == nil {
			res := &ImportResult{Mode: ImportReplace, Items: items, Records: make([]ImportRecord, len(items))}
			for i, em := range items {
				res.Records[i] = ImportRecord{Index: i, BmcMacAddress: em.BmcMacAddress, Outcome: ImportReplaced, ID: em.ID}
			}
			return res, nil
		}
		e, ok := fault.AsError(err)
		if !ok || e.Code == fault.CodeInternal || e.Code == fault.CodeUnavailable {
			return nil, err
		}
		cause = e
	}
	ps, err := a.importReplaceProblems(ctx, specs, bad)
	if err != nil {
		return nil, err
	}
	if c, ok := fault.AsError(cause); ok && cause != nil {
		found := false
		for _, p := range ps {
			found = found || (p.Field == c.Field && p.Message == c.Message)
		}
		if !found {
			ps = append(ps, c)
		}
	}
	if len(ps) == 0 {
		// Replace-all refused the list for a reason that names no record
		// and that validation alone does not see (a race): say so.
		return &ImportResult{Mode: ImportReplace}, cause
	}
	res, first := refused(ImportReplace, specs, ps)
	if cause != nil {
		first = cause
	}
	return res, first
}

// importReplaceProblems validates specs as replace-all does (against the
// final state: stored records absent from the list go, a record that
// leaves expected_dpus out keeps its stored DPUs) and returns every
// problem. It writes nothing.
func (a *Allocator) importReplaceProblems(ctx context.Context, specs []ExpectedMachineSpec, bad []error) ([]*fault.Error, error) {
	var ps problems
	t := &tx{DB: a.db.WithContext(ctx), a: a, ctx: ctx, now: a.now(), locked: map[string]*models.Pool{}, everyProblem: true}
	var recs []*emRecord
	for i, s := range specs {
		if e, ok := fault.AsError(bad[i]); ok {
			ps.add(e)
			continue
		}
		recs = append(recs, normalize(fmt.Sprintf("expected_machines[%d]", i), s, &ps))
	}
	stored, err := t.storedByMAC(recs)
	if err != nil {
		return nil, txn.MapDBError(err)
	}
	replaced := map[string]bool{}
	var ids []string
	for _, r := range recs {
		if cur := stored[r.mac]; cur != nil && r.mac != "" {
			r.selfID = cur.ID
			if !r.dpusGiven {
				ids = append(ids, cur.ID)
			}
		}
	}
	var all []models.ExpectedMachine
	if err := t.Select("id").Find(&all).Error; err != nil {
		return nil, txn.MapDBError(err)
	}
	for _, st := range all {
		replaced[st.ID] = true
	}
	keptRows := map[string][]models.ExpectedDPU{}
	for start := 0; start < len(ids); start += 500 {
		var rows []models.ExpectedDPU
		if err := t.Where("expected_machine_id IN ?", ids[start:min(start+500, len(ids))]).Order("expected_machine_id, position").Find(&rows).Error; err != nil {
			return nil, txn.MapDBError(err)
		}
		for _, d := range rows {
			keptRows[d.ExpectedMachineID] = append(keptRows[d.ExpectedMachineID], d)
		}
	}
	for _, r := range recs {
		if r.selfID == "" || r.dpusGiven {
			continue
		}
		for _, k := range keptRows[r.selfID] {
			d := emDPU{field: r.f("expected_dpus"), serial: k.SerialNumber, kept: true}
			if k.LoopbackIP != nil {
				d.v4, _ = netip.ParseAddr(*k.LoopbackIP)
			}
			if k.LoopbackIPv6 != nil {
				d.v6, _ = netip.ParseAddr(*k.LoopbackIPv6)
			}
			r.dpus = append(r.dpus, d)
		}
	}
	if err := t.validateRecords(recs, replaced, true, &ps); err != nil {
		return nil, txn.MapDBError(err)
	}
	return ps, nil
}
