package allocator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/ident"
	"github.com/ipledger/ipledger/models"
)

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
		return nil, fault.Errf(fault.CodeNotFound, "", "no ExpectedMachine with id or BMC MAC %q", idOrMAC)
	}
	if err != nil {
		return nil, err
	}
	return &em, nil
}

func expectedMachinesOut(db *gorm.DB, rows []models.ExpectedMachine) ([]ExpectedMachine, error) {
	if len(rows) == 0 {
		return []ExpectedMachine{}, nil
	}
	ids := make([]string, len(rows))
	for i := range rows {
		ids[i] = rows[i].ID
	}
	var dpus []models.ExpectedDPU
	for start := 0; start < len(ids); start += sqlChunk {
		var chunk []models.ExpectedDPU
		if err := db.Where("expected_machine_id IN ?", ids[start:min(start+sqlChunk, len(ids))]).Order("expected_machine_id, position").Find(&chunk).Error; err != nil {
			return nil, err
		}
		dpus = append(dpus, chunk...)
	}
	return expectedMachinesFrom(rows, dpusByMachine(dpus)), nil
}

// dpusByMachine groups DPU rows (in position order) by their record's id,
// as the API shows them.
func dpusByMachine(dpus []models.ExpectedDPU) map[string][]ExpectedDPU {
	by := map[string][]ExpectedDPU{}
	for _, d := range dpus {
		by[d.ExpectedMachineID] = append(by[d.ExpectedMachineID], ExpectedDPU{SerialNumber: d.SerialNumber, LoopbackIP: d.LoopbackIP, LoopbackIPv6: d.LoopbackIPv6})
	}
	return by
}

// expectedMachinesFrom builds the API view of stored rows from their DPUs
// (dpusByMachine).
func expectedMachinesFrom(rows []models.ExpectedMachine, by map[string][]ExpectedDPU) []ExpectedMachine {
	out := make([]ExpectedMachine, 0, len(rows))
	for i := range rows {
		r := &rows[i]
		em := ExpectedMachine{ID: r.ID, Version: r.Version, BmcMacAddress: r.BmcMacAddress, BmcUsername: r.BmcUsername,
			BmcPasswordSet: r.BmcPassword != "", ChassisSerialNumber: r.ChassisSerialNumber, SkuID: r.SkuID,
			Metadata:                 Metadata{Name: r.MetadataName, Description: r.MetadataDescription, Labels: []Label{}},
			FallbackDPUSerialNumbers: []string{}, ExpectedDPUs: by[r.ID]}
		if r.FallbackDPUSerialNumbers != "[]" {
			_ = json.Unmarshal([]byte(r.FallbackDPUSerialNumbers), &em.FallbackDPUSerialNumbers)
		}
		if r.MetadataLabels != "[]" {
			_ = json.Unmarshal([]byte(r.MetadataLabels), &em.Metadata.Labels)
		}
		if em.FallbackDPUSerialNumbers == nil {
			em.FallbackDPUSerialNumbers = []string{}
		}
		if em.Metadata.Labels == nil {
			em.Metadata.Labels = []Label{}
		}
		if em.ExpectedDPUs == nil {
			em.ExpectedDPUs = []ExpectedDPU{}
		}
		out = append(out, em)
	}
	return out
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
			return nil, fault.Errf(fault.CodeInvalid, "cursor", "cursor %q is not one this API returned", f.Cursor)
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
		if cursor != "" {
			q = q.Where("bmc_mac_address > ?", cursor)
		}
		var rows []models.ExpectedMachine
		if s := strings.ToLower(strings.TrimSpace(f.Search)); s != "" {
			// The records holding s in a column of their own, and those
			// holding it in an expected DPU's serial: each its own query,
			// which PostgreSQL answers from the trigram indexes
			// (models.SearchIndexes) or by walking the BMC MAC order,
			// whichever finds the page sooner. One OR over both would
			// make it walk every record whenever few match.
			// The BMC MAC is also looked for in the stored spelling of
			// the part of a MAC s may be (00-50-0, 0050.0, 00500:
			// ident.MACFragments), and the text in both Unicode forms
			// (models.SearchForms: a name stored decomposed is found by
			// the composed text a keyboard types, and the other way
			// round).
			forms := models.SearchForms(s)
			var conds, dpuConds []string
			var args, dpuArgs []any
			substr := func(col, needle string) {
				cond, arg := models.Contains(a.dialect, col, needle)
				conds, args = append(conds, cond), append(args, arg)
			}
			for _, col := range []string{"bmc_mac_address", "chassis_serial_number", "metadata_name"} {
				for _, form := range forms {
					substr(col, form)
				}
			}
			for _, f := range ident.MACFragments(s) {
				if f != s {
					substr("bmc_mac_address", f)
				}
			}
			for _, form := range forms {
				cond, arg := models.Contains(a.dialect, "serial_number", form)
				dpuConds, dpuArgs = append(dpuConds, cond), append(dpuArgs, arg)
			}
			base := q.Session(&gorm.Session{})
			own := base.Where("("+strings.Join(conds, " OR ")+")", args...).Order("bmc_mac_address").Limit(f.Limit + 1)
			dpus := base.Where("id IN (SELECT expected_machine_id FROM expected_dpus WHERE "+strings.Join(dpuConds, " OR ")+")", dpuArgs...).Order("bmc_mac_address").Limit(f.Limit + 1)
			if err := db.Raw(`SELECT * FROM (?) own UNION SELECT * FROM (?) dpus ORDER BY bmc_mac_address LIMIT ?`, own, dpus, f.Limit+1).
				Scan(&rows).Error; err != nil {
				return err
			}
		} else if err := q.Order("bmc_mac_address").Limit(f.Limit + 1).Find(&rows).Error; err != nil {
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
