package webhook

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/internal/testkit/sitekit"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/txn"
)

// A pool filter naming a pool that does not exist is refused (422
// invalid naming pools[i] and the value) on create and on change, and
// nothing is stored or changed: a misspelt pool makes a webhook that
// never fires.
func TestWebhookRefusesUnknownPool(t *testing.T) {
	t.Parallel()
	hookEach(t, func(t *testing.T, f *fnd) {
		f.Pool("wp", "integer", 0, sitekit.Range("1", "100", true))
		wantInvalid := func(what string, err error, field, value string) {
			t.Helper()
			var ke *fault.Error
			if !errors.As(err, &ke) || ke.Code != fault.CodeInvalid || ke.Field != field || !strings.Contains(ke.Message, strconv.Quote(value)) {
				t.Errorf("%s: got %v, want invalid naming %s and %q", what, err, field, value)
			}
		}
		_, err := f.hooks.CreateWebhook(f.Ctx, WebhookSpec{Name: "bad", URL: "https://example.com/h", Secret: testSecret,
			Actions: []string{"allocation.*"}, Pools: []string{"wp", "wq"}})
		wantInvalid("create", err, "pools[1]", "wq")
		if n := f.Count(&models.Webhook{}, "name = ?", "bad"); n != 0 {
			t.Errorf("a refused webhook was stored (%d)", n)
		}
		events := f.Count(&models.AuditEvent{}, "object_type = ?", "webhook")
		w := f.mkHook("https://example.com/h", []string{"allocation.*"}, []string{"wp"})
		_, err = f.hooks.PatchWebhook(f.Ctx, w.ID, WebhookPatch{PoolsSet: true, Pools: []string{"nope", "wp"}}, txn.IfMatch{})
		wantInvalid("patch", err, "pools[0]", "nope")
		got, err := f.hooks.GetWebhook(f.Ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != w.Version || got.Pools == nil || strings.Join(*got.Pools, ",") != "wp" {
			t.Errorf("a refused change changed the webhook: %+v", got)
		}
		if n := f.Count(&models.AuditEvent{}, "object_type = ?", "webhook"); n != events+1 {
			t.Errorf("webhook events: %d, want the one create (%d)", n, events+1)
		}
	})
}

// A webhook whose filtered pool has gone (ipledger never deletes a pool;
// SQL or a restore can) keeps its filter and stays editable: a change of
// other fields, or one that sends the same pools back (the console's edit
// form does), is accepted; adding another unknown pool is still refused.
func TestWebhookKeepsAPoolThatHasGone(t *testing.T) {
	t.Parallel()
	hookEach(t, func(t *testing.T, f *fnd) {
		f.Pool("wp", "integer", 0, sitekit.Range("1", "100", true))
		f.Pool("wr", "integer", 0, sitekit.Range("1", "100", true))
		w := f.mkHook("https://example.com/h", []string{"allocation.*"}, []string{"wp", "wr"})
		if err := f.DB.Exec(`DELETE FROM pool_ranges WHERE pool_id IN (SELECT id FROM pools WHERE name = 'wr')`).Error; err != nil {
			t.Fatal(err)
		}
		if err := f.DB.Exec(`DELETE FROM pools WHERE name = 'wr'`).Error; err != nil {
			t.Fatal(err)
		}
		url := "https://example.com/other"
		if _, err := f.hooks.PatchWebhook(f.Ctx, w.ID, WebhookPatch{URL: &url}, txn.IfMatch{}); err != nil {
			t.Fatalf("change the URL: %v", err)
		}
		got, err := f.hooks.PatchWebhook(f.Ctx, w.ID, WebhookPatch{URL: &url, PoolsSet: true, Pools: []string{"wp", "wr"}}, txn.IfMatch{})
		if err != nil {
			t.Fatalf("send the same pools back: %v", err)
		}
		if got.Pools == nil || strings.Join(*got.Pools, ",") != "wp,wr" {
			t.Errorf("pools after the edit: %v", got.Pools)
		}
		_, err = f.hooks.PatchWebhook(f.Ctx, w.ID, WebhookPatch{PoolsSet: true, Pools: []string{"wp", "wr", "ws"}}, txn.IfMatch{})
		var ke *fault.Error
		if !errors.As(err, &ke) || ke.Code != fault.CodeInvalid || ke.Field != "pools[2]" {
			t.Errorf("adding an unknown pool: %v, want invalid naming pools[2]", err)
		}
	})
}

// A filter of more pool names than a statement takes parameters (SQLite's
// limit is 32,766, PostgreSQL's 65,535) is looked up in batches: an
// unknown name in it is refused as in a short one (422 naming pools[i]),
// not failed as an internal error.
func TestWebhookRefusesUnknownPoolInALongList(t *testing.T) {
	t.Parallel()
	hookEach(t, func(t *testing.T, f *fnd) {
		f.Pool("wp", "integer", 0, sitekit.Range("1", "100", true))
		pools := []string{"wp"}
		for i := range 70000 {
			pools = append(pools, "p"+strconv.Itoa(i))
		}
		_, err := f.hooks.CreateWebhook(f.Ctx, WebhookSpec{Name: "long", URL: "https://example.com/h", Secret: testSecret,
			Actions: []string{"allocation.*"}, Pools: pools})
		var ke *fault.Error
		if !errors.As(err, &ke) || ke.Code != fault.CodeInvalid || ke.Field != "pools[1]" || !strings.Contains(ke.Message, `"p0"`) {
			t.Errorf("create with %d pools: %v, want invalid naming pools[1] and \"p0\"", len(pools), err)
		}
		if n := f.Count(&models.Webhook{}, "name = ?", "long"); n != 0 {
			t.Errorf("a refused webhook was stored (%d)", n)
		}
	})
}
