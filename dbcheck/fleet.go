package dbcheck

import (
	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/models"
)

// The rules of Check over what migration 23's triggers keep: the machines'
// sort names and binding classes, and the fleet counts. Each is recomputed
// another way than the triggers compute it: names by a join, bindings by
// the allocator's own BindingsOf, counts by grouping the machines.

// checkFleetNames compares each machine's sort_name with the name the
// console derives (allocator/names.go), matched by a join rather than the
// triggers' sub-select.
func checkFleetNames(c *checker) error {
	want := `LOWER(COALESCE(NULLIF(TRIM(em.metadata_name), ''), NULLIF(TRIM(m.chassis_serial_number), ''), m.bmc_mac_address, m.machine_id))`
	type row struct {
		MachineID string
		SortName  *string
		Want      string
	}
	var rows []row
	if err := c.q.Raw(`SELECT m.machine_id, m.sort_name, ` + want + ` AS want FROM machines m
		LEFT JOIN expected_machines em ON LOWER(em.bmc_mac_address) = m.bmc_mac_address
		WHERE m.sort_name IS NULL OR m.sort_name <> ` + want + ` ORDER BY m.machine_id`).Scan(&rows).Error; err != nil {
		return err
	}
	for _, r := range rows {
		c.add("fleet_names", "machine %s: sort_name is %q, its name is %q", r.MachineID, deref(r.SortName), r.Want)
	}
	return nil
}

// checkFleetBindings walks the DPUs in keyset batches and compares their
// stored classes with the bindings allocator.BindingsOf computes.
func checkFleetBindings(c *checker) error {
	cursor := ""
	for {
		var dpus []models.Machine
		q := c.q.Where("kind = ?", allocator.KindDPU)
		if cursor != "" {
			q = q.Where("machine_id > ?", cursor)
		}
		if err := q.Order("machine_id").Limit(1000).Find(&dpus).Error; err != nil {
			return err
		}
		bs, err := allocator.BindingsOf(c.q, dpus)
		if err != nil {
			return err
		}
		for i, b := range bs {
			d := dpus[i]
			if deref(d.BindingV4) != allocator.BindingClass(b.StatusV4) || deref(d.BindingV6) != allocator.BindingClass(b.StatusV6) {
				c.add("fleet_bindings", "DPU %s (%s): stored binding classes %q/%q, its bindings are %s/%s",
					d.MachineID, b.SerialNumber, deref(d.BindingV4), deref(d.BindingV6), b.StatusV4, b.StatusV6)
			}
		}
		if len(dpus) < 1000 {
			return nil
		}
		cursor = dpus[len(dpus)-1].MachineID
	}
}

// fleetKey is one row of fleet_counts.
type fleetKey struct{ Kind, State, BindingV4, BindingV6 string }

// checkFleetCounts recounts the machines by kind, state and classes.
func checkFleetCounts(c *checker) error {
	type row struct {
		Kind, State, BindingV4, BindingV6 string
		N                                 int64
	}
	var recount, stored []row
	if err := c.q.Raw(`SELECT kind, state, COALESCE(binding_v4, '') AS binding_v4, COALESCE(binding_v6, '') AS binding_v6, COUNT(*) AS n
		FROM machines GROUP BY kind, state, COALESCE(binding_v4, ''), COALESCE(binding_v6, '')`).Scan(&recount).Error; err != nil {
		return err
	}
	if err := c.q.Raw(`SELECT kind, state, binding_v4, binding_v6, n FROM fleet_counts`).Scan(&stored).Error; err != nil {
		return err
	}
	want, got := map[fleetKey]int64{}, map[fleetKey]int64{}
	for _, r := range recount {
		want[fleetKey{r.Kind, r.State, r.BindingV4, r.BindingV6}] = r.N
	}
	for _, r := range stored {
		got[fleetKey{r.Kind, r.State, r.BindingV4, r.BindingV6}] = r.N
	}
	diffCounts(want, got, func(a, b fleetKey) int {
		return compareStrings([]string{a.Kind, a.State, a.BindingV4, a.BindingV6}, []string{b.Kind, b.State, b.BindingV4, b.BindingV6})
	}, func(k fleetKey, stored, recount int64) {
		c.add("fleet_counts", "%s %s, bindings %q/%q: fleet_counts says %d, the machines count %d", k.Kind, k.State, k.BindingV4, k.BindingV6, stored, recount)
	})
	return nil
}
