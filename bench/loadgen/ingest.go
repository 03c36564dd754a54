package main

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/ipledger/ipledger/bench/emfile"
)

// ingest sends client id's report n: the host and DPUs bench/emfile names
// for it. With -want-complete, a 2xx whose incomplete list is not empty
// (a DPU family left without a loopback) is a violation; every such
// answer is counted in the summary either way.
func (r *runner) ingest(ctx context.Context, cc *clientConn, id, n int, out *[]result) {
	dpus := make([]map[string]string, 0, r.c.dpus)
	for d := 0; d < r.c.dpus; d++ {
		dpus = append(dpus, map[string]string{"serial_number": emfile.IngestDPU(r.c.run, id, n, d)})
	}
	body, _ := json.Marshal(map[string]any{"bmc_mac_address": emfile.IngestMAC(r.c.run, id, n),
		"chassis_serial_number": emfile.IngestChassis(r.c.run, id, n), "dpus": dpus})
	res, b := r.send(ctx, cc, http.MethodPost, "/api/v1/site-explorer/reports", body, out)
	if res.status < 200 || res.status >= 300 {
		return
	}
	var a struct {
		Incomplete []json.RawMessage `json:"incomplete"`
	}
	if err := json.Unmarshal(b, &a); err != nil {
		r.violation("VIOLATION report %s answered %d with an unreadable body: %.200s", emfile.IngestChassis(r.c.run, id, n), res.status, b)
		return
	}
	if len(a.Incomplete) > 0 {
		r.incomplete.Add(1)
		if r.c.wantComplete {
			r.violation("VIOLATION report %s answered with %d incomplete families: %.300s", emfile.IngestChassis(r.c.run, id, n), len(a.Incomplete), b)
		}
	}
}
