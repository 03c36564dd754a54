package console

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"unicode/utf8"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/ident"
	"github.com/ipledger/ipledger/models"

	"github.com/ipledger/ipledger/allocator"
)

// Search hit kinds, in the order the console lists their groups.
const (
	HitHost            = "host"
	HitDPU             = "dpu"
	HitExpectedMachine = "expected_machine"
	HitAllocation      = "allocation"
	HitPool            = "pool"
)

// SearchHit is one object a search found. ID is what its page is keyed by:
// a machine_id, an ExpectedMachine id, a pool name; an allocation hit
// carries Pool and Value (its page is the pool's allocations filtered to
// that value). Exact hits matched the whole text (an address, a MAC, a
// serial, a name, an id); the others matched part of it.
type SearchHit struct {
	Kind   string
	ID     string
	Name   string
	Detail string
	Pool   string
	Value  string
	Exact  bool
	// free marks a value that lies free in a pool: a match of the text's
	// form (a number is a value of every integer pool) rather than of
	// something that exists, so it does not stop the search for the text
	// inside names and serials.
	free bool
}

// SearchResult is what one search found. More is set when a group was cut
// at its limit.
type SearchResult struct {
	Query string
	Hits  []SearchHit
	More  bool
}

// Redirect is the one hit a console search goes straight to: the only
// hit, when it matched exactly.
func (r *SearchResult) Redirect() *SearchHit {
	if len(r.Hits) == 1 && r.Hits[0].Exact {
		return &r.Hits[0]
	}
	return nil
}

// searchLimit bounds each look-up of a search (a prefix may cover a
// million allocations; the page shows the first ones in value order).
const searchLimit = 50

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// Search finds what an operator typed into the console's search box: an
// IP address or prefix (IPv4 and IPv6, any spelling), a value of an
// integer pool, a MAC address in any notation (':', '-', Cisco's '.',
// bare hex) or part of one, a DPU serial, a chassis
// serial, a machine_id, an ExpectedMachine name or id, or a pool name.
// Every exact look-up is an index probe (the (pool, value) key of
// allocations, the unique serials and MACs, migration 15's chassis and
// name indexes), so a search costs the same at a million allocations.
//
// A host and its ExpectedMachine are one hit (the host's page shows its
// ExpectedMachine), and so are a DPU and the reservation of its serial;
// an address held by a DPU is that DPU. When nothing matches exactly, the
// text is looked for inside names, serials and MACs of ExpectedMachines
// and machines. Text longer than 200 characters is 422 invalid.
func (c *Console) Search(ctx context.Context, q string) (*SearchResult, error) {
	q = strings.TrimSpace(q)
	res := &SearchResult{Query: q}
	if q == "" {
		return res, nil
	}
	if n := utf8.RuneCountInString(q); n > 200 {
		return nil, fault.Errf(fault.CodeInvalid, "q", "the search text is %d characters long; at most 200", n)
	}
	s := &searcher{c: c, ctx: ctx, res: res, seen: map[string]bool{}}
	err := c.read(ctx, func(db *gorm.DB) error {
		s.db = db
		return s.run(q)
	})
	if err != nil {
		return nil, err
	}
	if err := s.name(); err != nil {
		return nil, err
	}
	return res, nil
}

type searcher struct {
	c    *Console
	ctx  context.Context
	db   *gorm.DB
	res  *SearchResult
	seen map[string]bool
}

func (s *searcher) add(h SearchHit) {
	k := h.Kind + "\x00" + h.ID + "\x00" + h.Pool + "\x00" + h.Value
	if h.Kind == HitHost || h.Kind == HitDPU || h.Kind == HitExpectedMachine {
		k = h.Kind + "\x00" + h.ID
	}
	if s.seen[k] {
		return
	}
	s.seen[k] = true
	s.res.Hits = append(s.res.Hits, h)
}

func (s *searcher) run(q string) error {
	if mac := wholeMAC(q); mac != "" {
		if err := s.byMAC(mac); err != nil {
			return err
		}
	}
	if strings.Contains(q, "/") {
		if p, err := netip.ParsePrefix(q); err == nil && p.Addr().Zone() == "" && !p.Addr().Is4In6() {
			if p.IsSingleIP() {
				return s.byAddress(p.Addr().String())
			}
			return s.byPrefix(p)
		}
	}
	if addr, err := allocator.CanonicalAddress(q); err == nil {
		return s.byAddress(addr.String())
	}
	if _, err := allocator.ParseInteger(q); err == nil {
		if err := s.byAddress(q); err != nil {
			return err
		}
	}
	if err := s.byText(q); err != nil {
		return err
	}
	if !s.found() {
		return s.partial(q)
	}
	return nil
}

// wholeMAC is the MAC address q spells, in the stored form, else "": a
// MAC ident.ParseMAC reads, or all six octets in a notation it leaves to
// search text (Cisco's 0a10.0000.0005, bare hex 0a1000000005), so that a
// MAC pasted from a switch finds its host as the ':' spelling does.
func wholeMAC(q string) string {
	if mac, err := ident.ParseMAC(q); err == nil {
		return mac
	}
	for _, f := range ident.MACFragments(q) {
		if mac, err := ident.ParseMAC(f); err == nil && mac == f {
			return mac
		}
	}
	return ""
}

// found reports a hit other than a value free in a pool.
func (s *searcher) found() bool {
	for _, h := range s.res.Hits {
		if !h.free {
			return true
		}
	}
	return false
}

// byMAC: the host or DPU whose BMC has this MAC (the unique key of
// machines), else the ExpectedMachine that declares it.
func (s *searcher) byMAC(mac string) error {
	var ms []models.Machine
	if err := s.db.Where("bmc_mac_address = ?", mac).Limit(1).Find(&ms).Error; err != nil {
		return err
	}
	for _, m := range ms {
		if m.Kind == allocator.KindDPU {
			s.add(SearchHit{Kind: HitDPU, ID: m.MachineID, Detail: "DPU BMC MAC " + mac, Exact: true})
			continue
		}
		s.add(SearchHit{Kind: HitHost, ID: m.MachineID, Detail: "BMC MAC " + mac, Exact: true})
	}
	if len(ms) > 0 {
		return nil
	}
	var ems []models.ExpectedMachine
	if err := s.db.Where("bmc_mac_address = ?", mac).Limit(1).Find(&ems).Error; err != nil {
		return err
	}
	for _, em := range ems {
		s.add(SearchHit{Kind: HitExpectedMachine, ID: em.ID, Name: allocator.ExpectedMachineName(em.MetadataName, em.BmcMacAddress),
			Detail: "BMC MAC " + mac + ", not ingested yet", Exact: true})
	}
	return nil
}

// byAddress: every holder of one value (LookupAddress), each turned into
// the object an operator wants: the DPU that holds or reserves it, the
// owner's allocation, the ExpectedMachine that reserves it, or the pool
// it is free in.
func (s *searcher) byAddress(v string) error {
	info, err := s.c.a.LookupAddress(s.ctx, v)
	if err != nil {
		if e, ok := fault.AsError(err); ok && e.Code == fault.CodeInvalid {
			return nil
		}
		return err
	}
	held := map[string]bool{}
	for _, e := range info.Entries {
		switch e.Kind {
		case "allocation":
			held[e.Pool] = true
			if deref(e.OwnerType) == allocator.OwnerTypeMachine {
				if ok, err := s.machineHit(deref(e.OwnerID), "holds "+e.Value+" in "+e.Pool); err != nil || ok {
					if err != nil {
						return err
					}
					continue
				}
			}
			s.add(SearchHit{Kind: HitAllocation, Pool: e.Pool, Value: e.Value, ID: e.Pool + "/" + e.Value,
				Detail: "allocated to " + deref(e.OwnerType) + "/" + deref(e.OwnerID), Exact: true})
		case "quarantine":
			held[e.Pool] = true
			s.add(SearchHit{Kind: HitAllocation, Pool: e.Pool, Value: e.Value, ID: e.Pool + "/" + e.Value,
				Detail: "quarantined, was " + deref(e.FormerOwnerType) + "/" + deref(e.FormerOwnerID), Exact: true})
		}
	}
	for _, e := range info.Entries {
		if e.Kind != "reservation" {
			continue
		}
		held[e.Pool] = true
		if ok, err := s.machineHit(allocator.DPUMachineID(e.SerialNumber), "reserves "+e.Value+" in "+e.Pool); err != nil {
			return err
		} else if ok {
			continue
		}
		if err := s.emHit(e.ExpectedMachineID, "reserves "+e.Value+" for DPU "+e.SerialNumber+" (not ingested)", true); err != nil {
			return err
		}
	}
	for _, e := range info.Entries {
		if e.Kind == "pool_member" && !held[e.Pool] {
			kind := "auto_assign"
			if e.AutoAssign != nil && !*e.AutoAssign {
				kind = "explicit"
			}
			s.add(SearchHit{Kind: HitPool, ID: e.Pool, Name: e.Pool, Pool: e.Pool, Value: e.Value,
				Detail: e.Value + " is free, in an " + kind + " range", Exact: true, free: true})
		}
	}
	return nil
}

// byPrefix: the allocations whose value lies inside p, in every pool of
// its family (an index range scan of (pool_id, value_key) per pool), and
// the pools whose ranges overlap it.
func (s *searcher) byPrefix(p netip.Prefix) error {
	var pools []models.Pool
	if err := s.db.Order("name").Find(&pools).Error; err != nil {
		return err
	}
	for i := range pools {
		pl := &pools[i]
		first, last, ok := allocator.PrefixKeys(pl, p)
		if !ok {
			continue
		}
		var n int64
		if err := s.db.Model(&models.PoolRange{}).Where("pool_id = ? AND first_key <= ? AND last_key >= ?", pl.ID, last, first).Count(&n).Error; err != nil {
			return err
		}
		if n == 0 {
			continue
		}
		overlap := fmt.Sprintf("%d ranges overlap", n)
		if n == 1 {
			overlap = "1 range overlaps"
		}
		s.add(SearchHit{Kind: HitPool, ID: pl.Name, Name: pl.Name, Pool: pl.Name, Value: p.Masked().String(),
			Detail: fmt.Sprintf("%s %s: every value held inside it, on the pool's page", overlap, p.Masked())})
		var rows []models.Allocation
		q := s.db.Where("pool_id = ? AND value_key >= ? AND value_key <= ?", pl.ID, first, last)
		if cut, ok := s.c.a.QuarantineCutoff(); ok {
			q = q.Where("(state <> ? OR quarantined_at > ?)", models.StateQuarantined, cut)
		}
		if err := q.Order("value_key").Limit(searchLimit + 1).Find(&rows).Error; err != nil {
			return err
		}
		if len(rows) > searchLimit {
			rows, s.res.More = rows[:searchLimit], true
		}
		for _, r := range rows {
			d := "allocated to " + deref(r.OwnerType) + "/" + deref(r.OwnerID)
			if r.State == models.StateQuarantined {
				d = "quarantined, was " + deref(r.FormerOwnerType) + "/" + deref(r.FormerOwnerID)
			}
			s.add(SearchHit{Kind: HitAllocation, Pool: pl.Name, Value: r.Value, ID: pl.Name + "/" + r.Value, Detail: d})
		}
	}
	return nil
}

// byText: serials, chassis serials, machine ids, ExpectedMachine names and
// ids, pool names — exact, each an index probe.
func (s *searcher) byText(q string) error {
	if allocator.IsMachineID(q) {
		if _, err := s.machineHit(q, "machine_id"); err != nil {
			return err
		}
	}
	if ident.ValidSerial(q) {
		for _, serial := range uniq(q, strings.ToUpper(q)) {
			if ok, err := s.machineHit(allocator.DPUMachineID(serial), "DPU serial "+serial); err != nil {
				return err
			} else if ok {
				continue
			}
			var d []models.ExpectedDPU
			if err := s.db.Where("serial_number = ?", serial).Limit(1).Find(&d).Error; err != nil {
				return err
			}
			for _, x := range d {
				if err := s.emHit(x.ExpectedMachineID, "declares DPU "+serial+" (not ingested)", true); err != nil {
					return err
				}
			}
		}
	}
	for _, c := range uniq(q, strings.ToUpper(q)) {
		var hosts []models.Machine
		if err := s.db.Where("chassis_serial_number = ? AND kind = ?", c, allocator.KindHost).Limit(searchLimit).Find(&hosts).Error; err != nil {
			return err
		}
		for _, h := range hosts {
			s.add(SearchHit{Kind: HitHost, ID: h.MachineID, Detail: "chassis serial " + c, Exact: true})
		}
		var ems []models.ExpectedMachine
		if err := s.db.Where("chassis_serial_number = ?", c).Limit(searchLimit).Find(&ems).Error; err != nil {
			return err
		}
		for _, em := range ems {
			if err := s.emOrHost(&em, "chassis serial "+c); err != nil {
				return err
			}
		}
	}
	// A name in either Unicode form (models.SearchForms), each a probe of
	// migration 15's index on lower(metadata_name).
	var ems []models.ExpectedMachine
	if err := s.db.Where("lower(metadata_name) IN ?", models.SearchForms(strings.ToLower(q))).Limit(searchLimit).Find(&ems).Error; err != nil {
		return err
	}
	for _, em := range ems {
		if err := s.emOrHost(&em, "name "+em.MetadataName); err != nil {
			return err
		}
	}
	if uuidRE.MatchString(q) {
		if err := s.emHit(strings.ToLower(q), "ExpectedMachine id", true); err != nil {
			return err
		}
	}
	var pools []models.Pool
	if err := s.db.Where("name = ?", q).Find(&pools).Error; err != nil {
		return err
	}
	for _, p := range pools {
		s.add(SearchHit{Kind: HitPool, ID: p.Name, Name: p.Name, Pool: p.Name, Detail: p.Type + " pool", Exact: true})
	}
	return nil
}

// machineHit adds the machine with this id, if it exists.
func (s *searcher) machineHit(id, detail string) (bool, error) {
	var rows []models.Machine
	if err := s.db.Where("machine_id = ?", id).Limit(1).Find(&rows).Error; err != nil || len(rows) == 0 {
		return false, err
	}
	kind := HitHost
	if rows[0].Kind == allocator.KindDPU {
		kind = HitDPU
	}
	s.add(SearchHit{Kind: kind, ID: id, Detail: detail, Exact: true})
	return true, nil
}

// emHit adds the ExpectedMachine with this id, if it exists.
func (s *searcher) emHit(id, detail string, exact bool) error {
	var ems []models.ExpectedMachine
	if err := s.db.Where("id = ?", id).Limit(1).Find(&ems).Error; err != nil {
		return err
	}
	for _, em := range ems {
		s.add(SearchHit{Kind: HitExpectedMachine, ID: em.ID, Name: allocator.ExpectedMachineName(em.MetadataName, em.BmcMacAddress), Detail: detail, Exact: exact})
	}
	return nil
}

// emOrHost adds the host of an ExpectedMachine when it is ingested (its
// page shows the ExpectedMachine), else the ExpectedMachine.
func (s *searcher) emOrHost(em *models.ExpectedMachine, detail string) error {
	var hosts []models.Machine
	if err := s.db.Where("bmc_mac_address = ? AND kind = ?", strings.ToLower(em.BmcMacAddress), allocator.KindHost).Limit(1).Find(&hosts).Error; err != nil {
		return err
	}
	if len(hosts) > 0 {
		s.add(SearchHit{Kind: HitHost, ID: hosts[0].MachineID, Detail: detail, Exact: true})
		return nil
	}
	s.add(SearchHit{Kind: HitExpectedMachine, ID: em.ID, Name: allocator.ExpectedMachineName(em.MetadataName, em.BmcMacAddress),
		Detail: detail + ", not ingested yet", Exact: true})
	return nil
}

// name fills in the display names of machine hits (names.go).
func (s *searcher) name() error {
	var ids []string
	for _, h := range s.res.Hits {
		if h.Kind == HitHost || h.Kind == HitDPU {
			ids = append(ids, h.ID)
		}
	}
	names, err := s.c.MachineNames(s.ctx, ids)
	if err != nil {
		return err
	}
	for i := range s.res.Hits {
		if n, ok := names[s.res.Hits[i].ID]; ok {
			s.res.Hits[i].Name = n
		}
	}
	return nil
}

func uniq(xs ...string) []string {
	var out []string
	for _, x := range xs {
		dup := false
		for _, y := range out {
			dup = dup || x == y
		}
		if !dup {
			out = append(out, x)
		}
	}
	return out
}
