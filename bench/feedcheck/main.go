// Command feedcheck proves and measures ipledger's change feed
// (docs/feed.md, docs/reliability.md).
//
// Mode order (the default): -writers goroutines allocate and release on
// -pools through the -servers (writer i starts on server i mod n and
// moves to the next server when one stops answering; allocation and
// release are idempotent, so a retried request commits at most once)
// until -events writes were acknowledged, while one reader pages through
// GET /api/v1/events?after=R&limit=1000&wait=5s, resuming after every
// page from its next_after on the next server in turn. At the end it
// reads the database (-database) and checks that the reader saw every
// stored event exactly once, in strictly increasing revision order, that
// the revisions are 1..N without a gap, and that every acknowledged
// allocation's event is among them. While it runs it writes the number of
// acknowledged writes to -progress, so a script can kill a server at a
// chosen point.
//
// Mode latency: one writer allocates on the first server every -every;
// long-poll readers on every server record when each event reaches them;
// it prints the wake-up latency from the writer's answer (p50/p90/p99/max)
// per server, and the same for an SSE reader on the last server.
//
// One JSON line of results on stdout; exit status 1 on any violation.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	servers  = flag.String("servers", "http://127.0.0.1:18081,http://127.0.0.1:18082", "comma-separated server URLs")
	token    = flag.String("token", os.Getenv("IPLEDGER_TOKEN"), "admin token")
	mode     = flag.String("mode", "order", "order or latency")
	writers  = flag.Int("writers", 8, "concurrent writers (order)")
	poolsF   = flag.String("pools", "fa,fb,fc", "pools to write to (created if absent, integer)")
	events   = flag.Int("events", 100000, "acknowledged writes to make (order)")
	database = flag.String("database", "", "PostgreSQL URL for the final check (order)")
	progress = flag.String("progress", "", "file receiving the number of acknowledged writes (order)")
	samples  = flag.Int("samples", 300, "events to time (latency)")
	every    = flag.Duration("every", 20*time.Millisecond, "interval between the writer's allocations (latency)")
)

var client = &http.Client{Timeout: 70 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

func call(method, url, body string, out any) (int, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+*token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %w: %s", method, url, err, b)
		}
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return resp.StatusCode, nil
}

// retry calls until a definite answer, moving to the next server after a
// transport error or a 503. retried reports whether an earlier attempt
// went unanswered, so it may have committed before its server died.
func retry(srv []string, start int, method, path, body string, out any) (code int, retried bool, err error) {
	for i := start; ; i++ {
		code, err := call(method, srv[i%len(srv)]+path, body, out)
		if err == nil || (code != 0 && code != 503) {
			return code, retried, err
		}
		retried = retried || code == 0
		time.Sleep(50 * time.Millisecond)
	}
}

// release is a release whose first attempt went unanswered.
type release struct{ pool, value, owner string }

type event struct {
	Revision int64  `json:"revision"`
	Action   string `json:"action"`
	Pool     string `json:"pool"`
	Value    string `json:"value"`
	ObjectID string `json:"object_id"`
}

type page struct {
	Items     []event `json:"items"`
	NextAfter int64   `json:"next_after"`
}

func main() {
	flag.Parse()
	srv := strings.Split(*servers, ",")
	pools := strings.Split(*poolsF, ",")
	for i, p := range pools {
		body := fmt.Sprintf(`{"name":%q,"type":"integer","ranges":[{"first":"%d","last":"%d"}]}`, p, i*10000000+1, i*10000000+9999999)
		if code, err := call("POST", srv[0]+"/api/v1/pools", body, nil); err != nil && code != 409 {
			fail("create pool %s: %v", p, err)
		}
	}
	switch *mode {
	case "order":
		order(srv, pools)
	case "latency":
		latency(srv, pools[0])
	default:
		fail("unknown -mode %q", *mode)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "feedcheck: "+format+"\n", args...)
	os.Exit(1)
}

func order(srv, pools []string) {
	var acked atomic.Int64
	var mu sync.Mutex
	allocated := map[string]bool{} // pool/value of acknowledged allocations
	var unanswered []release       // releases whose answer was lost
	start := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < *writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			pool := pools[w%len(pools)]
			for n := 0; acked.Load() < int64(*events); n++ {
				owner := fmt.Sprintf("w%d-%d", w, n)
				var a struct{ Value string }
				if _, _, err := retry(srv, w, "POST", "/api/v1/pools/"+pool+"/allocations", fmt.Sprintf(`{"owner_type":"feed","owner_id":%q}`, owner), &a); err != nil {
					fail("allocate: %v", err)
				}
				mu.Lock()
				allocated[pool+"/"+a.Value] = true
				mu.Unlock()
				acked.Add(1)
				if n%3 == 0 {
					code, retried, err := retry(srv, w, "DELETE", "/api/v1/pools/"+pool+"/allocations/"+a.Value+"?owner_type=feed&owner_id="+owner, "", nil)
					switch {
					case err != nil && retried && (code == 404 || code == 409):
						// The unanswered attempt released the value and
						// another writer may hold it now; the final check
						// looks for that release in the stored events.
						mu.Lock()
						unanswered = append(unanswered, release{pool, a.Value, owner})
						mu.Unlock()
					case err != nil:
						fail("release: %v", err)
					}
					acked.Add(1)
				}
			}
		}(w)
	}
	if *progress != "" {
		go func() {
			for {
				os.WriteFile(*progress+".tmp", []byte(fmt.Sprint(acked.Load())), 0o644)
				os.Rename(*progress+".tmp", *progress)
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
	}
	var (
		after, last int64
		seen        = map[int64]bool{}
		seenAlloc   = map[string]int{}
		pages       int
		violations  []string
	)
	readPage := func(wait string) int {
		var p page
		if _, _, err := retry(srv, pages, "GET", fmt.Sprintf("/api/v1/events?after=%d&limit=1000&wait=%s", after, wait), "", &p); err != nil {
			fail("read feed: %v", err)
		}
		pages++
		for _, e := range p.Items {
			if e.Revision <= last || seen[e.Revision] {
				violations = append(violations, fmt.Sprintf("revision %d after %d", e.Revision, last))
			}
			seen[e.Revision], last = true, e.Revision
			if e.Action == "allocation.create" {
				seenAlloc[e.Pool+"/"+e.Value]++
			}
		}
		if p.NextAfter < after {
			violations = append(violations, fmt.Sprintf("next_after %d below after %d", p.NextAfter, after))
		}
		after = p.NextAfter
		return len(p.Items)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
loop:
	for {
		select {
		case <-done:
			break loop
		default:
			readPage("2s")
		}
	}
	wrote := time.Since(start)
	close(stop)
	conn, err := pgx.Connect(context.Background(), *database)
	if err != nil {
		fail("connect %s: %v", *database, err)
	}
	var total, maxRev, unnumbered int64
	for deadline := time.Now().Add(30 * time.Second); ; {
		if err := conn.QueryRow(context.Background(), `SELECT COUNT(*), COALESCE(MAX(revision), 0), COUNT(*) FILTER (WHERE revision IS NULL) FROM audit_events`).Scan(&total, &maxRev, &unnumbered); err != nil {
			fail("count events: %v", err)
		}
		for readPage("0s") > 0 {
		}
		if unnumbered == 0 && int64(len(seen)) >= total || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if int64(len(seen)) != total || maxRev != total || unnumbered != 0 {
		violations = append(violations, fmt.Sprintf("reader saw %d events; database holds %d, max revision %d, %d without one", len(seen), total, maxRev, unnumbered))
	}
	rows, err := conn.Query(context.Background(), `SELECT revision FROM audit_events ORDER BY revision`)
	if err != nil {
		fail("%v", err)
	}
	var missing int
	for rows.Next() {
		var r int64
		rows.Scan(&r)
		if !seen[r] {
			missing++
		}
	}
	if missing > 0 {
		violations = append(violations, fmt.Sprintf("%d stored events never read", missing))
	}
	for _, r := range unanswered {
		var n int64
		if err := conn.QueryRow(context.Background(), `SELECT COUNT(*) FROM audit_events WHERE action = 'allocation.release' AND object_id = $1 AND before_json::jsonb->>'owner_id' = $2`,
			r.pool+"/"+r.value, r.owner).Scan(&n); err != nil {
			fail("look up release of %s/%s: %v", r.pool, r.value, err)
		}
		if n != 1 {
			violations = append(violations, fmt.Sprintf("release of %s/%s by %s went unanswered, was refused on retry, and %d release events are stored", r.pool, r.value, r.owner, n))
		}
	}
	lost := 0
	for k := range allocated {
		if seenAlloc[k] == 0 {
			lost++
		}
	}
	if lost > 0 {
		violations = append(violations, fmt.Sprintf("%d acknowledged allocations without their event in the feed", lost))
	}
	out, _ := json.Marshal(map[string]any{"mode": "order", "writers": *writers, "servers": len(srv), "pools": len(pools),
		"acknowledged_writes": acked.Load(), "events_stored": total, "events_read": len(seen), "max_revision": maxRev,
		"pages": pages, "unanswered_releases": len(unanswered), "write_seconds": wrote.Seconds(), "events_per_second": float64(total) / wrote.Seconds(),
		"violations": violations})
	fmt.Println(string(out))
	if len(violations) > 0 {
		os.Exit(1)
	}
}

// latency measures how long after the writer's answer each reader gets
// the event.
func latency(srv []string, pool string) {
	var head page
	if _, err := call("GET", srv[0]+"/api/v1/events?after=0&limit=1", "", &head); err != nil {
		fail("%v", err)
	}
	// Start from the head.
	after := head.NextAfter
	for {
		var p page
		call("GET", fmt.Sprintf("%s/api/v1/events?after=%d&limit=1000", srv[0], after), "", &p)
		if len(p.Items) == 0 {
			after = p.NextAfter
			break
		}
		after = p.NextAfter
	}
	var mu sync.Mutex
	answered := map[string]time.Time{}              // object id → writer's answer
	got := make([]map[string]time.Time, len(srv)+1) // reader → object id → arrival
	for i := range got {
		got[i] = map[string]time.Time{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i, s := range srv {
		wg.Add(1)
		go func(i int, s string) {
			defer wg.Done()
			a := after
			for ctx.Err() == nil {
				var p page
				if _, err := call("GET", fmt.Sprintf("%s/api/v1/events?after=%d&wait=10s&action=allocation.create&pool=%s", s, a, pool), "", &p); err != nil {
					continue
				}
				now := time.Now()
				mu.Lock()
				for _, e := range p.Items {
					got[i][e.ObjectID] = now
				}
				mu.Unlock()
				a = p.NextAfter
			}
		}(i, s)
	}
	// An SSE reader on the last server.
	wg.Add(1)
	go func() {
		defer wg.Done()
		req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/api/v1/events:stream?after=%d&action=allocation.create&pool=%s", srv[len(srv)-1], after, pool), nil)
		req.Header.Set("Authorization", "Bearer "+*token)
		resp, err := (&http.Client{}).Do(req)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		r := bufio.NewReader(resp.Body)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
				var e event
				json.Unmarshal(d, &e)
				mu.Lock()
				got[len(srv)][e.ObjectID] = time.Now()
				mu.Unlock()
			}
		}
	}()
	time.Sleep(300 * time.Millisecond)
	for n := 0; n < *samples; n++ {
		var a struct{ Value string }
		if _, err := call("POST", srv[0]+"/api/v1/pools/"+pool+"/allocations", fmt.Sprintf(`{"owner_type":"lat","owner_id":"l%d-%d"}`, time.Now().UnixNano(), n), &a); err != nil {
			fail("allocate: %v", err)
		}
		mu.Lock()
		answered[pool+"/"+a.Value] = time.Now()
		mu.Unlock()
		time.Sleep(*every)
	}
	time.Sleep(2 * time.Second)
	cancel()
	mu.Lock()
	defer mu.Unlock()
	res := map[string]any{"mode": "latency", "samples": *samples}
	for i := range got {
		name := fmt.Sprintf("longpoll_server%d", i+1)
		if i == len(srv) {
			name = fmt.Sprintf("sse_server%d", len(srv))
		}
		var ds []float64
		missing := 0
		for k, t0 := range answered {
			t1, ok := got[i][k]
			if !ok {
				missing++
				continue
			}
			ds = append(ds, float64(t1.Sub(t0).Microseconds())/1000)
		}
		sort.Float64s(ds)
		q := func(p float64) float64 {
			if len(ds) == 0 {
				return -1
			}
			return ds[min(len(ds)-1, int(p*float64(len(ds))))]
		}
		res[name] = map[string]any{"p50_ms": q(0.5), "p90_ms": q(0.9), "p99_ms": q(0.99), "max_ms": q(1), "missing": missing}
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
}
