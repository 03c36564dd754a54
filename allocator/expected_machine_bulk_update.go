package allocator

import (
	"strings"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
)

// updateEMRows writes the updated records, each only if still at the
// version read (412 stale_version otherwise). A record whose row reads
// the same (only its DPU list changed, the common case of a file whose
// reservations moved) gets only its new version and time, which touches
// none of the table's indexes; the others are rewritten whole.
func (t *tx) updateEMRows(ups []emBulkUpdate) error {
	var same, other []emBulkUpdate
	for _, x := range ups {
		if x.sameRow() {
			same = append(same, x)
		} else {
			other = append(other, x)
		}
	}
	if err := t.bumpEMVersions(same); err != nil {
		return err
	}
	return t.rewriteEMRows(other)
}

// sameRow tells whether the update leaves the record's row as stored,
// but for its version and update time.
func (x emBulkUpdate) sameRow() bool {
	c, r := x.cur, x.r
	return c.BmcUsername == r.username && c.BmcPassword == x.u.password && c.ChassisSerialNumber == r.chassis &&
		c.MetadataName == r.meta.Name && c.MetadataDescription == r.meta.Description && (c.SkuID == nil) == (r.sku == nil) &&
		deref(c.SkuID) == deref(r.sku) && c.FallbackDPUSerialNumbers == marshalJSONText(r.fallback) &&
		c.MetadataLabels == marshalJSONText(r.meta.Labels)
}

// staleUpdate is the 412 of updated records that changed meanwhile.
func staleUpdate(affected int64, n int) error {
	if affected == int64(n) {
		return nil
	}
	return fault.Errf(fault.CodeStaleVersion, "", "%d of %d ExpectedMachines changed meanwhile; read them again and retry", int64(n)-affected, n)
}

// bumpEMVersions sets the next version and the update time of records
// whose row is otherwise unchanged: on PostgreSQL one UPDATE … FROM
// unnest, on SQLite one UPDATE per chunk of records read at one version.
func (t *tx) bumpEMVersions(ups []emBulkUpdate) error {
	if len(ups) == 0 {
		return nil
	}
	var affected int64
	if t.a.dialect == models.Postgres {
		ids, versions := make([]string, len(ups)), make([]int64, len(ups))
		for i, x := range ups {
			ids[i], versions[i] = x.cur.ID, x.cur.Version
		}
		res, err := t.Statement.ConnPool.ExecContext(t.ctx, `UPDATE expected_machines e SET version = u.ver + 1, updated_at = $3
 FROM unnest($1::text[], $2::bigint[]) AS u(id, ver) WHERE e.id = u.id AND e.version = u.ver`, ids, versions, t.now)
		if err != nil {
			return err
		}
		if affected, err = res.RowsAffected(); err != nil {
			return err
		}
		return staleUpdate(affected, len(ups))
	}
	byVersion := map[int64][]string{}
	var order []int64
	for _, x := range ups {
		v := x.cur.Version
		if _, ok := byVersion[v]; !ok {
			order = append(order, v)
		}
		byVersion[v] = append(byVersion[v], x.cur.ID)
	}
	per := sqliteParams - 3
	for _, v := range order {
		ids := byVersion[v]
		for start := 0; start < len(ids); start += per {
			chunk := ids[start:min(start+per, len(ids))]
			var sb strings.Builder
			sb.WriteString("UPDATE expected_machines SET version = ?, updated_at = ? WHERE version = ? AND id IN (")
			args := make([]any, 0, len(chunk)+3)
			args = append(args, v+1, t.now, v)
			for i, id := range chunk {
				if i > 0 {
					sb.WriteByte(',')
				}
				sb.WriteByte('?')
				args = append(args, id)
			}
			sb.WriteByte(')')
			res, err := t.Statement.ConnPool.ExecContext(t.ctx, sb.String(), args...)
			if err != nil {
				return err
			}
			k, err := res.RowsAffected()
			if err != nil {
				return err
			}
			affected += k
		}
	}
	return staleUpdate(affected, len(ups))
}

// rewriteEMRows writes updated records whole: on PostgreSQL one UPDATE …
// FROM unnest(arrays), on SQLite UPDATE … FROM VALUES in chunks.
func (t *tx) rewriteEMRows(ups []emBulkUpdate) error {
	if len(ups) == 0 {
		return nil
	}
	n := len(ups)
	ids, users, pws, chassis, fallbacks := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	names, descs, labels, skus := make([]string, n), make([]string, n), make([]string, n), make([]*string, n)
	versions := make([]int64, n)
	for i, x := range ups {
		r := x.r
		ids[i], users[i], pws[i], chassis[i], fallbacks[i] = x.cur.ID, r.username, x.u.password, r.chassis, marshalJSONText(r.fallback)
		names[i], descs[i], labels[i], skus[i], versions[i] = r.meta.Name, r.meta.Description, marshalJSONText(r.meta.Labels), r.sku, x.cur.Version
	}
	var affected int64
	if t.a.dialect == models.Postgres {
		res, err := t.Statement.ConnPool.ExecContext(t.ctx, `UPDATE expected_machines e SET bmc_username = u.un, bmc_password = u.pw,
 chassis_serial_number = u.cs, fallback_dpu_serial_numbers = u.fb, metadata_name = u.mn, metadata_description = u.md,
 metadata_labels = u.ml, sku_id = u.sku, version = u.ver + 1, updated_at = $11
 FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::bigint[])
   AS u(id, un, pw, cs, fb, mn, md, ml, sku, ver)
 WHERE e.id = u.id AND e.version = u.ver`, ids, users, pws, chassis, fallbacks, names, descs, labels, skus, versions, t.now)
		if err != nil {
			return emConstraintError(err, "expected_machines", "expected_machines")
		}
		if affected, err = res.RowsAffected(); err != nil {
			return err
		}
	} else {
		// UPDATE … FROM VALUES, about 80 records per statement.
		const cols = 12
		per := sqliteParams / cols
		for start := 0; start < n; start += per {
			end := min(start+per, n)
			var sb strings.Builder
			sb.WriteString(`UPDATE expected_machines SET bmc_username = u.column2, bmc_password = u.column3,
 chassis_serial_number = u.column4, fallback_dpu_serial_numbers = u.column5, metadata_name = u.column6,
 metadata_description = u.column7, metadata_labels = u.column8, sku_id = u.column9, version = u.column10 + 1,
 updated_at = u.column11 FROM (VALUES `)
			args := make([]any, 0, (end-start)*cols)
			for i := start; i < end; i++ {
				if i > start {
					sb.WriteByte(',')
				}
				sb.WriteString("(?,?,?,?,?,?,?,?,?,?,?,?)")
				args = append(args, ids[i], users[i], pws[i], chassis[i], fallbacks[i], names[i], descs[i], labels[i], skus[i],
					versions[i], t.now, versions[i])
			}
			sb.WriteString(`) AS u WHERE expected_machines.id = u.column1 AND expected_machines.version = u.column12`)
			res, err := t.Statement.ConnPool.ExecContext(t.ctx, sb.String(), args...)
			if err != nil {
				return emConstraintError(err, "expected_machines", "expected_machines")
			}
			k, err := res.RowsAffected()
			if err != nil {
				return err
			}
			affected += k
		}
	}
	return staleUpdate(affected, n)
}
