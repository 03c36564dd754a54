package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/auth"
)

// errInView is true when the ExpectedMachine form's message is shown,
// whole inside the window, and the focus is on it.
const errInView = `(() => {
  const e = document.querySelector("#err-form");
  if (!e || !e.innerText.includes("version")) return false;
  const r = e.getBoundingClientRect();
  return r.height > 0 && r.top >= 0 && r.bottom <= innerHeight && document.activeElement === e;
})()`

// TestRefusedSaveShowsItsMessageE2E: two tabs edit one ExpectedMachine;
// tab A saves first; tab B, scrolled down to its Save button, saves
// after it and is refused (it read an older version). The refusal is at
// the top of the form, far above the button: it scrolls into view and
// takes the focus, at 1280×800, and nothing of tab B's edit is saved.
func TestRefusedSaveShowsItsMessageE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		// Sixteen DPU rows (the most an ExpectedMachine holds) make the
		// form taller than the window.
		actx := audit.WithActor(context.Background(), "console:alice", "")
		var dpus []allocator.ExpectedDPU
		for i := 0; i < 16; i++ {
			dpus = append(dpus, allocator.ExpectedDPU{SerialNumber: fmt.Sprintf("MT7700X%05d", i)})
		}
		em, err := site.a.CreateExpectedMachine(actx, allocator.ExpectedMachineSpec{BmcMacAddress: "6a:00:00:00:00:01",
			Metadata: &allocator.Metadata{Name: "rack9-u01"}, ExpectedDPUs: &dpus})
		if err != nil {
			t.Fatal(err)
		}
		edit := site.srv.URL + "/expected-machines/" + em.ID + "/edit"

		// Two pages, each in a browser of its own (a second tab of one
		// browser would be hidden behind the first).
		tabA := newBrowser(t, 1280, 800)
		signIn(t, tabA, site, auth.RoleOperator)
		tabB := newBrowser(t, 1280, 800)
		signIn(t, tabB, site, auth.RoleOperator)
		for _, tab := range []context.Context{tabA, tabB} {
			run(t, tab, "open the edit form", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(edit), poll(`document.querySelector("#em-form button.save") !== null`))
		}
		run(t, tabA, "tab A saves",
			setInput(`#f-name`, "rack9-u01-a"),
			chromedp.Click(chromedp.CSS(`#em-form button.save`)),
			poll(`location.pathname === "/expected-machines/`+em.ID+`"`),
		)
		// Tab B's name is set without an input event: this test is about
		// where the refusal shows; a check racing the save is
		// TestLateCheckKeepsRefusalE2E's.
		run(t, tabB, "tab B scrolls down to its Save button",
			chromedp.Evaluate[chromedp.Void](`document.querySelector("#f-name").value = "rack9-u01-b", true`),
			chromedp.Evaluate[chromedp.Void](`scrollTo(0, document.documentElement.scrollHeight), true`),
		)
		if top := evalJS[float64](t, tabB, `document.querySelector("#err-form").getBoundingClientRect().top`); top >= 0 {
			t.Fatalf("tab B's form starts %.0f px below the window's top: the test needs it above (page %v px high in a window of %v)", top,
				evalJS[float64](t, tabB, `document.documentElement.scrollHeight`), evalJS[float64](t, tabB, `innerHeight`))
		}
		run(t, tabB, "tab B saves", chromedp.Click(chromedp.CSS(`#em-form button.save`)))
		// A generous bound, reached only when the message never shows: the
		// failure then says where it is.
		sctx, cancel := context.WithTimeout(tabB, 2*time.Minute)
		defer cancel()
		if _, err := chromedp.Run(sctx, poll(errInView)); err != nil {
			state := evalJS[string](t, tabB, `(() => { const e = document.querySelector("#err-form"); const r = e ? e.getBoundingClientRect() : null;
  return (e ? JSON.stringify(e.innerText) + " at " + Math.round(r.top) + ".." + Math.round(r.bottom) : "no #err-form") + " in a window " + innerHeight + " px high; focus on " + (document.activeElement ? document.activeElement.tagName + "#" + document.activeElement.id : "nothing") })()`)
			t.Fatalf("tab B's refused save: the message is not shown in the window with the focus on it: %s", state)
		}
		msg := evalJS[string](t, tabB, `document.querySelector("#err-form").innerText`)
		if !strings.Contains(msg, "version") {
			t.Errorf("tab B's refusal says %q, want the version it is at", msg)
		}
		got, err := site.a.GetExpectedMachine(context.Background(), em.BmcMacAddress)
		if err != nil {
			t.Fatal(err)
		}
		if got.Metadata.Name != "rack9-u01-a" {
			t.Errorf("after the refused save the name is %q, want tab A's rack9-u01-a", got.Metadata.Name)
		}
	})
}
