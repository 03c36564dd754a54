package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/database/dbtest"
)

// `ipledger pool allocate POOL --from-file FILE` sends the file as one bulk
// request (all or nothing): the request body form and the bare list both
// work, the table lists each owner's value in file order, and a refusal
// exits non-zero with the API's message naming the item.
func TestPoolAllocateFromFileCLI(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		srv, tok := emCLIServer(t, db)
		dir := t.TempDir()
		body := filepath.Join(dir, "owners.json")
		list := filepath.Join(dir, "list.json")
		bad := filepath.Join(dir, "bad.json")
		os.WriteFile(body, []byte(`{"allocations":[{"owner_type":"net","owner_id":"a"},{"owner_type":"net","owner_id":"b"}]}`), 0o600)
		os.WriteFile(list, []byte("\xef\xbb\xbf [{\"owner_type\":\"net\",\"owner_id\":\"c\"},{\"owner_type\":\"net\",\"owner_id\":\"a\"}]"), 0o600)
		os.WriteFile(bad, []byte(`[{"owner_type":"net","owner_id":"d"},{"owner_type":"net","owner_id":"d"}]`), 0o600)
		out, err := runCLI(t, srv, tok, "", "pool", "allocate", "vlan-id", "--from-file", body)
		if err != nil || !strings.Contains(out, "2 allocations held") {
			t.Fatalf("from file: %v\n%s", err, out)
		}
		out, err = runCLI(t, srv, tok, "", "--output", "json", "pool", "allocate", "vlan-id", "--from-file", list)
		if err != nil {
			t.Fatalf("bare list: %v\n%s", err, out)
		}
		var res struct{ Items []allocator.Allocation }
		if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Items) != 2 || *res.Items[0].OwnerID != "c" || *res.Items[1].OwnerID != "a" {
			t.Fatalf("bare list answer: %v\n%s", err, out)
		}
		first := strings.Fields(strings.Split(strings.TrimSpace(mustRun(t, srv, tok, "pool", "allocate", "vlan-id", "--from-file", body)), "\n")[1])[0]
		if first != res.Items[1].Value {
			t.Fatalf("owner a holds %s in the table, %s in the JSON answer", first, res.Items[1].Value)
		}
		_, err = runCLI(t, srv, tok, "", "pool", "allocate", "vlan-id", "--from-file", bad)
		if err == nil || !strings.Contains(err.Error(), "allocations[1].owner_id") {
			t.Fatalf("duplicate owner: want an error naming allocations[1].owner_id, got %v", err)
		}
		if _, err := runCLI(t, srv, tok, "", "pool", "allocate", "vlan-id", "--from-file", body, "--owner-id", "x"); err == nil {
			t.Fatal("--from-file with --owner-id: want an error")
		}
	})
}

func mustRun(t *testing.T, srv, tok string, args ...string) string {
	t.Helper()
	out, err := runCLI(t, srv, tok, "", args...)
	if err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	return out
}
