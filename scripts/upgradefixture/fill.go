package main

import (
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/ipledger/ipledger/internal/upgrade"
)

// site fills a database through one build's REST API: the operator token
// for what operators do, the admin token for the rest.
type site struct {
	admin, ops upgrade.Client
	hooks      string // base URL of the webhook receiver
}

// call sends a request and fails unless the answer is one of want.
func call(c upgrade.Client, method, path string, body any, want ...int) (int, json.RawMessage) {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			die("%v", err)
		}
	}
	status, ans, err := c.Do(method, path, b)
	if err != nil {
		die("%s %s: %v", method, path, err)
	}
	for _, w := range want {
		if status == w {
			return status, ans
		}
	}
	die("%s %s: %d %s (want %v)", method, path, status, ans, want)
	return 0, nil
}

// supported tells whether the build serves a route: 404 and 405 say it
// does not.
func supported(status int) bool {
	return status != http.StatusNotFound && status != http.StatusMethodNotAllowed
}

type obj = map[string]any

// The BMC password and the webhook secrets of the fixtures; the secret
// grep (scripts/secret-grep.sh) looks for them in test output.
const (
	bmcPassword = "upgrade-fixture-bmc-pw"
	hookSecret  = "upgrade-fixture-hook-secret"
)

func (s *site) fill() {
	a, o := s.admin, s.ops
	// lo-ip first: a webhook's pool filter names it, and builds since
	// e25a0e0 refuse a filter naming a pool that does not exist. Its
	// pool.create event matches neither webhook's actions.
	call(a, http.MethodPost, "pools", obj{"name": "lo-ip", "type": "ipv4", "ranges": []obj{
		{"first": "10.0.0.1", "last": "10.0.0.40"}, {"first": "10.0.1.1", "last": "10.0.1.60", "auto_assign": false}}}, 201)
	// Webhooks next, so that they receive the events of everything
	// after them (where the build has webhooks).
	var hookOK, hookFail string
	if st, _, _ := a.Do(http.MethodGet, "webhooks", nil); supported(st) {
		_, b := call(a, http.MethodPost, "webhooks", obj{"name": "crm", "url": s.hooks + "/ok", "secret": hookSecret,
			"actions": []string{"allocation.*"}}, 201)
		hookOK = idOf(b)
		_, b = call(a, http.MethodPost, "webhooks", obj{"name": "lo-watch", "url": s.hooks + "/fail", "secret": hookSecret,
			"actions": []string{"allocation.create"}, "pools": []string{"lo-ip"}}, 201)
		hookFail = idOf(b)
	} else {
		log.Printf("no webhooks in this build")
	}

	// Pools of the four types (lo-ip above), with automatic and reserved
	// ranges.
	call(a, http.MethodPost, "pools", obj{"name": "lo-ip-v6", "type": "ipv6", "ranges": []obj{
		{"first": "fd00::1", "last": "fd00::ff"}, {"first": "fd00:1::1", "last": "fd00:1::ff", "auto_assign": false}}}, 201)
	call(a, http.MethodPost, "pools", obj{"name": "tenant-pfx", "type": "ipv6prefix", "delegate_prefix_len": 56, "ranges": []obj{
		{"first": "2001:db8::/56", "last": "2001:db8:0:ff00::/56"}}}, 201)
	call(a, http.MethodPost, "pools", obj{"name": "vlan", "type": "integer", "ranges": []obj{
		{"first": "100", "last": "199"}, {"first": "1000", "last": "1099", "auto_assign": false}}}, 201)
	call(a, http.MethodPost, "pools", obj{"name": "svc-vip", "type": "ipv4", "gateway": "192.168.10.1", "ranges": []obj{
		{"first": "192.168.10.10", "last": "192.168.10.20"}}}, 201)
	// A pool from a NICo pool file (TOML; end is exclusive there).
	toml := "[pools.asn]\ntype = \"integer\"\nranges = [{ start = \"64512\", end = \"64520\" }]\n"
	if st, b, err := a.DoType(http.MethodPost, "pools:load", "application/toml", []byte(toml)); err != nil || st != http.StatusOK {
		die("pools:load: %d %s %v", st, b, err)
	}
	call(o, http.MethodPost, "pools/asn/allocations", obj{"owner_type": "bgp", "owner_id": "spine-1"}, 201)
	// Grow a pool, then flip the new range to reserved.
	_, b := call(a, http.MethodPost, "pools/vlan/ranges", obj{"first": "200", "last": "249"}, 201)
	call(a, http.MethodPatch, "pools/vlan/ranges/"+idOf(b), obj{"auto_assign": false}, 200)

	// Allocations: automatic ones, explicit ones in reserved ranges, and
	// releases that leave holes.
	for _, p := range []struct {
		pool  string
		n     int
		owner string
	}{{"lo-ip", 8, "vm"}, {"lo-ip-v6", 3, "vm"}, {"tenant-pfx", 4, "tenant"}, {"vlan", 5, "net"}, {"svc-vip", 2, "lb"}} {
		for i := range p.n {
			call(o, http.MethodPost, "pools/"+p.pool+"/allocations", obj{"owner_type": p.owner, "owner_id": fmt.Sprintf("%s-%d", p.pool, i)}, 201)
		}
	}
	call(o, http.MethodPost, "pools/lo-ip/allocations", obj{"owner_type": "svc", "owner_id": "vip", "value": "10.0.1.50"}, 201)
	call(o, http.MethodPost, "pools/vlan/allocations", obj{"owner_type": "net", "owner_id": "ext", "value": "1000"}, 201)
	// The same request again is answered with the same allocation.
	call(o, http.MethodPost, "pools/vlan/allocations", obj{"owner_type": "net", "owner_id": "ext", "value": "1000"}, 200, 201)
	for _, r := range []struct{ pool, value, owner, id string }{
		{"lo-ip", "10.0.0.3", "vm", "lo-ip-2"}, {"lo-ip", "10.0.0.6", "vm", "lo-ip-5"},
		{"vlan", "101", "net", "vlan-1"}, {"tenant-pfx", "2001:db8:0:100::/56", "tenant", "tenant-pfx-1"},
	} {
		call(o, http.MethodDelete, "pools/"+r.pool+"/allocations/"+url.PathEscape(r.value)+"?owner_type="+r.owner+"&owner_id="+r.id, nil, 204)
	}
	if st, _, _ := o.Do(http.MethodPost, "pools/vlan/allocations:batch", []byte(`{"allocations":[{"owner_type":"net","owner_id":"batch-0"},{"owner_type":"net","owner_id":"batch-1"},{"owner_type":"net","owner_id":"batch-2","value":"1001"}]}`)); !supported(st) {
		log.Printf("no allocations:batch in this build")
	} else if st != http.StatusOK {
		die("allocations:batch: %d", st)
	}

	s.machines()

	if hookOK != "" {
		s.webhooks(hookOK, hookFail)
	}
}

// machines declares ExpectedMachines with DPU loopback reservations,
// ingests hosts and DPUs by site-explorer reports, and takes some out
// again: a decommission and delete, a force delete that quarantines.
func (s *site) machines() {
	a, o := s.admin, s.ops
	em := func(mac, chassis, name string, dpus []obj, extra obj) json.RawMessage {
		body := obj{"bmc_mac_address": mac, "bmc_username": "root", "bmc_password": bmcPassword, "chassis_serial_number": chassis,
			"metadata":      obj{"name": name, "description": "upgrade fixture", "labels": []obj{{"key": "rack", "value": name[:5]}}},
			"expected_dpus": dpus}
		for k, v := range extra {
			body[k] = v
		}
		_, b := call(o, http.MethodPost, "expected-machines", body, 201)
		return b
	}
	// MACs in the spellings people type: the build stores them canonical.
	em("0A:00:00:00:00:01", "CH-0001", "rack1-u01", []obj{
		{"serial_number": "DPU-A1", "loopback_ip": "10.0.1.1", "loopback_ip_v6": "fd00:1::1"},
		{"serial_number": "DPU-A2", "loopback_ip": "10.0.1.2", "loopback_ip_v6": "fd00:1::2"}},
		obj{"sku_id": "sku-a", "fallback_dpu_serial_numbers": []string{"DPU-A9"}})
	em("0a:00:00:00:00:02", "CH-0002", "rack1-u02", []obj{
		{"serial_number": "DPU-B1", "loopback_ip": "10.0.1.3"}, {"serial_number": "DPU-B2"}}, nil)
	em("0a-00-00-00-00-03", "CH-0003", "rack2-u03", []obj{
		{"serial_number": "DPU-C1", "loopback_ip": "10.0.1.4", "loopback_ip_v6": "fd00:1::4"}}, nil)
	em("0a:00:00:00:00:04", "CH-0004", "rack2-u04", []obj{
		{"serial_number": "DPU-D1", "loopback_ip": "10.0.1.5", "loopback_ip_v6": "fd00:1::5"}}, nil)
	gone := em("0a:00:00:00:00:05", "CH-0005", "rack3-u05", nil, nil)
	call(o, http.MethodDelete, "expected-machines/"+idOfKey(gone, "id"), nil, 204)
	// A replace and a merge patch.
	call(o, http.MethodPut, "expected-machines/0a:00:00:00:00:04", obj{"bmc_mac_address": "0a:00:00:00:00:04", "bmc_username": "admin",
		"chassis_serial_number": "CH-0004", "metadata": obj{"name": "rack2-u04b", "labels": []obj{{"key": "rack", "value": "rack2"}, {"key": "row", "value": "b"}}},
		"expected_dpus": []obj{{"serial_number": "DPU-D1", "loopback_ip": "10.0.1.5", "loopback_ip_v6": "fd00:1::5"}}}, 200)
	call(o, http.MethodPatch, "expected-machines/0a:00:00:00:00:02", obj{"metadata": obj{"description": "patched"}}, 200)

	report := func(mac, chassis string, dpus ...string) {
		var ds []obj
		for _, d := range dpus {
			// A DPU's own BMC MAC (upper case, as people type it), which
			// builds that know it store canonical; older ones ignore it.
			ds = append(ds, obj{"serial_number": d, "bmc_mac_address": fmt.Sprintf("0B:00:00:00:%02X:%02X", d[4], d[5])})
		}
		call(o, http.MethodPost, "site-explorer/reports", obj{"bmc_mac_address": mac, "chassis_serial_number": chassis, "dpus": ds}, 200)
	}
	report("0A:00:00:00:00:01", "CH-0001", "DPU-A1", "DPU-A2")
	report("0a:00:00:00:00:02", "CH-0002", "DPU-B1", "DPU-B2")
	report("0a:00:00:00:00:03", "CH-0003", "DPU-C1")
	report("0a:00:00:00:00:06", "CH-0006", "DPU-F1", "DPU-F2")
	report("0a:00:00:00:00:07", "CH-0007", "DPU-G1")
	report("0a:00:00:00:00:08", "CH-0008", "DPU-I1")
	report("0A:00:00:00:00:01", "CH-0001", "DPU-A1", "DPU-A2") // a repeat changes nothing
	call(o, http.MethodPost, "machines:discover", obj{"serial_number": "DPU-H1"}, 200)
	// A reservation edited after its DPU took the old value: pending.
	call(o, http.MethodPatch, "expected-machines/0a:00:00:00:00:01", obj{"expected_dpus": []obj{
		{"serial_number": "DPU-A1", "loopback_ip": "10.0.1.1", "loopback_ip_v6": "fd00:1::1"},
		{"serial_number": "DPU-A2", "loopback_ip": "10.0.1.9", "loopback_ip_v6": "fd00:1::2"}}}, 200)
	// Decommission and delete; force delete a ready host (its values go
	// to quarantine).
	call(o, http.MethodPost, "machines/"+hostID(o, "0a:00:00:00:00:07")+":decommission", nil, 200)
	call(o, http.MethodDelete, "machines/"+hostID(o, "0a:00:00:00:00:07"), nil, 204)
	call(a, http.MethodDelete, "machines/"+hostID(a, "0a:00:00:00:00:03")+"?force=true", nil, 204)
	call(a, http.MethodDelete, "machines/"+hostID(a, "0a:00:00:00:00:08")+"?force=true", nil, 204)
	call(o, http.MethodPost, "machines/"+hostID(o, "0a:00:00:00:00:06")+":decommission", nil, 200)
}

func hostID(c upgrade.Client, mac string) string {
	_, b := call(c, http.MethodGet, "machines/"+mac, nil, 200)
	return idOfKey(b, "machine_id")
}

// webhooks waits until every event reached the receiver that answers
// 200, redelivers one, and disables the webhook whose receiver answers
// 500 after it failed, so that nothing is in flight when the database is
// stored.
func (s *site) webhooks(ok, fail string) {
	a := s.admin
	pending := func(id string) int {
		raw, err := a.Walk("webhooks/" + id + "/deliveries?state=pending")
		if err != nil {
			die("%v", err)
		}
		var items []obj
		_ = json.Unmarshal(raw, &items)
		return len(items)
	}
	waitFor("every delivery of webhook "+ok+" delivered", func() bool { return pending(ok) == 0 })
	raw, err := a.Walk("webhooks/" + ok + "/deliveries")
	if err != nil {
		die("%v", err)
	}
	var ds []obj
	_ = json.Unmarshal(raw, &ds)
	if len(ds) == 0 {
		die("webhook received no deliveries")
	}
	call(a, http.MethodPost, fmt.Sprintf("webhooks/%s/deliveries/%v:redeliver", ok, ds[len(ds)-1]["delivery_id"]), nil, 200)
	waitFor("the redelivery delivered", func() bool { return pending(ok) == 0 })
	waitFor("a failed attempt of webhook "+fail, func() bool {
		raw, err := a.Walk("webhooks/" + fail + "/deliveries")
		if err != nil {
			die("%v", err)
		}
		var ds []obj
		_ = json.Unmarshal(raw, &ds)
		for _, d := range ds {
			if n, _ := d["attempts"].(float64); n > 0 {
				return true
			}
		}
		return false
	})
	call(a, http.MethodPatch, "webhooks/"+fail, obj{"enabled": false}, 200)
	// An attempt in flight when the webhook was disabled ends within the
	// receiver's answer; wait for the log to be still.
	last := ""
	waitFor("webhook "+fail+"'s log to settle", func() bool {
		raw, _ := a.Walk("webhooks/" + fail + "/deliveries")
		now := string(raw)
		still := now == last
		last = now
		time.Sleep(500 * time.Millisecond)
		return still
	})
}

func waitFor(what string, cond func() bool) {
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			die("no %s within 60 s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// nextWrites are the writes the test repeats with today's code on the
// stored database: one of each kind, and reads of what they changed.
func (s *site) nextWrites() []upgrade.Exchange {
	var out []upgrade.Exchange
	do := func(c upgrade.Client, method, path string, body any) {
		var b []byte
		if body != nil {
			b, _ = json.Marshal(body)
		}
		st, ans, err := c.Do(method, path, b)
		if err != nil {
			die("%s %s: %v", method, path, err)
		}
		if st >= 500 {
			die("%s %s: %d %s", method, path, st, ans)
		}
		e := upgrade.Exchange{Method: method, Path: path, Body: b, Status: st}
		if len(ans) > 0 && json.Valid(ans) {
			e.Answer = ans
		}
		out = append(out, e)
	}
	o, a := s.ops, s.admin
	for _, p := range []string{"lo-ip", "lo-ip-v6", "tenant-pfx", "vlan", "svc-vip"} {
		do(o, http.MethodPost, "pools/"+p+"/allocations", obj{"owner_type": "vm", "owner_id": "after-upgrade"})
	}
	do(o, http.MethodPost, "pools/vlan/allocations", obj{"owner_type": "net", "owner_id": "after-upgrade-1", "value": "1002"})
	do(o, http.MethodDelete, "pools/lo-ip/allocations/10.0.0.2?owner_type=vm&owner_id=lo-ip-1", nil)
	do(a, http.MethodPost, "pools/lo-ip/allocations/"+quarantined(a, "lo-ip")+":unquarantine", nil)
	do(o, http.MethodPost, "site-explorer/reports", obj{"bmc_mac_address": "0a:00:00:00:00:09", "chassis_serial_number": "CH-0009",
		"dpus": []obj{{"serial_number": "DPU-J1", "bmc_mac_address": "0b-00-00-00-4a-31"}}})
	// A host reported again with a DPU more, and a DPU's BMC MAC changed.
	do(o, http.MethodPost, "site-explorer/reports", obj{"bmc_mac_address": "0a:00:00:00:00:02", "chassis_serial_number": "CH-0002",
		"dpus": []obj{{"serial_number": "DPU-B1", "bmc_mac_address": "0b:00:00:00:42:99"}, {"serial_number": "DPU-B2"}, {"serial_number": "DPU-B3"}}})
	do(o, http.MethodPatch, "expected-machines/0a:00:00:00:00:04", obj{"metadata": obj{"name": "rack2-u04c"}})
	do(o, http.MethodPost, "expected-machines", obj{"bmc_mac_address": "0a:00:00:00:00:0a", "chassis_serial_number": "CH-0010",
		"metadata": obj{"name": "rack4-u10"}, "expected_dpus": []obj{{"serial_number": "DPU-K1", "loopback_ip": "10.0.1.10"}}})
	do(o, http.MethodDelete, "machines/"+hostID(o, "0a:00:00:00:00:06"), nil)
	for _, p := range []string{"pools/lo-ip", "pools/lo-ip/allocations", "pools/vlan", "dpu-bindings", "machines"} {
		raw, err := a.Walk(p)
		if err != nil {
			die("%v", err)
		}
		out = append(out, upgrade.Exchange{Method: http.MethodGet, Path: p, Status: http.StatusOK, Answer: raw})
	}
	return out
}

// quarantined is the first quarantined value of a pool.
func quarantined(c upgrade.Client, pool string) string {
	raw, err := c.Walk("pools/" + pool + "/allocations")
	if err != nil {
		die("%v", err)
	}
	var items []obj
	_ = json.Unmarshal(raw, &items)
	for _, it := range items {
		if it["state"] == "quarantined" {
			return fmt.Sprint(it["value"])
		}
	}
	die("pool %s holds no quarantined value", pool)
	return ""
}

func idOf(b json.RawMessage) string { return idOfKey(b, "id") }

func idOfKey(b json.RawMessage, key string) string {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m[key] == nil {
		die("no %q in %s", key, b)
	}
	return fmt.Sprint(m[key])
}

// receiver is the webhook receiver: /ok answers 200, /fail 500.
type receiver struct {
	Addr string
	srv  *http.Server
}

func startReceiver() *receiver {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		die("%v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "receiver down for the fixture", http.StatusInternalServerError)
	})
	r := &receiver{Addr: l.Addr().String(), srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}}
	go func() { _ = r.srv.Serve(l) }()
	return r
}

func (r *receiver) Close() { _ = r.srv.Close() }
