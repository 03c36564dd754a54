// Command loadgen is ipledger's load generator for the benchmarks of
// docs/benchmarks.md and the reliability scripts of docs/reliability.md. It
// drives the REST API of one or more `ipledger serve` processes with a
// fixed number of concurrent clients and prints one JSON summary line:
// requests, answers by status and error code, throughput (requests per
// second of wall time) and latency percentiles in milliseconds.
//
// Modes:
//
//	allocate  POST /api/v1/pools/{pool}/allocations with a fresh owner per
//	          request (owner_type "bench", owner_id "<run>-<client>-<n>");
//	          the pool is -pool, or one of -pools chosen per request.
//	get       GET each of -paths in turn (read latency of pool pages,
//	          allocation pages, …).
//	walk      page through GET /api/v1/pools/{pool}/allocations following
//	          next_cursor until the last page, -clients walkers at once.
//	ingest    POST /api/v1/site-explorer/reports for a fresh host with
//	          -dpus DPUs per request (serials "<run>-<client>-<n>-<d>",
//	          BMC MAC derived from run, client and n: see bench/emfile).
//
// Each client numbers its requests n from -first. With -count the run
// sends exactly that many requests, each client a fixed share (bench/emfile
// ClientShare), so the hosts an ingest run reports are known in advance
// (bench/emgen -ingest-run declares them); -requests instead stops when
// that many were sent by whichever clients were fastest. With -slice, a
// JSON line per slice of that many finished requests (throughput and
// latency of the slice alone) precedes the summary.
//
// With -retry, a request that got no answer, a 503 or a transport error is
// sent again for the same owner until it gets a definite answer (allocation
// is idempotent by owner, so a retry after a lost answer returns the value
// the first attempt committed). Every acknowledged (2xx) allocation is
// appended to -acked as "pool<TAB>value<TAB>owner_type<TAB>owner_id"; an
// owner acknowledged twice with two different values is a violation.
//
// Exit status: 0 when the run had no violation, 1 otherwise. Violations:
// any 5xx other than 503, a request without an answer within -timeout (a
// hang; dialling counts, and a request in flight when -duration ends is
// awaited and counted), a transport error or 503 when -allow-unavailable
// is not set, a 4xx when -allow-4xx is not set, a 1xx or 3xx final answer,
// an allocation 2xx without a value or for another pool or owner than
// asked, an owner acknowledged with two values, with -want-complete a
// report answered with a non-empty incomplete list, a run without any
// success.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ipledger/ipledger/bench/emfile"
)

type config struct {
	servers          []string
	token            string
	mode             string
	clients          int
	duration         time.Duration
	requests         int64
	count            int
	first            int
	slice            int
	wantComplete     bool
	cpu              string
	pools            []string
	paths            []string
	run              string
	timeout          time.Duration
	retry            bool
	allowUnavailable bool
	allow4xx         bool
	acked            string
	dpus             int
	label            string
	pageLimit        int
	cookie           string
}

// result is one finished request.
type result struct {
	d      time.Duration
	status int // 0: transport error or timeout
	code   string
	hang   bool
}

func main() {
	var c config
	var servers, pools, paths string
	flag.StringVar(&servers, "servers", "http://127.0.0.1:8080", "comma-separated base URLs; client i uses server i mod n")
	flag.StringVar(&c.token, "token", os.Getenv("IPLEDGER_TOKEN"), "bearer token (env IPLEDGER_TOKEN)")
	flag.StringVar(&c.mode, "mode", "allocate", "allocate, get, walk or ingest")
	flag.IntVar(&c.clients, "clients", 8, "concurrent clients")
	flag.DurationVar(&c.duration, "duration", 10*time.Second, "how long to run (0: until -requests or -count)")
	flag.Int64Var(&c.requests, "requests", 0, "stop after this many requests in total (0: no limit)")
	flag.IntVar(&c.count, "count", 0, "send exactly this many requests, each client a fixed share (0: no limit); -duration then defaults to 0")
	flag.IntVar(&c.first, "first", 0, "number of each client's first request (owner ids, ingest hosts and serials)")
	flag.IntVar(&c.slice, "slice", 0, "print a JSON line per slice of this many finished requests (0: none)")
	flag.StringVar(&c.cpu, "cpu", "", "comma-separated NAME=PID: report the CPU time of these processes and their children per slice and in all (Linux)")
	flag.BoolVar(&c.wantComplete, "want-complete", false, "ingest mode: a report answered with a non-empty incomplete list is a violation")
	flag.StringVar(&pools, "pools", "bench", "comma-separated pools; a NAME%N entry expands to NAME-0 … NAME-(N-1)")
	flag.StringVar(&paths, "paths", "", "get mode: comma-separated paths, requested in turn")
	flag.StringVar(&c.run, "run", "", "run id used in owner ids and serials (default: time based)")
	flag.DurationVar(&c.timeout, "timeout", 10*time.Second, "a request without an answer after this long (dialling included) is a hang; 0: no limit")
	flag.BoolVar(&c.retry, "retry", false, "retry a request that got no definite answer (transport error, 503)")
	flag.BoolVar(&c.allowUnavailable, "allow-unavailable", false, "transport errors and 503 are expected (kill / restart tests)")
	flag.BoolVar(&c.allow4xx, "allow-4xx", false, "4xx answers are not violations (e.g. pool_exhausted)")
	flag.StringVar(&c.acked, "acked", "", "append every acknowledged allocation to this file")
	flag.IntVar(&c.dpus, "dpus", 2, "ingest mode: DPUs per host")
	flag.StringVar(&c.label, "label", "", "label copied into the summary")
	flag.IntVar(&c.pageLimit, "limit", 1000, "walk mode: page size")
	flag.StringVar(&c.cookie, "cookie", "", "Cookie header to send (console pages: the session cookie from POST /login)")
	flag.Parse()
	if c.count > 0 && !flagSet("duration") {
		c.duration = 0
	}
	c.servers = splitList(servers)
	c.pools = expandPools(splitList(pools))
	c.paths = splitList(paths)
	if c.run == "" {
		c.run = fmt.Sprintf("r%x", time.Now().UnixNano()&0xffffffffff)
	}
	if c.clients < 1 || len(c.servers) == 0 || (c.duration <= 0 && c.requests <= 0 && c.count <= 0) {
		fmt.Fprintln(os.Stderr, "loadgen: need -clients ≥ 1, -servers, and -duration, -requests or -count")
		os.Exit(2)
	}
	if c.count > 0 && c.requests > 0 || c.count < 0 || c.first < 0 || c.slice < 0 {
		fmt.Fprintln(os.Stderr, "loadgen: -count and -requests exclude each other; -count, -first and -slice are ≥ 0")
		os.Exit(2)
	}
	if c.mode == "get" && len(c.paths) == 0 {
		fmt.Fprintln(os.Stderr, "loadgen: get mode needs -paths")
		os.Exit(2)
	}
	for _, p := range c.paths {
		if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, " #\r\n") {
			fmt.Fprintf(os.Stderr, "loadgen: -paths entry %q: want an absolute path with an optional query, e.g. /api/v1/pools?limit=10\n", p)
			os.Exit(2)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	s, err := run(ctx, c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(2)
	}
	out, _ := json.Marshal(s)
	fmt.Println(string(out))
	if len(s.Violations) > 0 {
		os.Exit(1)
	}
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func expandPools(in []string) []string {
	var out []string
	for _, p := range in {
		name, n, ok := strings.Cut(p, "%")
		if !ok {
			out = append(out, p)
			continue
		}
		var k int
		fmt.Sscanf(n, "%d", &k)
		for i := 0; i < k; i++ {
			out = append(out, fmt.Sprintf("%s-%d", name, i))
		}
	}
	return out
}

type runner struct {
	c              config
	issued         atomic.Int64
	retries        atomic.Int64
	pages          atomic.Int64
	items          atomic.Int64
	ackMu          sync.Mutex
	ackW           *bufio.Writer
	ackN           int64
	incomplete     atomic.Int64
	slices         *slicer
	owners         map[string]string
	errMu          sync.Mutex
	errs           []string // the first notes (transport errors, 4xx/5xx answers)
	violations     []string
	moreViolations int
}

func run(ctx context.Context, c config) (*Summary, error) {
	r := &runner{c: c, owners: map[string]string{}}
	cpu, err := parseCPU(c.cpu)
	if err != nil {
		return nil, err
	}
	if c.slice > 0 {
		r.slices = &slicer{size: c.slice, label: c.label, w: os.Stdout, cpu: cpu}
	}
	for _, base := range c.servers {
		if _, err := newClientConn(base, c); err != nil {
			return nil, err
		}
	}
	if c.acked != "" {
		f, err := os.OpenFile(c.acked, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r.ackW = bufio.NewWriter(f)
		defer r.ackW.Flush()
	}
	if c.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.duration)
		defer cancel()
	}
	results := make([][]result, c.clients)
	var wg sync.WaitGroup
	cpu0 := cpu.read()
	start := time.Now()
	r.slices.begin(start)
	for i := 0; i < c.clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i] = r.client_(ctx, i)
		}(i)
	}
	wg.Wait()
	elapsed := time.Since(start)
	r.slices.flush(time.Now())
	s := r.summarize(results, elapsed)
	s.CPUms = cpuSince(cpu0, cpu.read())
	return s, nil
}

// client_ is one client's loop.
func (r *runner) client_(ctx context.Context, id int) []result {
	cc, _ := newClientConn(r.c.servers[id%len(r.c.servers)], r.c)
	defer cc.close()
	rng := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
	var out []result
	share := -1
	if r.c.count > 0 {
		share = emfile.ClientShare(r.c.count, r.c.clients, id)
	}
	for n := r.c.first; ; n++ {
		if ctx.Err() != nil || share >= 0 && n >= r.c.first+share {
			return out
		}
		if r.c.requests > 0 && r.issued.Add(1) > r.c.requests {
			return out
		}
		switch r.c.mode {
		case "allocate":
			pool := r.c.pools[rng.IntN(len(r.c.pools))]
			owner := fmt.Sprintf("%s-%d-%d", r.c.run, id, n)
			body, _ := json.Marshal(map[string]string{"owner_type": "bench", "owner_id": owner})
			path := "/api/v1/pools/" + url.PathEscape(pool) + "/allocations"
			res, respBody := r.send(ctx, cc, http.MethodPost, path, body, &out)
			if res.status >= 200 && res.status < 300 {
				r.ack(pool, owner, respBody)
			}
		case "ingest":
			r.ingest(ctx, cc, id, n, &out)
		case "get":
			p := r.c.paths[(id+n)%len(r.c.paths)]
			r.send(ctx, cc, http.MethodGet, p, nil, &out)
		case "walk":
			pool := r.c.pools[id%len(r.c.pools)]
			cursor := ""
			for ctx.Err() == nil {
				q := url.Values{"limit": {fmt.Sprint(r.c.pageLimit)}}
				if cursor != "" {
					q.Set("cursor", cursor)
				}
				res, b := r.send(ctx, cc, http.MethodGet, "/api/v1/pools/"+url.PathEscape(pool)+"/allocations?"+q.Encode(), nil, &out)
				if res.status != http.StatusOK {
					break
				}
				var page struct {
					Items      []json.RawMessage `json:"items"`
					NextCursor string            `json:"next_cursor"`
				}
				if err := json.Unmarshal(b, &page); err != nil {
					r.note("walk: bad page: %v", err)
					break
				}
				r.pages.Add(1)
				r.items.Add(int64(len(page.Items)))
				if page.NextCursor == "" {
					break
				}
				cursor = page.NextCursor
			}
			return out
		}
	}
}

// send performs one logical request, retrying it with -retry while it gets
// no definite answer, and records each attempt.
func (r *runner) send(ctx context.Context, cc *clientConn, method, path string, body []byte, out *[]result) (result, []byte) {
	for {
		// A request in flight when the run ends is awaited (up to
		// -timeout) and counted like any other: a hang or a transport
		// error after the end is still one.
		res, b := r.once(cc, method, path, body)
		*out = append(*out, res)
		r.slices.add(res)
		definite := res.status != 0 && res.status != http.StatusServiceUnavailable
		if definite || !r.c.retry {
			return res, b
		}
		r.retries.Add(1)
		select {
		case <-ctx.Done():
			return res, nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// once sends one request on the client's connection. A request in flight
// when the run's duration ends is awaited up to -timeout.
func (r *runner) once(cc *clientConn, method, path string, body []byte) (result, []byte) {
	t0 := time.Now()
	status, b, err := cc.do(method, path, body)
	d := time.Since(t0)
	if err != nil {
		var ne net.Error
		hang := errors.As(err, &ne) && ne.Timeout() && r.c.timeout > 0 && d >= r.c.timeout-50*time.Millisecond
		r.note("%s %s: %v", method, path, err)
		return result{d: d, hang: hang}, nil
	}
	res := result{d: d, status: status}
	if status >= 400 {
		var e struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		res.code = e.Error.Code
		if status != http.StatusServiceUnavailable || !r.c.allowUnavailable {
			r.note("%s %s: %d %s", method, path, status, strings.TrimSpace(string(b)))
		}
	}
	return res, b
}

// ack records an acknowledged (2xx) allocation. The answer must be the
// allocation that was asked for: a value, the requested pool and the
// requested owner; anything else is a violation (an answer read for the
// wrong request, or a server answering with someone else's value).
func (r *runner) ack(pool, owner string, body []byte) {
	var a struct {
		Pool      string `json:"pool"`
		Value     string `json:"value"`
		OwnerType string `json:"owner_type"`
		OwnerID   string `json:"owner_id"`
	}
	if err := json.Unmarshal(body, &a); err != nil || a.Value == "" {
		r.violation("VIOLATION acknowledged allocation for %s/bench/%s has no value: %.200s", pool, owner, body)
		return
	}
	if a.Pool != pool || a.OwnerType != "bench" || a.OwnerID != owner {
		r.violation("VIOLATION asked pool %s for bench/%s, acknowledged with %s for %s/%s of pool %s", pool, owner, a.Value, a.OwnerType, a.OwnerID, a.Pool)
		return
	}
	r.ackMu.Lock()
	defer r.ackMu.Unlock()
	key := pool + "\t" + a.OwnerType + "\t" + a.OwnerID
	if prev, ok := r.owners[key]; ok && prev != a.Value {
		r.violation("VIOLATION owner %s/%s of pool %s acknowledged with %s and then %s", a.OwnerType, a.OwnerID, pool, prev, a.Value)
	}
	r.owners[key] = a.Value
	r.ackN++
	if r.ackW != nil {
		fmt.Fprintf(r.ackW, "%s\t%s\t%s\t%s\n", pool, a.Value, a.OwnerType, a.OwnerID)
	}
}

// violation records a violation: the first 20 with their text, the rest
// counted.
func (r *runner) violation(format string, args ...any) {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	if len(r.violations) < 20 {
		r.violations = append(r.violations, fmt.Sprintf(format, args...))
	} else {
		r.moreViolations++
	}
}

func (r *runner) note(format string, args ...any) {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	if len(r.errs) < 5 {
		r.errs = append(r.errs, fmt.Sprintf(format, args...))
	}
}
