package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/internal/testkit"
	"github.com/ipledger/ipledger/internal/testkit/serverkit"
)

// `ipledger owner allocate OWNER_TYPE OWNER_ID --pool P[=VALUE] …` takes one
// value of each pool in one request (a table for people, the API's answer
// with --output json, the same values when run again); a refusal exits
// non-zero naming pools[i]; `ipledger owner release` gives everything
// back; `cni-ipam show` takes the owner the same way (and still by its
// flags); the feed shows every allocation and release with pool and value.
func TestOwnerCLI(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		s := serverkit.Start(t, db, serverkit.Options{Feed: true})
		srv, tok := s.URL, s.Admin
		for _, spec := range []allocator.PoolSpec{
			{Name: "pod-v4", Type: "ipv4", Gateway: "10.1.0.254", Ranges: []allocator.RangeSpec{
				{First: "10.1.0.1", Last: "10.1.0.3"}, {First: "10.1.0.100", Last: "10.1.0.110", AutoAssign: new(false)}}},
			{Name: "vlan", Type: "integer", Ranges: []allocator.RangeSpec{{First: "1", Last: "10"}}},
		} {
			if _, err := s.A.CreatePool(s.Ctx, spec); err != nil {
				t.Fatal(err)
			}
		}
		out := mustRun(t, srv, tok, "owner", "allocate", "endpoint", "pod-1", "--pool", "vlan", "--pool", "pod-v4=10.1.0.105")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "POOL VALUE SINCE" ||
			strings.Join(strings.Fields(lines[1])[:2], " ") != "vlan 1" || strings.Join(strings.Fields(lines[2])[:2], " ") != "pod-v4 10.1.0.105" {
			t.Fatalf("table:\n%s", out)
		}
		out = mustRun(t, srv, tok, "--output", "json", "owner", "allocate", "endpoint", "pod-1", "--pool", "vlan", "--pool", "pod-v4")
		var res struct{ Items []allocator.Allocation }
		if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Items) != 2 || res.Items[0].Value != "1" || res.Items[1].Value != "10.1.0.105" ||
			*res.Items[1].OwnerID != "pod-1" {
			t.Fatalf("json answer again: %v\n%s", err, out)
		}
		// cni-ipam show reads the owner as owner does, and by its flags.
		ipam := mustRun(t, srv, tok, "cni-ipam", "show", "endpoint", "pod-1")
		if strings.TrimSpace(ipam) != `{"type":"galactic-ipam","addresses":[{"address":"10.1.0.105/32","gateway":"10.1.0.254"}]}` {
			t.Fatalf("cni-ipam show: %s", ipam)
		}
		if byFlags := mustRun(t, srv, tok, "cni-ipam", "show", "--owner-type", "endpoint", "--owner-id", "pod-1"); byFlags != ipam {
			t.Fatalf("cni-ipam show by flags: %s, by arguments: %s", byFlags, ipam)
		}
		for _, args := range [][]string{
			{"cni-ipam", "show", "endpoint"},
			{"cni-ipam", "show", "endpoint", "pod-1", "--owner-type", "endpoint"},
			{"cni-ipam", "show"},
		} {
			if _, err := runCLI(t, srv, tok, "", args...); err == nil || !strings.Contains(err.Error(), "OWNER_TYPE OWNER_ID") {
				t.Fatalf("%v: want an error naming OWNER_TYPE OWNER_ID, got %v", args, err)
			}
		}
		// Refusals exit non-zero with the API's message, nothing allocated.
		for _, c := range []struct {
			args  []string
			words []string
		}{
			{[]string{"--pool", "vlan", "--pool", "nope"}, []string{"pools[1]", `"nope"`}},
			{[]string{"--pool", "vlan", "--pool", "pod-v4=10.1.0.105"}, []string{"pools[1].value", "10.1.0.105", "pod-1"}},
			{[]string{"--pool", "vlan", "--pool", "vlan=2"}, []string{"pools[1]", "already listed"}},
			{nil, []string{"--pool"}},
		} {
			_, err := runCLI(t, srv, tok, "", append([]string{"owner", "allocate", "endpoint", "pod-2"}, c.args...)...)
			for _, w := range c.words {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Fatalf("%v: want an error naming %s, got %v", c.args, w, err)
				}
			}
		}
		if _, err := runCLI(t, srv, tok, "", "owner", "allocate", "endpoint", "--pool", "vlan"); err == nil {
			t.Fatal("owner allocate without OWNER_ID: want an error")
		}
		if out := mustRun(t, srv, tok, "owner", "release", "endpoint", "pod-2"); strings.TrimSpace(out) != "endpoint/pod-2 holds no value now" {
			t.Fatalf("release of an owner holding nothing: %q", out)
		}
		if out := mustRun(t, srv, tok, "--output", "json", "owner", "release", "endpoint", "pod-1"); out != "" {
			t.Fatalf("release --output json printed %q", out)
		}
		if _, err := runCLI(t, srv, tok, "", "cni-ipam", "show", "endpoint", "pod-1"); err == nil || !strings.Contains(err.Error(), "not_found") {
			t.Fatalf("cni-ipam show after release: %v", err)
		}
		// The feed: each allocation and release of the owner, with its
		// pool and value.
		c, err := (&clientFlags{server: srv, token: tok, output: "table"}).client(io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		testkit.WaitFor(t, 30*time.Second, func() bool {
			var page struct {
				Items []struct{ Action, Pool, Value string }
			}
			q := url.Values{"after": {"0"}, "action": {"allocation.*"}}
			if _, err := c.call("GET", "/api/v1/events?"+q.Encode(), nil, "", nil, &page); err != nil {
				t.Fatal(err)
			}
			got = got[:0]
			for _, e := range page.Items {
				got = append(got, fmt.Sprint(e.Action, " ", e.Pool, " ", e.Value))
			}
			return len(got) == 4
		}, "four allocation events in the feed")
		want := "[allocation.create vlan 1 allocation.create pod-v4 10.1.0.105 allocation.release pod-v4 10.1.0.105 allocation.release vlan 1]"
		if fmt.Sprint(got) != want {
			t.Fatalf("feed %v, want %s", got, want)
		}
	})
}
