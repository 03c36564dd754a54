package console

import (
	"slices"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/dbcheck"
	"github.com/ipledger/ipledger/ident"
	"github.com/ipledger/ipledger/models"
)

// TestSearchPartialFollowsWritesAndIndexes: the search for part of a text
// finds exactly what a scan of the rows finds — the same hits in the same
// order — over a varied fleet after every kind of write (ingestion,
// ExpectedMachine create, rename by PATCH and PUT, delete, bulk import,
// force delete of a machine), for texts in any case and texts holding
// LIKE's metacharacters (%, _, \). On PostgreSQL the hits with the
// trigram indexes (models.SearchIndexes, which the test database has)
// are then compared with the hits without them: the indexes change the
// cost of the search, never its result.
func TestSearchPartialFollowsWritesAndIndexes(t *testing.T) {
	t.Parallel()
	siteEach(t, siteOpts{}, func(t *testing.T, s *site) {
		em := func(mac, name, chassis string, dpus ...string) *allocator.ExpectedMachine {
			t.Helper()
			spec := allocator.ExpectedMachineSpec{BmcMacAddress: mac, ChassisSerialNumber: chassis, Metadata: &allocator.Metadata{Name: name}}
			var ds []allocator.ExpectedDPU
			for _, d := range dpus {
				ds = append(ds, allocator.ExpectedDPU{SerialNumber: d})
			}
			spec.ExpectedDPUs = &ds
			out, err := s.a.CreateExpectedMachine(s.ctx, spec)
			if err != nil {
				t.Fatalf("create %s: %v", name, err)
			}
			return out
		}
		em("0a:00:00:00:00:01", "Rack-A_01", "CH-A01", "MTA001", "MTA002")
		em("0a:00:00:00:00:02", "rack%b", "CH_B02", "MTB001")
		em("0a:00:00:00:00:03", `node\x`, "chB03")
		em("0a:00:00:00:00:04", "MiXeD Case", "ch.c04", "mt_c01")
		old := em("0a:00:00:00:00:05", "old-name-5", "CH-E05")
		gone := em("0a:00:00:00:00:06", "gone-6", "CH-F06", "MTF001")
		em("0a:00:00:00:00:07", "Ünit-É 7", "CH-G07")
		em("0a:00:00:00:00:0a", "rack-10-20", "SN-0a-00")
		put := em("0a:00:00:00:00:08", "put-me-8", "CH-H08")
		s.report("0a:00:00:00:00:01", "MTA001", "MTA002")
		s.report("0a:00:00:00:00:04", "mt_c01")
		s.report("0a:00:00:00:00:05")
		s.report("0b:00:00:00:00:10", "MTZ010", "MTZ011") // no ExpectedMachine
		s.report("0b:00:00:00:00:11", "MTZ020")
		if _, err := s.a.PatchExpectedMachine(s.ctx, old.ID, []byte(`{"metadata":{"name":"Renamed_5%"}}`), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := s.a.ReplaceExpectedMachine(s.ctx, put.ID, allocator.ExpectedMachineSpec{BmcMacAddress: put.BmcMacAddress,
			ChassisSerialNumber: "CH-PUT", Metadata: &allocator.Metadata{Name: "replaced-8"}}, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.a.DeleteExpectedMachine(s.ctx, gone.ID, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := s.a.ImportExpectedMachines(s.ctx, []allocator.ExpectedMachineSpec{
			{BmcMacAddress: "0a:00:00:00:00:02", ChassisSerialNumber: "CH_B02", Metadata: &allocator.Metadata{Name: "rack%b-imported"}},
			{BmcMacAddress: "0a:00:00:00:00:09", ChassisSerialNumber: "CH-I09", Metadata: &allocator.Metadata{Name: "Imported_9"}},
		}, allocator.ImportMerge); err != nil {
			t.Fatal(err)
		}
		s.delete(allocator.HostMachineID("0b:00:00:00:00:11"), true)

		texts := []string{"rack", "RACK", "ack-a", "a_0", "%", "_", `\`, `%b`, `k%b-`, `e\x`, `de\`, "_5%", "renamed", "old-name",
			"gone", "put-me", "replaced", "imported", "mt", "MTZ", "mtz02", "ch_", "ch.", "ch-", "c04", "0a:00", "00:00:0", "mixed c",
			"case", "fm", "zzz-none", "ünit", "Ü", "é 7", "10-20", "0a-00", "00-00-00",
			"00-00-0", "0-00-0A", "0a00.00", "0A0000", "000010", "0000.1", "0b:00:00:00:00:10", "0B00.0000.0010"}
		got := map[string][]SearchHit{}
		for _, q := range texts {
			r, err := s.c.Search(s.ctx, q)
			if err != nil {
				t.Fatalf("search %q: %v", q, err)
			}
			got[q] = r.Hits
			if want := scanSearch(t, s, q); !slices.Equal(hitKeys(r.Hits), want) {
				t.Errorf("search %q: %v, a scan of the rows finds %v", q, hitKeys(r.Hits), want)
			}
		}
		// The ExpectedMachine list's search, page by page (two records a
		// page), lists what a scan of the rows finds, in BMC MAC order.
		for _, q := range []string{"rack", "a0", "mt", "ch", "_", "%", "0a:00", "zzz", "0-00-0A", "0a00.00", "00000a", "A-0"} {
			var got []string
			cursor := ""
			for range 20 {
				page, err := s.a.ListExpectedMachines(s.ctx, allocator.ExpectedMachineFilter{Search: q, Limit: 2, Cursor: cursor})
				if err != nil {
					t.Fatalf("list %q: %v", q, err)
				}
				for _, em := range page.Items {
					got = append(got, em.ID)
				}
				if cursor = page.NextCursor; cursor == "" {
					break
				}
			}
			if want := scanExpectedMachines(t, s, q); !slices.Equal(got, want) {
				t.Errorf("list %q: %v, a scan of the rows finds %v", q, got, want)
			}
		}
		for q, want := range map[string]string{"10-20": "expected_machine", "renamed": "host", "old-name": "", "gone": "", "put-me": "", "replaced": "expected_machine", "mtz02": ""} {
			if keys := hitKeys(got[q]); (want == "") != (len(keys) == 0) || want != "" && !strings.HasPrefix(keys[0], want+" ") {
				t.Errorf("search %q after the writes: %v, want %q", q, keys, want)
			}
		}
		if models.DialectOf(s.db) != models.Postgres {
			return
		}
		for _, x := range models.SearchIndexes {
			if err := s.db.Exec("DROP INDEX " + x.Name).Error; err != nil {
				t.Fatal(err)
			}
		}
		if st, err := database.SearchIndexStatus(s.db); err != nil || !strings.Contains(st, "missing") {
			t.Errorf("status without the indexes: %q, %v", st, err)
		}
		// Not a broken database: check passes, with a note.
		if res, err := dbcheck.Check(s.ctx, s.db); err != nil || !res.OK() || len(res.Notes) != 1 {
			t.Errorf("check without the indexes: %+v, %v; want no finding and one note", res, err)
		}
		for _, q := range texts {
			r, err := s.c.Search(s.ctx, q)
			if err != nil {
				t.Fatalf("search %q: %v", q, err)
			}
			if !slices.Equal(r.Hits, got[q]) {
				t.Errorf("search %q: %+v with the trigram indexes, %+v without", q, got[q], r.Hits)
			}
		}
		if err := models.Migrate(s.db); err != nil {
			t.Fatal(err)
		}
		if st, err := database.SearchIndexStatus(s.db); err != nil || st != "" {
			t.Errorf("status after Migrate: %q, %v", st, err)
		}
	})
}

func hitKeys(hs []SearchHit) []string {
	out := []string{}
	for _, h := range hs {
		out = append(out, h.Kind+" "+h.ID)
	}
	return out
}

// scanExpectedMachines returns the ids of the ExpectedMachines holding q
// (lower-cased) in their name, BMC MAC, chassis serial or an expected
// DPU's serial, by BMC MAC.
func scanExpectedMachines(t *testing.T, s *site, q string) []string {
	t.Helper()
	var ems []models.ExpectedMachine
	var eds []models.ExpectedDPU
	if err := s.db.Order("bmc_mac_address").Find(&ems).Error; err != nil {
		t.Fatal(err)
	}
	if err := s.db.Find(&eds).Error; err != nil {
		t.Fatal(err)
	}
	lq, macs := scanNeedles(q)
	has := func(v string) bool { return strings.Contains(strings.ToLower(v), lq) }
	out := []string{}
	for _, em := range ems {
		hit := has(em.MetadataName) || hasAny(em.BmcMacAddress, macs) || has(em.ChassisSerialNumber)
		for _, d := range eds {
			hit = hit || d.ExpectedMachineID == em.ID && has(d.SerialNumber)
		}
		if hit {
			out = append(out, em.ID)
		}
	}
	return out
}

// scanSearch is the search for part of a text as a scan of every row:
// the ExpectedMachines holding q (lower-cased) in their name, BMC MAC,
// chassis serial or an expected DPU's serial, by BMC MAC, each as its
// host when one carries its BMC MAC; then the machines holding it in
// their machine_id, serial, chassis serial or BMC MAC, by machine_id;
// each object once.
func scanSearch(t *testing.T, s *site, q string) []string {
	t.Helper()
	var ems []models.ExpectedMachine
	var eds []models.ExpectedDPU
	var ms []models.Machine
	for _, err := range []error{s.db.Order("bmc_mac_address").Find(&ems).Error, s.db.Find(&eds).Error, s.db.Order("machine_id").Find(&ms).Error} {
		if err != nil {
			t.Fatal(err)
		}
	}
	out, seen := []string{}, map[string]bool{}
	lq, macs := scanNeedles(q)
	scanSearchOf(lq, macs, &out, seen, ems, eds, ms)
	if len(out) > searchLimit {
		t.Fatalf("search %q: %d hits; the fleet is meant to stay under the limit", q, len(out))
	}
	return out
}

// scanNeedles are the text q in lower case and, for BMC MACs, also the
// stored spellings of the part of a MAC it may be (ident.MACFragments,
// held to every notation by its own table test).
func scanNeedles(q string) (string, []string) {
	lq := strings.ToLower(strings.TrimSpace(q))
	macs := []string{lq}
	for _, f := range ident.MACFragments(q) {
		if f != lq {
			macs = append(macs, f)
		}
	}
	return lq, macs
}

// scanSearchOf adds to out the hits of the text lq and, in BMC MACs, of
// the spellings macs.
func scanSearchOf(lq string, macs []string, out *[]string, seen map[string]bool, ems []models.ExpectedMachine, eds []models.ExpectedDPU, ms []models.Machine) {
	has := func(vs ...*string) bool {
		for _, v := range vs {
			if v != nil && strings.Contains(strings.ToLower(*v), lq) {
				return true
			}
		}
		return false
	}
	add := func(k string) {
		if !seen[k] {
			seen[k] = true
			*out = append(*out, k)
		}
	}
	for _, em := range ems {
		hit := has(&em.MetadataName, &em.ChassisSerialNumber) || hasAny(em.BmcMacAddress, macs)
		for _, d := range eds {
			hit = hit || d.ExpectedMachineID == em.ID && has(&d.SerialNumber)
		}
		if !hit {
			continue
		}
		k := HitExpectedMachine + " " + em.ID
		for _, m := range ms {
			if m.Kind == allocator.KindHost && m.BmcMacAddress != nil && *m.BmcMacAddress == em.BmcMacAddress {
				k = HitHost + " " + m.MachineID
			}
		}
		add(k)
	}
	for _, m := range ms {
		id := m.MachineID
		if has(&id, m.SerialNumber, &m.ChassisSerialNumber) || m.BmcMacAddress != nil && hasAny(*m.BmcMacAddress, macs) {
			add(map[string]string{allocator.KindHost: HitHost, allocator.KindDPU: HitDPU}[m.Kind] + " " + m.MachineID)
		}
	}
}
