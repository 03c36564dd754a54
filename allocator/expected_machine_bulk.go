package allocator

import (
	"database/sql"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
)

// Set-based writes of a replace-all (ReplaceAllExpectedMachines). The
// records are validated as a whole first; what is written then is the
// same as record-by-record writes would write — each record's row, its
// DPU rows, one audit event per created, updated or deleted record, in
// list order — but in multi-row statements, every 2,000 records
// (docs/decisions.md "Replace-all writes set-based, in chunks of 2,000
// records").

// emUpdate is what updating a stored record to r changes.
type emUpdate struct {
	after     ExpectedMachine // the record as it will read
	password  string          // the password to store
	pwChanged bool
	changed   bool // false: nothing to write (and the version stays)
}

// planUpdateEM compares stored record cur (as before) with r under PUT
// semantics (kept DPUs and password when r leaves them out).
func planUpdateEM(cur *models.ExpectedMachine, before *ExpectedMachine, r *emRecord) emUpdate {
	after := *before
	after.BmcMacAddress, after.BmcUsername, after.ChassisSerialNumber = r.mac, r.username, r.chassis
	after.FallbackDPUSerialNumbers, after.Metadata, after.SkuID = r.fallback, r.meta, r.sku
	newPW := cur.BmcPassword
	if r.password != nil {
		newPW = *r.password
	} else if r.clearPassword {
		newPW = ""
	}
	u := emUpdate{password: newPW, pwChanged: newPW != cur.BmcPassword}
	after.BmcPasswordSet = newPW != ""
	if r.dpusGiven {
		after.ExpectedDPUs = r.dpuList()
	}
	u.changed = u.pwChanged || marshalJSONText(after) != marshalJSONText(before)
	if u.changed {
		after.Version = cur.Version + 1
	}
	u.after = after
	return u
}

// dpuRows are the expected_dpus rows of r for machine id.
func dpuRows(id string, r *emRecord) []models.ExpectedDPU {
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
	return rows
}

// emBulk collects the writes of a replace-all.
type emBulk struct {
	t       *tx
	inserts []models.ExpectedMachine
	updates []emBulkUpdate
	dpus    []models.ExpectedDPU
	events  []models.AuditEvent
}

type emBulkUpdate struct {
	cur *models.ExpectedMachine
	r   *emRecord
	u   emUpdate
}

func (b *emBulk) event(action, id string, before, after any) error {
	ev, err := audit.NewRow(b.t.ctx, b.t.now, action, "expected_machine", id, before, after)
	if err != nil {
		return err
	}
	if ev.NamesJSON, err = emEventNames(id, before, after); err != nil {
		return err
	}
	b.events = append(b.events, ev)
	return nil
}

// create records new record r under id and returns it as the API shows it.
func (b *emBulk) create(r *emRecord, id string) (*ExpectedMachine, error) {
	now := b.t.now
	row := models.ExpectedMachine{ID: id, BmcMacAddress: r.mac, BmcUsername: r.username, ChassisSerialNumber: r.chassis,
		FallbackDPUSerialNumbers: marshalJSONText(r.fallback), MetadataName: r.meta.Name, MetadataDescription: r.meta.Description,
		MetadataLabels: marshalJSONText(r.meta.Labels), SkuID: r.sku, Version: 1, CreatedAt: now, UpdatedAt: now}
	if r.password != nil {
		row.BmcPassword = *r.password
	}
	b.inserts = append(b.inserts, row)
	b.dpus = append(b.dpus, dpuRows(id, r)...)
	out := &ExpectedMachine{ID: id, Version: 1, BmcMacAddress: r.mac, BmcUsername: r.username, BmcPasswordSet: row.BmcPassword != "",
		ChassisSerialNumber: r.chassis, FallbackDPUSerialNumbers: r.fallback, Metadata: r.meta, SkuID: r.sku, ExpectedDPUs: r.dpuList()}
	return out, b.event("expected_machine.create", id, nil, emAudit{ExpectedMachine: *out, BmcPasswordChanged: r.password != nil})
}

// update records the replacement of stored cur (read as before) by r;
// its DPU rows were removed already when r gives its list, unless
// keepDPUs (the list is the stored one, whose rows stay).
func (b *emBulk) update(cur *models.ExpectedMachine, before *ExpectedMachine, r *emRecord, keepDPUs bool) (*ExpectedMachine, bool, error) {
	u := planUpdateEM(cur, before, r)
	if r.dpusGiven && !keepDPUs {
		b.dpus = append(b.dpus, dpuRows(cur.ID, r)...)
	}
	if !u.changed {
		return before, false, nil
	}
	b.updates = append(b.updates, emBulkUpdate{cur: cur, r: r, u: u})
	out := u.after
	return &out, true, b.event("expected_machine.update", cur.ID, emAudit{ExpectedMachine: *before},
		emAudit{ExpectedMachine: out, BmcPasswordChanged: u.pwChanged})
}

// emFlushRecords is how many records a replace-all collects before it
// writes them: enough for few statements, few enough that the rows and
// audit events of 60,000 records are never all in memory at once.
const emFlushRecords = 2000

// flushEvery writes what is collected once it holds n records or more.
func (b *emBulk) flushEvery(n int) error {
	if len(b.inserts)+len(b.updates) < n && len(b.events) < n && len(b.dpus) < n {
		return nil
	}
	if err := b.flush(); err != nil {
		return err
	}
	b.inserts, b.updates, b.dpus, b.events = b.inserts[:0], b.updates[:0], b.dpus[:0], b.events[:0]
	return nil
}

// flush writes everything collected: new records, updated records (each
// still at the version read, else 412), DPU rows, audit events.
func (b *emBulk) flush() error {
	t := b.t
	cols := []string{"id", "bmc_mac_address", "bmc_username", "bmc_password", "chassis_serial_number", "fallback_dpu_serial_numbers",
		"metadata_name", "metadata_description", "metadata_labels", "sku_id", "version", "created_at", "updated_at"}
	em := func(i int, dst []any) []any {
		e := &b.inserts[i]
		return append(dst, e.ID, e.BmcMacAddress, e.BmcUsername, e.BmcPassword, e.ChassisSerialNumber, e.FallbackDPUSerialNumbers,
			e.MetadataName, e.MetadataDescription, e.MetadataLabels, e.SkuID, e.Version, e.CreatedAt, e.UpdatedAt)
	}
	if err := t.insertRows("expected_machines", cols, len(b.inserts), em); err != nil {
		return emConstraintError(err, "expected_machines", "expected_machines")
	}
	if err := t.updateEMRows(b.updates); err != nil {
		return err
	}
	dcols := []string{"expected_machine_id", "position", "serial_number", "loopback_ip", "loopback_ip_key", "loopback_ip_v6", "loopback_ip_v6_key"}
	dpu := func(i int, dst []any) []any {
		d := &b.dpus[i]
		return append(dst, d.ExpectedMachineID, d.Position, d.SerialNumber, d.LoopbackIP, d.LoopbackIPKey, d.LoopbackIPv6, d.LoopbackIPv6Key)
	}
	if err := t.insertRows("expected_dpus", dcols, len(b.dpus), dpu); err != nil {
		return emConstraintError(err, "expected_machines", "expected_machines")
	}
	t.record(b.events...)
	return t.flushEvents()
}

// maxParams bounds the parameters of one statement on PostgreSQL (its
// limit is 65,535).
const maxParams = 30000

// sqliteParams bounds them on SQLite, whose driver binds parameters in
// time quadratic in their number (docs/decisions.md "SQLite bulk
// statements carry at most 128 parameters").
const sqliteParams = 128

// rowFunc appends the values of row i (in the columns' order) to dst.
type rowFunc func(i int, dst []any) []any

// insertRows inserts n rows into table with multi-row INSERTs, on the
// transaction's connection directly (gorm would rebuild every statement):
// the full chunks share one prepared statement. The rows are made one at
// a time by row, never all at once.
func (t *tx) insertRows(table string, cols []string, n int, row rowFunc) error {
	if n == 0 {
		return nil
	}
	if t.conn != nil && t.a.dialect == models.Postgres {
		return t.copyRows(table, cols, n, row)
	}
	limit := maxParams
	if t.a.dialect != models.Postgres {
		limit = sqliteParams
	}
	per := max(1, limit/len(cols))
	head := "INSERT INTO " + table + " (" + strings.Join(cols, ", ") + ") VALUES "
	text := func(n int) string {
		var sb strings.Builder
		sb.Grow(len(head) + n*len(cols)*7)
		sb.WriteString(head)
		k := 0
		for i := 0; i < n; i++ {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteByte('(')
			for j := range cols {
				if j > 0 {
					sb.WriteByte(',')
				}
				k++
				t.placeholder(&sb, k)
			}
			sb.WriteByte(')')
		}
		return sb.String()
	}
	var full *sql.Stmt
	defer func() {
		if full != nil {
			full.Close()
		}
	}()
	args := make([]any, 0, per*len(cols))
	for start := 0; start < n; start += per {
		end := min(start+per, n)
		args = args[:0]
		for i := start; i < end; i++ {
			args = row(i, args)
		}
		var err error
		if end-start == per && n > per {
			if full == nil {
				if full, err = t.Statement.ConnPool.PrepareContext(t.ctx, text(per)); err != nil {
					return err
				}
			}
			_, err = full.ExecContext(t.ctx, args...)
		} else {
			_, err = t.Statement.ConnPool.ExecContext(t.ctx, text(end-start), args...)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// placeholder writes the n-th (1-based) bind parameter of the dialect.
func (t *tx) placeholder(sb *strings.Builder, n int) {
	if t.a.dialect == models.Postgres {
		fmt.Fprintf(sb, "$%d", n)
		return
	}
	sb.WriteByte('?')
}

// deleteWhereIn deletes the rows of table whose col is one of vals, in
// chunks, and returns how many went.
func (t *tx) deleteWhereIn(table, col string, vals []string) (int64, error) {
	var n int64
	per := maxParams
	if t.a.dialect != models.Postgres {
		per = sqliteParams
	}
	for start := 0; start < len(vals); start += per {
		chunk := vals[start:min(start+per, len(vals))]
		var sb strings.Builder
		sb.WriteString("DELETE FROM " + table + " WHERE " + col + " IN (")
		args := make([]any, len(chunk))
		for i, v := range chunk {
			if i > 0 {
				sb.WriteByte(',')
			}
			args[i] = v
			t.placeholder(&sb, i+1)
		}
		sb.WriteByte(')')
		res, err := t.Statement.ConnPool.ExecContext(t.ctx, sb.String(), args...)
		if err != nil {
			return n, err
		}
		k, err := res.RowsAffected()
		if err != nil {
			return n, err
		}
		n += k
	}
	return n, nil
}

// deleteEMs removes stored records (with their DPU rows), which the
// transaction holds locked (412 if one is gone all the same), recording a
// delete event for each in b; befores are the records as they read.
func (b *emBulk) deleteEMs(gone []models.ExpectedMachine, befores []ExpectedMachine) error {
	if len(gone) == 0 {
		return nil
	}
	t := b.t
	ids := make([]string, len(gone))
	for i := range gone {
		ids[i] = gone[i].ID
	}
	if _, err := t.deleteWhereIn("expected_dpus", "expected_machine_id", ids); err != nil {
		return err
	}
	n, err := t.deleteWhereIn("expected_machines", "id", ids)
	if err != nil {
		return err
	}
	if n != int64(len(gone)) {
		return fault.Errf(fault.CodeStaleVersion, "", "%d of %d ExpectedMachines changed meanwhile; read them again and retry", int64(len(gone))-n, len(gone))
	}
	for i := range befores {
		if err := b.event("expected_machine.delete", gone[i].ID, emAudit{ExpectedMachine: befores[i]}, nil); err != nil {
			return err
		}
		if err := b.flushEvery(emFlushRecords); err != nil {
			return err
		}
	}
	return nil
}

// deleteDPUsOf removes the DPU rows of the records ids. all says that
// they are every DPU row the table holds: on SQLite, whose write
// transaction excludes every other writer, the table is then emptied by
// one scan instead of a lookup per record (a thousand statements of a
// hundred bound ids for 60,000 records).
func (t *tx) deleteDPUsOf(ids []string, all bool) error {
	if all && len(ids) > 0 && t.a.dialect != models.Postgres {
		return t.Exec("DELETE FROM expected_dpus").Error
	}
	_, err := t.deleteWhereIn("expected_dpus", "expected_machine_id", ids)
	return err
}

// copyRows is insertRows with PostgreSQL's COPY on the transaction's own
// connection (inside its transaction): the rows stream in binary without
// a statement to parse or parameters to bind.
func (t *tx) copyRows(table string, cols []string, n int, row rowFunc) error {
	return t.conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("COPY into %s: the connection is not a pgx connection", table)
		}
		i, vals := 0, make([]any, 0, len(cols))
		src := pgx.CopyFromFunc(func() ([]any, error) {
			if i == n {
				return nil, nil
			}
			vals = row(i, vals[:0])
			i++
			return vals, nil
		})
		stored, err := sc.Conn().CopyFrom(t.ctx, pgx.Identifier{table}, cols, src)
		if err != nil {
			return err
		}
		if stored != int64(n) {
			return fmt.Errorf("COPY into %s stored %d of %d rows", table, stored, n)
		}
		return nil
	})
}
