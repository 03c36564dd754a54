package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/auth"
)

// TestConsoleEarlyErrorsKeepNavigation: errors raised before a console
// route's own middleware runs (an unknown path, a NUL or bad UTF-8 in the
// header search's query) are shown to a signed-in operator with the
// navigation and the search box, not as an anonymous "Sign in" page.
func TestConsoleEarlyErrorsKeepNavigation(t *testing.T) {
	t.Parallel()
	site := newSQLiteSite(t)
	v := site.login(auth.RoleViewer)
	for path, want := range map[string]int{
		"/no-such-page":   http.StatusNotFound,
		"/search?q=a%00b": http.StatusUnprocessableEntity,
		"/search?q=%ff":   http.StatusUnprocessableEntity,
	} {
		body := expect(t, v.get(path), want, `<nav aria-label="main">`, `id="global-q"`, "Sign out")
		if strings.Contains(body, `href="/login">Sign in`) {
			t.Fatalf("%s: a signed-in error page offers Sign in", path)
		}
	}
	// Anonymous callers still get the bare page with the sign-in link.
	expect(t, site.anonymous().get("/no-such-page"), http.StatusNotFound, `href="/login">Sign in`)
}

// TestConsoleRangeEditNeedsVersion: the range form always carries the
// version it was opened at; a post without one is refused (422 naming
// version) instead of silently overwriting a change made in between.
func TestConsoleRangeEditNeedsVersion(t *testing.T) {
	t.Parallel()
	site := newSQLiteSite(t)
	b := site.login(auth.RoleAdmin)
	expect(t, b.post("/pools", url.Values{"name": {"lo-ip"}, "type": {"ipv4"}, "first": {"10.180.62.1"}, "last": {"10.180.62.199"}, "auto_assign": {"true"}}, true), http.StatusSeeOther)
	p, err := site.a.GetPool(context.Background(), "lo-ip")
	if err != nil || len(p.Ranges) != 1 {
		t.Fatalf("pool: %+v %v", p, err)
	}
	epath := "/pools/lo-ip/ranges/" + p.Ranges[0].ID
	for _, v := range []url.Values{
		{"first": {"10.180.62.1"}, "last": {"10.180.62.100"}},
		{"first": {"10.180.62.1"}, "last": {"10.180.62.100"}, "version": {""}},
		{"first": {"10.180.62.1"}, "last": {"10.180.62.100"}, "version": {"x"}},
	} {
		expect(t, b.post(epath, v, true), http.StatusUnprocessableEntity, "version", "reload")
	}
	if p2, _ := site.a.GetPool(context.Background(), "lo-ip"); p2.Ranges[0].Last != "10.180.62.199" || p2.Ranges[0].Version != p.Ranges[0].Version {
		t.Fatalf("a refused edit changed the range: %+v", p2.Ranges[0])
	}
	// With the version it applies.
	expect(t, b.post(epath, url.Values{"first": {"10.180.62.1"}, "last": {"10.180.62.100"}, "auto_assign": {"true"}, "version": {fmt.Sprint(p.Ranges[0].Version)}}, true), http.StatusSeeOther)
}

// TestConsoleConflictAdviceNamesCause: a DPU in conflict because another
// ExpectedMachine declares its serial gets advice naming both records
// (on its host's page and its own), not the list of every possible cause.
func TestConsoleConflictAdviceNamesCause(t *testing.T) {
	t.Parallel()
	site := newSQLiteSite(t)
	seedBelievableSite(t, site)
	v := site.login(auth.RoleViewer)
	want := "Move the ExpectedDpu from ExpectedMachine rack8-u03 to ExpectedMachine rack7-u14"
	for _, path := range []string{"/machines/" + allocator.DPUMachineID("MT2242X00020"), "/machines/" + allocator.HostMachineID("1a:1b:1c:1d:1e:20")} {
		body := expect(t, v.get(path), http.StatusOK, "conflict", want)
		if strings.Contains(body, "held by another owner, quarantined, or the DPU is declared") {
			t.Fatalf("%s: the conflict of a misplaced DPU still lists every possible cause", path)
		}
	}
}

// TestConsoleUnquarantineNamesGoneOwner: the confirmation of a value
// quarantined by a force delete names the deleted machine as it was, not
// by its 58-character id.
func TestConsoleUnquarantineNamesGoneOwner(t *testing.T) {
	t.Parallel()
	site := newSQLiteSite(t)
	seedBelievableSite(t, site)
	b := site.login(auth.RoleAdmin)
	page, err := site.a.ListAllocations(context.Background(), "lo-ip", allocator.AllocationFilter{State: "quarantined"})
	if err != nil || len(page.Items) == 0 {
		t.Fatalf("no quarantined value in the seeded site: %v", err)
	}
	al := page.Items[0]
	gone := *al.FormerOwnerID
	if m, err := site.a.GetMachine(context.Background(), gone); err == nil {
		t.Fatalf("the former owner %s still exists", m.MachineID)
	}
	body := expect(t, b.get("/pools/lo-ip/unquarantine?value="+url.QueryEscape(al.Value)), http.StatusOK,
		"MT2242X00099, deleted", "Unquarantine "+al.Value)
	if strings.Contains(body, "<dd class=\"mono\">machine/"+gone) {
		t.Fatalf("the former owner is printed as its full machine_id")
	}
}

// TestConsoleLoginPageWhenSignedIn: opening /login?next=… while signed in
// (signed in again in another tab) goes to next when it is a plain path on
// this site, else to the dashboard.
func TestConsoleLoginPageWhenSignedIn(t *testing.T) {
	t.Parallel()
	site := newSQLiteSite(t)
	v := site.login(auth.RoleViewer)
	for next, want := range map[string]string{
		"/machines?state=ready": "/machines?state=ready",
		"//evil.example/x":      "/",
		"https://evil.example":  "/",
		"/\\evil.example":       "/",
		"":                      "/",
	} {
		res := v.get("/login?next=" + url.QueryEscape(next))
		expect(t, res, http.StatusSeeOther)
		if got := res.Header.Get("Location"); got != want {
			t.Errorf("next %q: redirected to %q, want %q", next, got, want)
		}
	}
}

// TestConsoleForceDeleteDialogOfHostlessDPU: a DPU without a host is
// force-deleted on its own; its dialog says "The DPU is", not "The host
// is", and asks for its serial.
func TestConsoleForceDeleteDialogOfHostlessDPU(t *testing.T) {
	t.Parallel()
	site := newSQLiteSite(t)
	seedBelievableSite(t, site)
	ctx := audit.WithActor(context.Background(), "test", "")
	if _, err := site.a.Discover(ctx, allocator.DiscoverSpec{SerialNumber: "MT2242X00777"}); err != nil {
		t.Fatal(err)
	}
	b := site.login(auth.RoleAdmin)
	body := expect(t, b.get("/machines/"+allocator.DPUMachineID("MT2242X00777")+"/impact?action=force-delete"), http.StatusOK,
		"Force delete", "MT2242X00777", "The DPU is", "serial number to confirm")
	if strings.Contains(body, "The host is") {
		t.Fatal("the force-delete dialog of a host-less DPU calls it a host")
	}
}

// TestConsoleEventsNameDeletedMachine: on the audit log, every event of a
// force-deleted DPU (its network_config updates too, whose documents
// carry no serial) is named by the serial another event recorded.
func TestConsoleEventsNameDeletedMachine(t *testing.T) {
	t.Parallel()
	site := newSQLiteSite(t)
	ctx := audit.WithActor(context.Background(), "test", "")
	b := site.login(auth.RoleAdmin)
	expect(t, b.post("/pools", url.Values{"name": {"lo-ip"}, "type": {"ipv4"}, "first": {"10.180.62.1"}, "last": {"10.180.62.199"}, "auto_assign": {"true"}}, true), http.StatusSeeOther)
	if _, err := site.a.Discover(ctx, allocator.DiscoverSpec{SerialNumber: "MT2242X00888"}); err != nil {
		t.Fatal(err)
	}
	dpu := allocator.DPUMachineID("MT2242X00888")
	if _, err := site.a.DeleteMachine(ctx, dpu, true); err != nil {
		t.Fatal(err)
	}
	short := dpu[:12] + "…" + dpu[len(dpu)-6:]
	body := expect(t, b.get("/events?object_type=machine"), http.StatusOK, "network_config.update")
	if strings.Contains(body, ">"+short+"</a>") {
		t.Fatalf("an event of the deleted DPU is named by its id:\n%s", clip(body))
	}
}
