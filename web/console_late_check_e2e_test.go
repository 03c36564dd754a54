package web_test

import (
	"context"
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/auth"
)

// checksJS records, in window.__checks, each as-you-type check the page
// sends (a request to /expected-machines/validate) and marks it done when
// the request has ended: after htmx has handled its answer (loadend comes
// after load, whose handler swaps the answer in), or when it was aborted.
const checksJS = `(() => {
  window.__checks = [];
  const open = XMLHttpRequest.prototype.open, send = XMLHttpRequest.prototype.send;
  XMLHttpRequest.prototype.open = function (method, url) { this.__url = String(url); return open.apply(this, arguments); };
  XMLHttpRequest.prototype.send = function () {
    if (this.__url && this.__url.endsWith("/expected-machines/validate")) {
      const c = {done: false};
      window.__checks.push(c);
      this.addEventListener("loadend", () => { c.done = true; c.status = this.status; });
    }
    return send.apply(this, arguments);
  };
  return true;
})()`

// TestLateCheckKeepsRefusalE2E: an as-you-type check started just before
// Save must not empty the save's refusal when its answer comes after it.
// The test holds the check's answer in the browser (the Fetch domain
// pauses it at the response stage) until the refusal is shown, then
// releases it and waits for the check's request to end: the refusal
// (the form was opened at a version another edit has since replaced) is
// still in #err-form. No timing decides it: each step waits for the
// event it needs.
func TestLateCheckKeepsRefusalE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		actx := audit.WithActor(context.Background(), "console:alice", "")
		spec := allocator.ExpectedMachineSpec{BmcMacAddress: "6a:00:00:00:72:01", Metadata: &allocator.Metadata{Name: "rack72-u01"}}
		em, err := site.a.CreateExpectedMachine(actx, spec)
		if err != nil {
			t.Fatal(err)
		}
		ctx := newBrowser(t, 1280, 800)
		signIn(t, ctx, site, auth.RoleOperator)
		run(t, ctx, "open the edit form",
			chromedp.Navigate(site.srv.URL+"/expected-machines/"+em.ID+"/edit"),
			poll(`document.querySelector("#em-form button.save") !== null`),
			chromedp.Evaluate[chromedp.Void](checksJS),
		)

		// Another operator saves first: this form's save will be refused.
		spec.Metadata = &allocator.Metadata{Name: "rack72-u01-a"}
		if _, err := site.a.ReplaceExpectedMachine(actx, em.ID, spec, nil); err != nil {
			t.Fatal(err)
		}

		// Hold every answer to a check until released.
		hold, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		next, stop := iter.Pull2(chromedp.Events(hold, fetch.RequestPaused))
		defer stop()
		if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{
			{URLPattern: "*/expected-machines/validate", RequestStage: fetch.RequestStageResponse}}}); err != nil {
			t.Fatal(err)
		}
		run(t, ctx, "type a new name: the check starts", setInput(`#f-name`, "rack72-u01-b"))
		held, err, ok := next()
		if !ok || err != nil {
			t.Fatalf("the check's answer never reached the browser: %v", err)
		}
		if held.ResponseStatusCode != 200 {
			t.Fatalf("the check answered %d, want 200", held.ResponseStatusCode)
		}

		run(t, ctx, "save while the check's answer is held: refused",
			chromedp.Click(chromedp.CSS(`#em-form button.save`)),
			poll(`document.querySelector("#err-form").innerText.includes("version")`),
		)
		refusal := evalJS[string](t, ctx, `document.querySelector("#err-form").innerText`)

		// Release the answer (with the fix, the page has aborted the
		// request and the browser no longer holds it) and wait for the
		// check's request to end.
		if _, err := chromedp.Call(ctx, fetch.ContinueResponse, fetch.ContinueResponseParams{RequestID: held.RequestID}); err != nil &&
			!strings.Contains(err.Error(), "nterception") {
			t.Fatalf("release the check's answer: %v", err)
		}
		run(t, ctx, "the check's request ends", poll(`window.__checks.length > 0 && window.__checks.every(c => c.done)`))
		if got := evalJS[string](t, ctx, `document.querySelector("#err-form").innerText`); got != refusal {
			t.Errorf("after the late check, #err-form says %q, want the refusal %q", got, refusal)
		}
		if n := evalJS[int](t, ctx, `window.__checks.length`); n != 1 {
			t.Errorf("%d checks were sent, want the one typed before saving", n)
		}
		got, err := site.a.GetExpectedMachine(context.Background(), em.BmcMacAddress)
		if err != nil {
			t.Fatal(err)
		}
		if got.Metadata.Name != "rack72-u01-a" {
			t.Errorf("after the refused save the name is %q, want the other operator's rack72-u01-a", got.Metadata.Name)
		}
	})
}
