package web_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/internal/testkit"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/poolfile"
	"github.com/ipledger/ipledger/web"
)

// concrete fills a route pattern's parameters.
func concrete(path string) string {
	r := strings.NewReplacer(":name", "lo-ip", ":id", "no-such-id")
	return r.Replace(path)
}

// TestConsoleRoutesNeedSession: every console route sends an anonymous
// browser to /login (303), and an anonymous htmx request gets 401 with
// HX-Redirect; nothing runs.
func TestConsoleRoutesNeedSession(t *testing.T) {
	t.Parallel()
	site := newSQLiteSite(t)
	seedSite(t, site.a)
	s := web.New(web.Config{Allocator: site.a, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	anon := site.anonymous()
	for _, r := range s.ConsoleRoutes() {
		p := concrete(r.Path)
		req, _ := http.NewRequest(r.Method, site.srv.URL+p, nil)
		res := anon.do(req)
		res.Body.Close()
		if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/login") {
			t.Errorf("anonymous %s %s: status %d Location %q, want 303 to /login", r.Method, p, res.StatusCode, res.Header.Get("Location"))
		}
		req, _ = http.NewRequest(r.Method, site.srv.URL+p, nil)
		req.Header.Set("HX-Request", "true")
		res = anon.do(req)
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized || res.Header.Get("HX-Redirect") != "/login" {
			t.Errorf("anonymous htmx %s %s: status %d HX-Redirect %q, want 401 /login", r.Method, p, res.StatusCode, res.Header.Get("HX-Redirect"))
		}
	}
	pools, _ := site.a.ListPools(context.Background())
	if len(pools) != 3 {
		t.Fatalf("anonymous requests changed the pools: %d", len(pools))
	}
}

// TestConsoleRolesAreEnforced walks the console route table: a role below
// a route's least role gets 403 (with a valid CSRF token, so the role check
// is what refuses), on both databases.
func TestConsoleRolesAreEnforced(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		site := newConsoleSite(t, db)
		seedSite(t, site.a)
		s := web.New(web.Config{Allocator: site.a, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		for _, role := range []auth.Role{auth.RoleViewer, auth.RoleOperator} {
			b := site.login(role)
			for _, r := range s.ConsoleRoutes() {
				if role.Allows(r.Role) {
					continue
				}
				p := concrete(r.Path)
				res := b.htmx(r.Method, p, url.Values{"name": {"x"}, "first": {"10.0.0.1"}, "last": {"10.0.0.2"}})
				body := readBody(t, res)
				if res.StatusCode != http.StatusForbidden {
					t.Errorf("%s %s %s: status %d, want 403\n%s", role, r.Method, p, res.StatusCode, clip(body))
				}
			}
		}
		pools, _ := site.a.ListPools(context.Background())
		if len(pools) != 3 {
			t.Fatalf("refused requests changed the pools: %d", len(pools))
		}
	})
}

// TestConsoleCSRF: a state-changing request with a session but without
// the session's CSRF token (absent, wrong, or another session's) is 403
// and changes nothing; the form field and the X-CSRF-Token header both
// work.
func TestConsoleCSRF(t *testing.T) {
	t.Parallel()
	site := newSQLiteSite(t)
	seedSite(t, site.a)
	admin := site.login(auth.RoleAdmin)
	other := site.login(auth.RoleAdmin)
	form := url.Values{"first": {"10.180.64.1"}, "last": {"10.180.64.9"}, "auto_assign": {"true"}}
	for name, tok := range map[string]string{"absent": "", "wrong": "AAAA", "other session": other.csrf} {
		f := url.Values{}
		for k, v := range form {
			f[k] = v
		}
		if tok != "" {
			f.Set("csrf_token", tok)
		}
		expect(t, admin.post("/pools/lo-ip/ranges", f, false), http.StatusForbidden, "CSRF")
		_ = name
	}
	p, _ := site.a.GetPool(context.Background(), "lo-ip")
	if len(p.Ranges) != 2 {
		t.Fatalf("refused CSRF requests added a range: %d ranges", len(p.Ranges))
	}
	// Logout is state-changing too.
	expect(t, admin.post("/logout", nil, false), http.StatusForbidden)
	// With the form field: accepted (303); with the header (htmx): accepted.
	res := admin.post("/pools/lo-ip/ranges", form, true)
	expect(t, res, http.StatusSeeOther)
	res = admin.htmx(http.MethodPost, "/pools/lo-ip/ranges", url.Values{"first": {"10.180.65.1"}, "last": {"10.180.65.9"}})
	expect(t, res, http.StatusOK)
	if res.Header.Get("HX-Redirect") != "/pools/lo-ip" {
		t.Fatalf("htmx add range: HX-Redirect %q", res.Header.Get("HX-Redirect"))
	}
	// The JSON API with a session cookie needs the token as well.
	req, _ := http.NewRequest(http.MethodPost, site.srv.URL+"/api/v1/pools/lo-ip/ranges", strings.NewReader(`{"first":"10.180.66.1","last":"10.180.66.2"}`))
	req.Header.Set("Content-Type", "application/json")
	expect(t, admin.do(req), http.StatusForbidden)
}

// TestConsoleSession: login sets an HttpOnly, SameSite=Lax cookie (Secure
// when configured); a bad token is 401; a tampered cookie or a deleted
// token ends the session; post-login redirects stay on the site; logout
// clears the cookie.
func TestConsoleSession(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, models.SQLite)
	a := allocator.New(db, allocator.Options{})
	au := auth.New(db, auth.Options{})
	tok, err := au.CreateToken(context.Background(), "alice", auth.RoleOperator, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, secure := range []bool{false, true} {
		s := web.New(web.Config{Allocator: a, Auth: au, SecureCookies: secure, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		srv := newServer(t, s)
		res, err := noRedirect.PostForm(srv+"/login", url.Values{"token": {tok}, "next": {"//evil.example/x"}})
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/" {
			t.Fatalf("login: %d to %q, want 303 to / (never off-site)", res.StatusCode, res.Header.Get("Location"))
		}
		sc := res.Header.Get("Set-Cookie")
		for _, want := range []string{"ipledger_session=", "HttpOnly", "SameSite=Lax"} {
			if !strings.Contains(sc, want) {
				t.Fatalf("session cookie %q lacks %s", sc, want)
			}
		}
		if strings.Contains(sc, "Secure") != secure {
			t.Fatalf("SecureCookies=%v but cookie is %q", secure, sc)
		}
		if strings.Contains(sc, tok) {
			t.Fatalf("the session cookie carries the token itself")
		}
	}

	site := &consoleSite{t: t, a: a, tokens: map[auth.Role]string{auth.RoleOperator: tok}}
	site.srv = newHTTPTest(t, web.New(web.Config{Allocator: a, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	expect(t, site.anonymous().post("/login", url.Values{"token": {"ipl_not-a-token-at-all"}}, false), http.StatusUnauthorized, "not known")
	b := site.login(auth.RoleOperator)
	expect(t, b.get("/pools"), http.StatusOK, "console:alice", "operator")

	// Tampered cookie: refused.
	u, _ := url.Parse(site.srv.URL)
	cks := b.c.Jar.Cookies(u)
	var val string
	for _, c := range cks {
		if c.Name == web.SessionCookie {
			val = c.Value
		}
	}
	forged := site.anonymous()
	forged.c.Jar.SetCookies(u, []*http.Cookie{{Name: web.SessionCookie, Value: strings.Replace(val, val[:4], "AAAA", 1), Path: "/"}})
	expect(t, forged.get("/pools"), http.StatusSeeOther)

	// The token is deleted: the session ends at once.
	if err := db.Exec(`DELETE FROM api_tokens WHERE name = 'alice'`).Error; err != nil {
		t.Fatal(err)
	}
	expect(t, b.get("/pools"), http.StatusSeeOther)

	// Logout clears the cookie.
	tok2, _ := au.CreateToken(context.Background(), "bob", auth.RoleViewer, "")
	site.tokens[auth.RoleViewer] = tok2
	v := site.login(auth.RoleViewer)
	res := v.post("/logout", nil, true)
	expect(t, res, http.StatusSeeOther)
	if !strings.Contains(res.Header.Get("Set-Cookie"), "Max-Age=0") {
		t.Fatalf("logout did not clear the cookie: %q", res.Header.Get("Set-Cookie"))
	}
	expect(t, v.get("/"), http.StatusSeeOther)
}

// TestConsolePages renders every page as admin and checks its key content,
// on both databases.
func TestConsolePages(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		site := newConsoleSite(t, db)
		seedBelievableSite(t, site)
		b := site.login(auth.RoleAdmin)
		host := allocator.HostMachineID("1a:1b:1c:1d:1e:20")
		em, err := site.a.GetExpectedMachine(context.Background(), "1a:1b:1c:1d:1e:1f")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			path string
			want []string
		}{
			{"/", []string{"Dashboard", "Pool utilization", `class="bar"`, "vlan-id", "is 90.0% used", "pending", "MT2242X00010", "conflict", "Recent audit events"}},
			{"/pools", []string{"Resource pools", "lo-ip-v6", "Create a pool", `name="csrf_token"`}},
			{"/pools/lo-ip", []string{"Pool lo-ip", "10.180.62.199", "explicit", "Add a range", `<svg class="usage"`, "In use, last 30 days", "unquarantine"}},
			{"/pools/lo-ip?state=quarantined", []string{"quarantined", "was <a class=\"clip\" href=\"/machines/fm100ds"}},
			{"/pools/lo-ip?owner_type=tenant&owner_id=net-00-0", []string{"10.180.62.1<", "tenant/net-00-0"}},
			{"/expected-machines", []string{"Expected machines", "1a:1b:1c:1d:1e:1f", "rack7-u12", "10.180.62.200", "fd00:180:62:1::c8", "New ExpectedMachine", "(password set)"}},
			{"/expected-machines?q=rack8", []string{"rack8-u01", "rack8-u03"}},
			{"/expected-machines/new", []string{"New ExpectedMachine", `name="dpu_serial"`, "Add DPU", `hx-post="/expected-machines/validate"`}},
			{"/expected-machines/" + em.ID + "/edit", []string{"Edit ExpectedMachine", "rack7-u12", "1a:1b:1c:1d:1e:1f", "MT2242X00001", "10.180.62.200", "A password is stored", "Delete ExpectedMachine"}},
			{"/expected-machines/import", []string{"Import a NICo expected-machines file", `type="file"`, "<progress"}},
			{"/machines", []string{"Machines", "rack7-u12", "MT2242X00001", "10.180.62.200", "Force delete…", "Decommission…", "Actions ▾"}},
			{"/machines/" + host, []string{"rack7-u14", "MT2242X00002", "reserved", "Values held in every pool", "History", "Force delete…", "Decommission…", "What to do"}},
			{"/expected-machines/" + em.ID, []string{"rack7-u12", "MT2242X00001", "10.180.62.200", "Edit", "Delete…"}},
			{"/search?q=rack8", []string{"Search", "rack8-u01", "rack8-u03"}},
			{"/machines?state=ready", []string{"MT2242X00002"}},
			{"/bindings", []string{"DPU bindings", "reserved", "pending", "conflict", "MT2242X00020"}},
			{"/machines/" + allocator.DPUMachineID("MT2242X00020"), []string{"MT2242X00020", "conflict", "declared by ExpectedMachine", "rack8-u03", "Move the ExpectedDpu from ExpectedMachine rack8-u03 to ExpectedMachine rack7-u14"}},
			{"/bindings?status=pending", []string{"MT2242X00010"}},
			{"/events", []string{"Audit log", "allocation.create", "console:alice"}},
			{"/events?action=machine.&object_type=machine", []string{"machine.force_delete"}},
			{"/noc", []string{"site addresses", `hx-trigger="every 15s"`, "vlan-id", "90.0%", "DPUs complete", "Recent force deletes", "days left"}},
			{"/machines/" + host + "/impact?action=force-delete", []string{"Force delete", "rack7-u14", "1a:1b:1c:1d:1e:20", "return_to_reservation", "quarantine", "Type the host&#39;s name to confirm", host}},
			{"/machines/" + host + "/impact?action=decommission", []string{"Decommission", "decommissioned", "release"}},
		} {
			body := expect(t, b.get(c.path), http.StatusOK, c.want...)
			if strings.Contains(body, "never-shown") {
				t.Fatalf("%s renders the BMC password", c.path)
			}
			checkFormsCarryCSRF(t, c.path, body)
		}
		// Fragments.
		expect(t, b.htmx(http.MethodGet, "/expected-machines/dpu-row", nil), http.StatusOK, `class="dpu-row"`, `name="dpu_key"`)
		res := b.htmx(http.MethodGet, "/machines/"+host+"/impact?action=force-delete", nil)
		body := expect(t, res, http.StatusOK, "<dialog", "data-autoopen", "quarantine")
		if strings.Contains(body, "<html") {
			t.Fatal("the impact dialog fragment is a full page")
		}
		req, _ := http.NewRequest(http.MethodGet, site.srv.URL+"/pools/lo-ip?cursor=", nil)
		req.Header.Set("HX-Request", "true")
		req.Header.Set("HX-Target", "allocations")
		body = expect(t, b.do(req), http.StatusOK, `id="allocations"`, "10.180.62.1<")
		if strings.Contains(body, "<html") || strings.Contains(body, `svg class="usage"`) {
			t.Fatal("the allocations fragment renders the whole page")
		}
		expect(t, b.get("/pools/nope"), http.StatusNotFound, "does not exist")
		expect(t, b.get("/pools/lo-ip?state=bogus"), http.StatusUnprocessableEntity, "unknown state")
		expect(t, b.get("/events?since=yesterday"), http.StatusUnprocessableEntity, "is not a date")
		res = b.htmx(http.MethodGet, "/pools/nope", nil)
		expect(t, res, http.StatusNotFound, "does not exist")
		if res.Header.Get("HX-Retarget") != "#toast" {
			t.Fatal("htmx errors go to the toast")
		}
	})
}

var formTag = regexp.MustCompile(`(?s)<form[^>]*>.*?</form>`)

// checkFormsCarryCSRF: every POST form of a page carries the CSRF field.
func checkFormsCarryCSRF(t *testing.T, path, body string) {
	t.Helper()
	for _, f := range formTag.FindAllString(body, -1) {
		if strings.Contains(f, `method="post"`) && !strings.Contains(f, `name="csrf_token"`) {
			t.Fatalf("%s: a POST form lacks the CSRF field:\n%s", path, clip(f))
		}
	}
	if strings.Contains(body, "<body") && !strings.Contains(body, `hx-headers="{&#34;X-CSRF-Token&#34;`) && !strings.Contains(body, `class="noc"`) {
		t.Fatalf("%s: <body> lacks hx-headers with the CSRF token", path)
	}
}

// TestConsoleViewerSeesNoControls: a viewer's pages render no control it
// may not use, and the NOC wallboard has no form at all.
func TestConsoleViewerSeesNoControls(t *testing.T) {
	t.Parallel()
	site := newSQLiteSite(t)
	seedBelievableSite(t, site)
	v := site.login(auth.RoleViewer)
	em, err := site.a.GetExpectedMachine(context.Background(), "1a:1b:1c:1d:1e:1f")
	if err != nil {
		t.Fatal(err)
	}
	// A refused page keeps the navigation and the search box.
	expect(t, v.get("/expected-machines/new"), http.StatusForbidden, "Not allowed", `<nav aria-label="main">`, `id="global-q"`, "Sign out")
	for path, banned := range map[string][]string{
		"/pools":                         {"Create a pool", `action="/pools"`},
		"/pools/lo-ip":                   {"Add a range", "remove", "unquarantine", "Remove…", "Edit…", "Unquarantine…", "/ranges/"},
		"/pools/lo-ip?state=quarantined": {"Unquarantine", "/unquarantine"},
		"/expected-machines":             {"New ExpectedMachine", "Import NICo file", "/edit"},
		"/machines":                      {"Force delete", "Decommission", "/impact"},
		"/machines/" + allocator.HostMachineID("1a:1b:1c:1d:1e:1f"): {"Force delete", "Decommission", "/impact", "Delete…", "/edit"},
		"/machines/" + allocator.DPUMachineID("MT2242X00001"):       {"Force delete", "Decommission", "/impact", "/edit"},
		"/expected-machines/" + em.ID:                               {"/edit", "Delete…", "/delete"},
		"/bindings":                                                 {"/impact", "/edit"},
		"/events":                                                   {"/impact", "/edit"},
		"/search?q=rack":                                            {"/impact", "/edit"},
		"/":                                                         {"/impact", "/edit", "Create a pool"},
		"/noc":                                                      {"<form", "csrf"},
	} {
		body := expect(t, v.get(path), http.StatusOK)
		for _, b := range banned {
			if strings.Contains(body, b) {
				t.Errorf("viewer sees %q on %s", b, path)
			}
		}
	}
	o := site.login(auth.RoleOperator)
	body := expect(t, o.get("/machines"), http.StatusOK, "Decommission")
	if strings.Contains(body, "Force delete") {
		t.Error("operator sees Force delete (admin only)")
	}
	expect(t, o.get("/machines/"+allocator.HostMachineID("1a:1b:1c:1d:1e:1f")+"/impact?action=force-delete"), http.StatusForbidden)
}

// TestConsolePoolForms: create pool and add range, without JavaScript
// (303) and with htmx (422/409 fragments with the message next to the
// field), on both databases.
func TestConsolePoolForms(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		site := newConsoleSite(t, db)
		b := site.login(auth.RoleAdmin)
		res := b.post("/pools", url.Values{"name": {"lo-ip"}, "type": {"ipv4"}, "first": {"10.180.62.1"}, "last": {"10.180.62.199"}, "auto_assign": {"true"}}, true)
		expect(t, res, http.StatusSeeOther)
		if res.Header.Get("Location") != "/pools/lo-ip" {
			t.Fatalf("create pool redirects to %q", res.Header.Get("Location"))
		}
		expect(t, b.get("/pools/lo-ip"), http.StatusOK, "Pool lo-ip created.", "10.180.62.199")
		// A pool file that disagrees with stored ranges: drift banner.
		if _, err := poolfile.Load(context.Background(), site.a, []byte("[pools.lo-ip]\ntype = \"ipv4\"\nranges = [{ start = \"10.180.62.100\", end = \"10.180.62.250\" }]\n")); err != nil {
			t.Fatal(err)
		}
		expect(t, b.get("/pools"), http.StatusOK, "Pool file drift in <strong>lo-ip</strong>", "overlaps stored range")
		expect(t, b.get("/"), http.StatusOK, "Pool file drift in <strong>lo-ip</strong>")
		// Flash is shown once.
		body := expect(t, b.get("/pools/lo-ip"), http.StatusOK)
		if strings.Contains(body, "Pool lo-ip created.") {
			t.Fatal("flash shown twice")
		}

		res = b.htmx(http.MethodPost, "/pools", url.Values{"name": {"lo-ip-v6"}, "type": {"ipv6"}, "first": {"fd00::zz"}, "last": {"fd00::ff"}})
		body = expect(t, res, http.StatusUnprocessableEntity, `id="create-pool"`, `data-field="ranges[0].first"`, "fd00::zz")
		if strings.Contains(body, "<html") {
			t.Fatal("422 fragment is a full page")
		}
		expect(t, b.htmx(http.MethodPost, "/pools", url.Values{"name": {"lo-ip"}, "type": {"ipv4"}, "first": {"10.0.0.1"}, "last": {"10.0.0.2"}}),
			http.StatusConflict, `data-field="name"`, "already exists")
		// Without JavaScript the refused form comes back as a page.
		expect(t, b.post("/pools", url.Values{"name": {"bad name!"}, "type": {"ipv4"}, "first": {"10.0.0.1"}, "last": {"10.0.0.2"}}, true),
			http.StatusUnprocessableEntity, "<html", `data-field="name"`)

		expect(t, b.htmx(http.MethodPost, "/pools/lo-ip/ranges", url.Values{"first": {"10.180.62.100"}, "last": {"10.180.62.210"}}),
			http.StatusConflict, `id="add-range"`, "overlaps")
		expect(t, b.htmx(http.MethodPost, "/pools/lo-ip/ranges", url.Values{"first": {"10.180.62.250"}, "last": {"10.180.62.200"}}),
			http.StatusUnprocessableEntity, `data-field="last"`, "reversed")
		expect(t, b.post("/pools/lo-ip/ranges", url.Values{"first": {"10.180.62.200"}, "last": {"10.180.62.255"}}, true), http.StatusSeeOther)
		p, err := site.a.GetPool(context.Background(), "lo-ip")
		if err != nil || len(p.Ranges) != 2 || p.Ranges[1].AutoAssign {
			t.Fatalf("after add range: %+v %v", p, err)
		}
		// Remove a range that holds a value: the confirmation comes back
		// with the allocator's refusal naming the value (409); kept.
		if _, _, err := site.a.Allocate(context.Background(), "lo-ip", allocator.Owner{Type: "t", ID: "x"}, "10.180.62.201"); err != nil {
			t.Fatal(err)
		}
		rpath := "/pools/lo-ip/ranges/" + p.Ranges[1].ID + "/remove"
		expect(t, b.get(rpath), http.StatusOK, `id="confirm-form"`, "still holds values: the allocator refuses")
		expect(t, b.post(rpath, nil, true), http.StatusConflict, `id="confirm-form"`, "still holds values", "10.180.62.201")
		expect(t, b.htmx(http.MethodPost, rpath, url.Values{}), http.StatusConflict, `id="confirm-form"`, "10.180.62.201")
		if p2, _ := site.a.GetPool(context.Background(), "lo-ip"); len(p2.Ranges) != 2 {
			t.Fatalf("a refused removal removed the range: %+v", p2.Ranges)
		}
		// Shrinking the range below the held value is refused beside the
		// form; flipping it to auto_assign while it holds a reservation-free
		// explicit value is refused too (the value was requested).
		epath := "/pools/lo-ip/ranges/" + p.Ranges[1].ID
		expect(t, b.get(epath+"/edit"), http.StatusOK, `id="range-form"`, "Edit range of lo-ip")
		expect(t, b.post(epath, url.Values{"first": {"10.180.62.210"}, "last": {"10.180.62.255"}, "version": {fmt.Sprint(p.Ranges[1].Version)}}, true),
			http.StatusConflict, `id="range-form"`, "10.180.62.201")
		// A shrink that keeps every value applies.
		expect(t, b.post(epath, url.Values{"first": {"10.180.62.200"}, "last": {"10.180.62.250"}, "version": {fmt.Sprint(p.Ranges[1].Version)}}, true),
			http.StatusSeeOther)
		if p3, _ := site.a.GetPool(context.Background(), "lo-ip"); p3.Ranges[1].Last != "10.180.62.250" {
			t.Fatalf("shrink not applied: %+v", p3.Ranges[1])
		}
	})
}

// TestConsoleAllocationsKeyset: 250 allocations page by 100 with a keyset
// cursor; the filter is kept on the next page.
func TestConsoleAllocationsKeyset(t *testing.T) {
	t.Parallel()
	site := newSQLiteSite(t)
	seedSite(t, site.a)
	ctx := context.Background()
	for i := 0; i < 150; i++ {
		if _, _, err := site.a.Allocate(ctx, "lo-ip-v6", allocator.Owner{Type: "endpoint", ID: fmt.Sprint(i)}, ""); err != nil {
			t.Fatal(err)
		}
	}
	b := site.login(auth.RoleViewer)
	body := expect(t, b.get("/pools/lo-ip-v6?owner_type=endpoint"), http.StatusOK, "fd00:180:62::1<", "fd00:180:62::64<", "Next page")
	if strings.Contains(body, "fd00:180:62::65<") {
		t.Fatal("first page holds more than 100 rows")
	}
	next := regexp.MustCompile(`href="(/pools/lo-ip-v6\?[^"]*cursor=[^"]+)"`).FindStringSubmatch(body)
	if next == nil || !strings.Contains(next[1], "owner_type=endpoint") {
		t.Fatalf("no next link keeping the filter: %v", next)
	}
	body = expect(t, b.get(strings.ReplaceAll(next[1], "&amp;", "&")), http.StatusOK, "fd00:180:62::65<", "fd00:180:62::96<", "First page")
	if strings.Contains(body, "fd00:180:62::64<") || strings.Contains(body, "Next page") {
		t.Fatal("second page repeats the first or claims a third")
	}
}

// TestConsoleExpectedMachineForm: as-you-type validation answers the
// allocator's messages out-of-band (422) and writes nothing; save without
// JavaScript adds/removes DPU rows and redirects; a stale version is 412;
// the password is write-only; on both databases.
func TestConsoleExpectedMachineForm(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		site := newConsoleSite(t, db)
		seedSite(t, site.a)
		b := site.login(auth.RoleOperator)
		form := func(kv ...string) url.Values {
			v := url.Values{"mac": {"1A-1B-1C-1D-1E-1F"}, "username": {"root"}, "password": {"hunter2-secret"}, "chassis": {"SN-1"},
				"name": {"rack7-u12"}, "labels": {"env=prod\nrow=7"}, "fallback": {""},
				"dpu_key": {"k1", "k2"}, "dpu_serial": {"MT0001", "MT0002"}, "dpu_ip": {"10.180.62.10", ""}, "dpu_ip6": {"", "fd00:180:62:1::1"}}
			for i := 0; i+1 < len(kv); i += 2 {
				v.Set(kv[i], kv[i+1])
			}
			return v
		}
		res := b.htmx(http.MethodPost, "/expected-machines/validate", form())
		body := expect(t, res, http.StatusUnprocessableEntity, `id="err-dpu-k1-loopback_ip" hx-swap-oob="true"`, "auto-assign range", `id="err-dpu-k2-loopback_ip_v6"`)
		if !regexp.MustCompile(`id="err-bmc_mac_address" hx-swap-oob="true"[^>]*></div>`).MatchString(body) {
			t.Fatalf("a valid field's error element is not emptied:\n%s", clip(body))
		}
		f := form()
		f["dpu_ip"] = []string{"10.180.62.201", ""}
		expect(t, b.htmx(http.MethodPost, "/expected-machines/validate", f), http.StatusOK)
		if page, _ := site.a.ListExpectedMachines(context.Background(), allocator.ExpectedMachineFilter{}); len(page.Items) != 0 {
			t.Fatal("validation wrote a record")
		}

		// No-JS add and remove of DPU rows: re-render, nothing saved.
		body = expect(t, b.post("/expected-machines", withKV(f, "add_dpu", "1"), true), http.StatusOK, "MT0001", "MT0002")
		if strings.Count(body, `name="dpu_serial"`) != 3 {
			t.Fatalf("add_dpu: %d rows, want 3", strings.Count(body, `name="dpu_serial"`))
		}
		body = expect(t, b.post("/expected-machines", withKV(f, "remove_dpu", "k1"), true), http.StatusOK, "MT0002")
		if strings.Contains(body, "MT0001") {
			t.Fatal("remove_dpu kept the row")
		}

		// Save with a refused value: every problem beside its field.
		body = expect(t, b.htmx(http.MethodPost, "/expected-machines", form()), http.StatusUnprocessableEntity, `id="em-form"`, `id="err-dpu-k1-loopback_ip"`, "auto-assign range")
		if strings.Contains(body, "hunter2-secret") {
			t.Fatal("the refused form renders the password back")
		}
		res = b.post("/expected-machines", f, true)
		expect(t, res, http.StatusSeeOther)
		em, err := site.a.GetExpectedMachine(context.Background(), "1a:1b:1c:1d:1e:1f")
		if err != nil || len(em.ExpectedDPUs) != 2 || *em.ExpectedDPUs[0].LoopbackIP != "10.180.62.201" || !em.BmcPasswordSet || len(em.Metadata.Labels) != 2 {
			t.Fatalf("saved record: %+v %v", em, err)
		}
		edit := expect(t, b.get("/expected-machines/"+em.ID+"/edit"), http.StatusOK, "10.180.62.201", "A password is stored")
		if strings.Contains(edit, "hunter2-secret") {
			t.Fatal("the edit form renders the password")
		}
		// Edit with an empty password keeps it; a stale version is 412.
		g := withKV(f, "password", "", "id", em.ID, "version", fmt.Sprint(em.Version), "name", "rack7-u12b")
		expect(t, b.post("/expected-machines/"+em.ID, g, true), http.StatusSeeOther)
		em2, _ := site.a.GetExpectedMachine(context.Background(), em.ID)
		if !em2.BmcPasswordSet || em2.Metadata.Name != "rack7-u12b" {
			t.Fatalf("after edit: %+v", em2)
		}
		expect(t, b.htmx(http.MethodPost, "/expected-machines/"+em.ID, g), http.StatusPreconditionFailed, "changed since it was read")
		// Another record may not take MT0001's value: 409 beside the field.
		h := withKV(f, "mac", "2a:00:00:00:00:01", "dpu_serial", "MT0009")
		h["dpu_key"], h["dpu_serial"], h["dpu_ip"], h["dpu_ip6"] = []string{"z"}, []string{"MT0009"}, []string{"10.180.62.201"}, []string{""}
		expect(t, b.htmx(http.MethodPost, "/expected-machines", h), http.StatusConflict, `id="err-dpu-z-loopback_ip"`, "MT0001")
		// Delete with the current version.
		expect(t, b.post("/expected-machines/"+em.ID+"/delete", url.Values{"version": {fmt.Sprint(em2.Version)}}, true), http.StatusSeeOther)
		if _, err := site.a.GetExpectedMachine(context.Background(), em.ID); err == nil {
			t.Fatal("not deleted")
		}
	})
}

func withKV(v url.Values, kv ...string) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out.Set(kv[i], kv[i+1])
	}
	return out
}

// TestConsoleImport: merge gives a result per record (one bad record —
// refused, or not even decodable — does not stop the others, and every
// problem of a bad record is listed); replace-all is atomic and lists
// every bad record; an unknown mode is 422; without JavaScript the result
// is a redirect (post-redirect-get) to a signed result page. Both
// databases.
func TestConsoleImport(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		site := newConsoleSite(t, db)
		seedSite(t, site.a)
		b := site.login(auth.RoleOperator)
		upload := func(htmx bool, mode, content string) *http.Response {
			var buf bytes.Buffer
			w := multipart.NewWriter(&buf)
			_ = w.WriteField("csrf_token", b.csrf)
			_ = w.WriteField("mode", mode)
			fw, _ := w.CreateFormFile("file", "expected-machines.json")
			_, _ = fw.Write([]byte(content))
			w.Close()
			req, _ := http.NewRequest(http.MethodPost, site.srv.URL+"/expected-machines/import", &buf)
			req.Header.Set("Content-Type", w.FormDataContentType())
			if htmx {
				req.Header.Set("HX-Request", "true")
			}
			return b.do(req)
		}
		// noJS posts, expects the 303 and follows it.
		noJS := func(mode, content string, want ...string) string {
			t.Helper()
			res := upload(false, mode, content)
			expect(t, res, http.StatusSeeOther)
			loc := res.Header.Get("Location")
			if !strings.HasPrefix(loc, "/expected-machines/import?result=") {
				t.Fatalf("import without JS redirects to %q", loc)
			}
			return expect(t, b.get(loc), http.StatusOK, want...)
		}
		file := `{"expected_machines":[
		  {"bmc_mac_address":"1a:1b:1c:1d:1e:1f","bmc_username":"root","bmc_password":"pw-in-file","chassis_serial_number":"SN-1",
		   "expected_dpus":[{"serial_number":"MT0001","loopback_ip":"10.180.62.200"}]},
		  {"bmc_mac_address":"1a:1b:1c:1d:1e:20","chassis_serial_number":"SN-2",
		   "expected_dpus":[{"serial_number":"MT0002","loopback_ip":"10.180.62.5","loopback_ip_v6":"fd00:180:62::5"}]},
		  {"bmc_mac_address":"1a:1b:1c:1d:1e:21","chassis_serial_number":"SN-3"},
		  {"bmc_mac_address":"1a:1b:1c:1d:1e:22","expected_dpus":"not-a-list"}]}`
		// Merge is atomic too: bad records refuse the whole file, each is listed.
		count := func() int {
			page, _ := site.a.ListExpectedMachines(context.Background(), allocator.ExpectedMachineFilter{})
			return len(page.Items)
		}
		before := count()
		body := expect(t, upload(true, "merge", file), http.StatusUnprocessableEntity, "Nothing was changed", "2 of 4 records",
			"expected_machines[1].expected_dpus[0].loopback_ip:", "expected_machines[1].expected_dpus[0].loopback_ip_v6:", "expected_machines[3].expected_dpus")
		if strings.Contains(body, "pw-in-file") {
			t.Fatal("import renders a password")
		}
		if n := count(); n != before {
			t.Fatalf("refused merge wrote records: %d, want %d", n, before)
		}
		good := `{"expected_machines":[
		  {"bmc_mac_address":"1a:1b:1c:1d:1e:1f","bmc_username":"root","bmc_password":"pw-in-file","chassis_serial_number":"SN-1",
		   "expected_dpus":[{"serial_number":"MT0001","loopback_ip":"10.180.62.200"}]},
		  {"bmc_mac_address":"1a:1b:1c:1d:1e:21","chassis_serial_number":"SN-3"}]}`
		expect(t, upload(true, "merge", good), http.StatusOK, "2 created, 0 updated, 0 failed of 2 records")
		body = noJS("merge", good, "0 created, 2 updated, 0 failed of 2 records")
		if strings.Contains(body, "pw-in-file") {
			t.Fatal("the import result page renders a password")
		}
		// A made-up result link is refused.
		expect(t, b.get("/expected-machines/import?result="+url.QueryEscape("eyJtIjoibWVyZ2UifQ.AAAA")), http.StatusUnprocessableEntity, "not valid")
		// Replace-all with bad records: nothing changes, each is listed.
		expect(t, upload(true, "replace", file), http.StatusUnprocessableEntity, "Nothing was changed", "2 of 4 records",
			"expected_machines[1].expected_dpus[0].loopback_ip:", "expected_machines[1].expected_dpus[0].loopback_ip_v6:", "expected_machines[3]")
		page, _ := site.a.ListExpectedMachines(context.Background(), allocator.ExpectedMachineFilter{})
		if len(page.Items) != 2 {
			t.Fatalf("after refused replace-all: %d records, want 2", len(page.Items))
		}
		// Two records of the file declaring one loopback: the conflict is named.
		dup := `{"expected_machines":[{"bmc_mac_address":"2a:00:00:00:00:01","expected_dpus":[{"serial_number":"A","loopback_ip":"10.180.62.210"}]},
		  {"bmc_mac_address":"2a:00:00:00:00:02","expected_dpus":[{"serial_number":"B","loopback_ip":"10.180.62.210"}]}]}`
		expect(t, upload(true, "replace", dup), http.StatusUnprocessableEntity, "Nothing was changed", "expected_machines[1]", "10.180.62.210")
		noJS("replace", `{"expected_machines":[{"bmc_mac_address":"1a:1b:1c:1d:1e:1f"}]}`, "0 created, 1 updated, 0 failed of 1 records")
		page, _ = site.a.ListExpectedMachines(context.Background(), allocator.ExpectedMachineFilter{})
		if len(page.Items) != 1 {
			t.Fatalf("after replace-all: %d records, want 1", len(page.Items))
		}
		expect(t, upload(true, "merge", `not json`), http.StatusBadRequest, "not valid JSON")
		expect(t, upload(false, "mergee", file), http.StatusUnprocessableEntity, "mode", "mergee")
		page, _ = site.a.ListExpectedMachines(context.Background(), allocator.ExpectedMachineFilter{})
		if len(page.Items) != 1 {
			t.Fatalf("an unknown mode imported: %d records", len(page.Items))
		}
	})
}

// TestConsoleMachineLifecycle: decommission, delete and force delete go
// through their confirmation; a force delete with a wrong machine id is
// refused beside the field and deletes nothing; on both databases.
func TestConsoleMachineLifecycle(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		site := newConsoleSite(t, db)
		seedBelievableSite(t, site)
		ctx := context.Background()
		admin := site.login(auth.RoleAdmin)
		op := site.login(auth.RoleOperator)
		host := allocator.HostMachineID("1a:1b:1c:1d:1e:20")

		// Delete before decommission: 409 in the dialog.
		expect(t, op.htmx(http.MethodPost, "/machines/"+host+"/delete", url.Values{}), http.StatusConflict, `id="impact-form"`, "decommission")
		// Force delete: part of the machine id, a wrong name, the BMC MAC
		// of a named host or nothing is refused, nothing deleted; the
		// host's name (or its whole machine_id) confirms.
		for _, typed := range []string{host[:10], "rack7-u1", "1a:1b:1c:1d:1e:20"} {
			expect(t, admin.htmx(http.MethodPost, "/machines/"+host+"/force-delete", url.Values{"confirm_name": {typed}}),
				http.StatusUnprocessableEntity, `data-field="confirm_name"`,
				// the error names what was typed, so a look-alike (O for 0) shows
				"confirm_name "+strings.ReplaceAll(strconv.Quote(typed), `"`, "&#34;")+" is not the host&#39;s name", "type it exactly")
		}
		expect(t, admin.post("/machines/"+host+"/force-delete", url.Values{}, true), http.StatusUnprocessableEntity, "<html", "confirm_name &#34;&#34; is not the host&#39;s name")
		if _, err := site.a.GetMachine(ctx, host); err != nil {
			t.Fatalf("refused force delete deleted the host: %v", err)
		}
		// Operator may not force delete.
		expect(t, op.post("/machines/"+host+"/force-delete", url.Values{"confirm_name": {"rack7-u14"}}, true), http.StatusForbidden)

		// Decommission then delete (operator).
		other := allocator.HostMachineID("1a:1b:1c:1d:1e:1f")
		expect(t, op.post("/machines/"+other+"/decommission", nil, true), http.StatusSeeOther)
		m, _ := site.a.GetMachine(ctx, other)
		if m.State != allocator.StateDecommissioned {
			t.Fatalf("state %s after decommission", m.State)
		}
		expect(t, op.get("/machines/"+other+"/impact?action=delete"), http.StatusOK, "return_to_reservation", "10.180.62.200")
		expect(t, op.post("/machines/"+other+"/delete", nil, true), http.StatusSeeOther)
		if _, err := site.a.GetMachine(ctx, other); err == nil {
			t.Fatal("delete kept the machine")
		}

		// Force delete with the name typed: the automatic value is quarantined.
		res := admin.htmx(http.MethodPost, "/machines/"+host+"/force-delete", url.Values{"confirm_name": {"rack7-u14"}})
		expect(t, res, http.StatusOK)
		if res.Header.Get("HX-Redirect") != "/machines" {
			t.Fatalf("force delete: HX-Redirect %q", res.Header.Get("HX-Redirect"))
		}
		page, _ := site.a.ListAllocations(ctx, "lo-ip", allocator.AllocationFilter{State: "quarantined"})
		quarantined := ""
		for _, al := range page.Items {
			if al.FormerOwnerID != nil && *al.FormerOwnerID == allocator.DPUMachineID("MT2242X00003") {
				quarantined = al.Value
			}
		}
		if quarantined == "" {
			t.Fatalf("MT2242X00003's automatic loopback is not quarantined: %+v", page.Items)
		}
		// The flash names the host and links to each quarantined value.
		expect(t, admin.get("/machines"), http.StatusOK, "rack7-u14", "force-deleted", `class="flash-link" href="/pools/lo-ip?value=`+quarantined+`"`)
		expect(t, admin.get("/pools/lo-ip?state=quarantined"), http.StatusOK, quarantined+"<", "Unquarantine…")
		expect(t, admin.get("/pools/lo-ip/unquarantine?value="+quarantined), http.StatusOK, `id="confirm-form"`, "Unquarantine "+quarantined, "MT2242X00003")

		// Unquarantine (admin) returns it to free.
		expect(t, admin.post("/pools/lo-ip/unquarantine", url.Values{"value": {quarantined}}, true), http.StatusSeeOther)
		if _, err := site.a.GetAllocation(ctx, "lo-ip", quarantined); err == nil {
			t.Fatalf("%s still held after unquarantine", quarantined)
		}
		expect(t, admin.get("/pools/lo-ip?state=quarantined"), http.StatusOK, quarantined+" is free again in lo-ip.")
	})
}

// TestConsoleStatic: static files are public, with the right types, and
// pages link the icon.
func TestConsoleStatic(t *testing.T) {
	t.Parallel()
	site := newSQLiteSite(t)
	anon := site.anonymous()
	for path, ct := range map[string]string{"/static/app.css": "text/css", "/static/app.js": "javascript", "/static/htmx.min.js": "javascript", "/static/favicon.svg": "image/svg+xml"} {
		res := anon.get(path)
		body := readBody(t, res)
		if res.StatusCode != http.StatusOK || !strings.Contains(res.Header.Get("Content-Type"), ct) || len(body) < 100 {
			t.Errorf("%s: %d %q (%d bytes)", path, res.StatusCode, res.Header.Get("Content-Type"), len(body))
		}
	}
	// Every page names its icon, so browsers never ask for a missing
	// /favicon.ico (a 404 in the log on each page load).
	expect(t, anon.get("/login"), http.StatusOK, `name="token"`, `<link rel="icon" href="/static/favicon.svg"`)
	res := anon.get("/login")
	res.Body.Close()
	if !strings.Contains(res.Header.Get("Content-Security-Policy"), "script-src 'self'") || res.Header.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("login page lacks security headers: %v", res.Header)
	}
}

// sessionCookieOf returns the browser's session cookie value.
func sessionCookieOf(t *testing.T, b *browser) string {
	t.Helper()
	u, _ := url.Parse(b.site.srv.URL)
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == web.SessionCookie {
			return c.Value
		}
	}
	t.Fatal("no session cookie")
	return ""
}

// withCookie is an anonymous browser that replays a session cookie value.
func withCookie(site *consoleSite, val string) *browser {
	b := site.anonymous()
	u, _ := url.Parse(site.srv.URL)
	b.c.Jar.SetCookies(u, []*http.Cookie{{Name: web.SessionCookie, Value: val, Path: "/"}})
	return b
}

// TestConsoleSignOutEndsSession: signing out deletes the session on the
// server, so a copy of the old cookie replayed afterwards is sent to
// /login (401 for htmx); other sessions of the same token live on; deleting
// the token (allocator.DeleteToken) ends all of its sessions at once.
func TestConsoleSignOutEndsSession(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		site := newConsoleSite(t, db)
		b := site.login(auth.RoleOperator)
		other := site.login(auth.RoleOperator)
		old := sessionCookieOf(t, b)
		expect(t, withCookie(site, old).get("/pools"), http.StatusOK, "console:test-operator")

		res := b.post("/logout", nil, true)
		expect(t, res, http.StatusSeeOther)
		if res.Header.Get("Location") != "/login" {
			t.Fatalf("logout redirects to %q", res.Header.Get("Location"))
		}
		replay := withCookie(site, old)
		res = replay.get("/pools")
		expect(t, res, http.StatusSeeOther)
		if !strings.HasPrefix(res.Header.Get("Location"), "/login") {
			t.Fatalf("replayed cookie after logout: Location %q, want /login", res.Header.Get("Location"))
		}
		expect(t, replay.htmx(http.MethodGet, "/pools", nil), http.StatusUnauthorized)
		expect(t, replay.post("/logout", nil, false), http.StatusSeeOther)
		expect(t, other.get("/pools"), http.StatusOK, "console:test-operator")

		var n int64
		if err := db.Raw(`SELECT COUNT(*) FROM console_sessions`).Scan(&n).Error; err != nil || n != 1 {
			t.Fatalf("sessions left after one sign-out: %d (%v), want 1", n, err)
		}
		// Deleting the token ends its other session at once.
		toks, err := site.auth.ListTokens(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var id int64
		for _, tk := range toks {
			if tk.Name == "test-operator" {
				id = tk.ID
				if tk.Sessions != 1 {
					t.Fatalf("token list shows %d sessions, want 1", tk.Sessions)
				}
			}
		}
		if _, err := site.auth.DeleteToken(context.Background(), id, ""); err != nil {
			t.Fatal(err)
		}
		expect(t, other.get("/pools"), http.StatusSeeOther)
		if err := db.Raw(`SELECT COUNT(*) FROM console_sessions`).Scan(&n).Error; err != nil || n != 0 {
			t.Fatalf("sessions left after the token was deleted: %d (%v)", n, err)
		}
		// A session row cannot point at a missing token (foreign key).
		if err := db.Exec(`INSERT INTO console_sessions (id, token_id, created_at, expires_at) VALUES (?, 999999, 1, 2)`,
			strings.Repeat("a", 64)).Error; err == nil {
			t.Fatal("a session row for a missing token was accepted")
		}
	})
}

// TestConsoleSessionSlides: a session used at least every 12 hours (the NOC
// wallboard refreshing itself) never expires; one left alone for 12 hours
// does; the renewed expiry reaches the cookie too.
func TestConsoleSessionSlides(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		clock := testkit.NewClock(time.Now().UTC())
		advance := clock.Advance
		a := allocator.New(db, allocator.Options{Now: clock.Now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		au := auth.New(db, auth.Options{Now: clock.Now})
		srv := newHTTPTest(t, web.New(web.Config{Allocator: a, Auth: au, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
		tok, err := au.CreateToken(context.Background(), "noc", auth.RoleViewer, "")
		if err != nil {
			t.Fatal(err)
		}
		site := &consoleSite{t: t, a: a, auth: au, srv: srv, tokens: map[auth.Role]string{auth.RoleViewer: tok}}
		b := site.login(auth.RoleViewer)
		for i := 0; i < 6; i++ { // 66 hours of use every 11 hours
			advance(11 * time.Hour)
			res := b.get("/noc")
			if res.StatusCode == http.StatusOK && !strings.Contains(res.Header.Get("Set-Cookie"), web.SessionCookie+"=v2.") {
				t.Fatalf("a renewed session did not refresh its cookie: %q", res.Header.Get("Set-Cookie"))
			}
			expect(t, res, http.StatusOK)
		}
		advance(12*time.Hour + time.Second)
		expect(t, b.get("/noc"), http.StatusSeeOther)
	})
}

// TestConsoleExpectedMachineEmptyDPURow: the new form shows one empty DPU
// row; a row with no serial and no addresses is ignored on validate and
// save (a record without DPUs is valid), while a half-filled row is still
// checked and its messages land on that row.
func TestConsoleExpectedMachineEmptyDPURow(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		site := newConsoleSite(t, db)
		seedSite(t, site.a)
		b := site.login(auth.RoleOperator)
		body := expect(t, b.get("/expected-machines/new"), http.StatusOK)
		if n := strings.Count(body, `name="dpu_serial"`); n != 1 {
			t.Fatalf("new form has %d DPU rows, want 1", n)
		}
		f := url.Values{"mac": {"2a:00:00:00:00:07"}, "username": {""}, "password": {""}, "chassis": {""}, "name": {""},
			"labels": {""}, "fallback": {""}, "dpu_key": {"e1"}, "dpu_serial": {""}, "dpu_ip": {" "}, "dpu_ip6": {""}}
		expect(t, b.htmx(http.MethodPost, "/expected-machines/validate", f), http.StatusOK)
		// An empty row before a half-filled one: the problem lands on the
		// half-filled row, not on the ignored one.
		g := withKV(f)
		g["dpu_key"], g["dpu_serial"], g["dpu_ip"], g["dpu_ip6"] = []string{"e1", "h2"}, []string{"", ""}, []string{"", "10.180.62.201"}, []string{"", ""}
		body = expect(t, b.htmx(http.MethodPost, "/expected-machines/validate", g), http.StatusUnprocessableEntity)
		if !regexp.MustCompile(`id="err-dpu-h2-serial_number" hx-swap-oob="true"[^>]*>[^<]+</div>`).MatchString(body) ||
			!regexp.MustCompile(`id="err-dpu-e1-serial_number" hx-swap-oob="true"[^>]*></div>`).MatchString(body) {
			t.Fatalf("the half-filled row's problem is not on its row:\n%s", clip(body))
		}
		expect(t, b.post("/expected-machines", f, true), http.StatusSeeOther)
		em, err := site.a.GetExpectedMachine(context.Background(), "2a:00:00:00:00:07")
		if err != nil || len(em.ExpectedDPUs) != 0 {
			t.Fatalf("saved with an empty DPU row: %+v %v", em, err)
		}
	})
}

// TestConsoleExpectedMachineEveryProblem: a form with several problems
// shows each under its own field at once — as you type, on save with and
// without htmx — and a bad import record lists all of its problems.
func TestConsoleExpectedMachineEveryProblem(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		site := newConsoleSite(t, db)
		seedSite(t, site.a)
		b := site.login(auth.RoleOperator)
		f := url.Values{"mac": {"not-a-mac"}, "username": {""}, "password": {""}, "chassis": {""}, "name": {""},
			"labels": {""}, "fallback": {""}, "sku_id": {""},
			"dpu_key": {"r1", "r2"}, "dpu_serial": {"", "MT2"}, "dpu_ip": {"10.180.62.201", "1.2.3"}, "dpu_ip6": {"", "fd00:180:62:1::zz"}}
		want := map[string]*regexp.Regexp{}
		for _, id := range []string{"err-bmc_mac_address", "err-dpu-r1-serial_number", "err-dpu-r2-loopback_ip", "err-dpu-r2-loopback_ip_v6"} {
			want[id] = regexp.MustCompile(`id="` + id + `"[^>]*>[^<]+</div>`)
		}
		check := func(what, body string) {
			t.Helper()
			for id, re := range want {
				if !re.MatchString(body) {
					t.Errorf("%s: no message in %s:\n%s", what, id, clip(body))
				}
			}
		}
		check("as you type", expect(t, b.htmx(http.MethodPost, "/expected-machines/validate", f), http.StatusUnprocessableEntity))
		check("htmx save", expect(t, b.htmx(http.MethodPost, "/expected-machines", f), http.StatusUnprocessableEntity, `id="em-form"`))
		check("save without JS", expect(t, b.post("/expected-machines", f, true), http.StatusUnprocessableEntity, `<html`))
		if page, _ := site.a.ListExpectedMachines(context.Background(), allocator.ExpectedMachineFilter{}); len(page.Items) != 0 {
			t.Fatal("a refused form wrote a record")
		}
	})
}

// TestConsoleFlashIsSigned: the one-time flash message is signed; a
// cookie crafted by another site or script is ignored, a real one shows.
func TestConsoleFlashIsSigned(t *testing.T) {
	t.Parallel()
	site := newSQLiteSite(t)
	seedSite(t, site.a)
	b := site.login(auth.RoleAdmin)
	u, _ := url.Parse(site.srv.URL)
	for _, forged := range []string{url.QueryEscape("bad|Call 555-0100 and read out your token"), "YmFkfENhbGw.AAAA"} {
		b.c.Jar.SetCookies(u, []*http.Cookie{{Name: "ipledger_flash", Value: forged, Path: "/"}})
		if body := expect(t, b.get("/pools"), http.StatusOK); strings.Contains(body, "555-0100") || strings.Contains(body, "Call") {
			t.Fatalf("a forged flash cookie was shown")
		}
	}
	res := b.post("/expected-machines", url.Values{"mac": {"2a:00:00:00:00:09"}}, true)
	expect(t, res, http.StatusSeeOther)
	expect(t, b.get(res.Header.Get("Location")), http.StatusOK, "ExpectedMachine 2a:00:00:00:00:09 saved.")
}

// TestConsoleExpectedMachineSearchMAC: a MAC search finds the record
// whether typed with '-' or ':' in any case (docs/api.md), also a
// partial MAC.
func TestConsoleExpectedMachineSearchMAC(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		site := newConsoleSite(t, db)
		seedSite(t, site.a)
		b := site.login(auth.RoleViewer)
		for _, mac := range []string{"0a:00:00:00:01:03", "0a:00:00:00:02:04"} {
			if _, err := site.a.CreateExpectedMachine(context.Background(), allocator.ExpectedMachineSpec{BmcMacAddress: mac}); err != nil {
				t.Fatal(err)
			}
		}
		for _, q := range []string{"0a-00-00-00-01-03", "0A:00:00:00:01:03", "0A-00-00-00-01-03", "0a:00:00:00:01:03", "00-01-03", "00:01:03"} {
			body := expect(t, b.get("/expected-machines?q="+url.QueryEscape(q)), http.StatusOK, "0a:00:00:00:01:03")
			if strings.Contains(body, "0a:00:00:00:02:04") {
				t.Errorf("q=%s also found the other machine", q)
			}
		}
	})
}

// TestConsoleExpectedMachineBrokenPosts: a DPU row missing one of its
// fields is a 422 naming the row (never silently dropped); saving or
// deleting an existing ExpectedMachine without its version (or version 0)
// is a 422 naming version; nothing changes in either case.
func TestConsoleExpectedMachineBrokenPosts(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		site := newConsoleSite(t, db)
		seedSite(t, site.a)
		b := site.login(auth.RoleOperator)
		f := url.Values{"mac": {"2a:00:00:00:00:05"}, "dpu_key": {"a", "b"}, "dpu_serial": {"MT1", "MT2"},
			"dpu_ip": {"10.180.62.201", "10.180.62.202"}, "dpu_ip6": {""}}
		expect(t, b.post("/expected-machines", f, true), http.StatusUnprocessableEntity, "DPU row 2 of 2", "dpu_ip6")
		expect(t, b.htmx(http.MethodPost, "/expected-machines", f), http.StatusUnprocessableEntity, "DPU row 2 of 2")
		expect(t, b.htmx(http.MethodPost, "/expected-machines/validate", f), http.StatusUnprocessableEntity, "DPU row 2 of 2")
		if _, err := site.a.GetExpectedMachine(context.Background(), "2a:00:00:00:00:05"); err == nil {
			t.Fatal("a broken post created the record")
		}
		f["dpu_ip6"] = []string{"", ""}
		expect(t, b.post("/expected-machines", f, true), http.StatusSeeOther)
		em, err := site.a.GetExpectedMachine(context.Background(), "2a:00:00:00:00:05")
		if err != nil || len(em.ExpectedDPUs) != 2 {
			t.Fatalf("saved: %+v %v", em, err)
		}
		g := withKV(f, "id", em.ID, "name", "changed")
		for _, version := range []string{"", "0"} {
			g.Set("version", version)
			expect(t, b.post("/expected-machines/"+em.ID, g, true), http.StatusUnprocessableEntity, "version", `id="em-form"`)
			expect(t, b.htmx(http.MethodPost, "/expected-machines/"+em.ID, g), http.StatusUnprocessableEntity, "version")
			expect(t, b.post("/expected-machines/"+em.ID+"/delete", url.Values{"version": {version}}, true), http.StatusUnprocessableEntity, "version")
		}
		g.Del("version")
		expect(t, b.post("/expected-machines/"+em.ID, g, true), http.StatusUnprocessableEntity, "version")
		after, err := site.a.GetExpectedMachine(context.Background(), em.ID)
		if err != nil || after.Version != em.Version || after.Metadata.Name != "" {
			t.Fatalf("a save without version changed the record: %+v %v", after, err)
		}
		g.Set("version", fmt.Sprint(em.Version))
		expect(t, b.post("/expected-machines/"+em.ID, g, true), http.StatusSeeOther)
	})
}

// TestConsoleLoginNextAndCSRF: the post-login redirect is a plain path on
// this site, whatever next says (control characters, schemes, hosts,
// backslashes); a cross-site POST /login is refused (login CSRF) while a
// same-origin one signs in.
func TestConsoleLoginNextAndCSRF(t *testing.T) {
	t.Parallel()
	site := newSQLiteSite(t)
	tok := site.tokens[auth.RoleViewer]
	for next, want := range map[string]string{
		"/pools/lo-ip?state=quarantined": "/pools/lo-ip?state=quarantined",
		"/%09/evil.example":              "/",
		"/\t/evil.example":               "/",
		"/\n/evil.example":               "/",
		"/\r\n/evil.example":             "/",
		"/ /evil.example":                "/",
		"//evil.example":                 "/",
		"/\\evil.example":                "/",
		"https://evil.example/":          "/",
		"javascript:alert(1)":            "/",
		"evil.example":                   "/",
		"/login?next=/x":                 "/",
		"/\x7f/evil.example":             "/",
		"/\u0085/evil.example":           "/",
	} {
		// "/%09/..." as typed in a link arrives decoded as a tab.
		v := url.Values{"token": {tok}}
		if next == "/%09/evil.example" {
			v.Set("next", "/\t/evil.example")
		} else {
			v.Set("next", next)
		}
		res := site.anonymous().post("/login", v, false)
		res.Body.Close()
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != want {
			t.Errorf("next %q: %d to %q, want 303 to %q", next, res.StatusCode, res.Header.Get("Location"), want)
		}
	}
	// GET /login?next=… carries the next field through the form the same way.
	body := expect(t, site.anonymous().get("/login?next="+url.QueryEscape("/\t/evil.example")), http.StatusOK)
	if strings.Contains(body, "evil.example") {
		t.Fatal("the login form carries an off-site next")
	}

	post := func(hdr map[string]string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, site.srv.URL+"/login", strings.NewReader(url.Values{"token": {tok}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		return site.anonymous().do(req)
	}
	res := post(map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"})
	expect(t, res, http.StatusForbidden)
	if strings.Contains(res.Header.Get("Set-Cookie"), web.SessionCookie+"=v2") {
		t.Fatal("a cross-site login set a session")
	}
	expect(t, post(map[string]string{"Origin": "https://evil.example"}), http.StatusForbidden)
	expect(t, post(map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": site.srv.URL}), http.StatusSeeOther)
}

// TestConsoleFormNUL: a NUL character in an ExpectedMachine form field
// comes back as the form (422) with the message under that field — page
// without JavaScript, fragment with htmx, out-of-band while typing — and
// nothing is written; other console forms answer 422 naming the field; the
// REST API still refuses NUL form fields itself.
func TestConsoleFormNUL(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		site := newConsoleSite(t, db)
		seedSite(t, site.a)
		b := site.login(auth.RoleAdmin)
		f := url.Values{"mac": {"2a:00:00:00:00:0a"}, "name": {"rack\x00-7"}, "dpu_key": {"k1", "k2"}, "dpu_serial": {"MT1", "MT\x002"},
			"dpu_ip": {"", ""}, "dpu_ip6": {"", ""}}
		nameErr := regexp.MustCompile(`id="err-metadata-name"[^>]*>[^<]*NUL[^<]*</div>`)
		body := expect(t, b.post("/expected-machines", f, true), http.StatusUnprocessableEntity, `<html`, `id="em-form"`, "rack\uFFFD-7")
		if !nameErr.MatchString(body) {
			t.Fatalf("no-JS: the NUL message is not under the name field:\n%s", clip(body))
		}
		body = expect(t, b.htmx(http.MethodPost, "/expected-machines", f), http.StatusUnprocessableEntity, `id="em-form"`)
		if strings.Contains(body, "<html") || !nameErr.MatchString(body) {
			t.Fatalf("htmx: the NUL message is not under the name field:\n%s", clip(body))
		}
		body = expect(t, b.htmx(http.MethodPost, "/expected-machines/validate", f), http.StatusUnprocessableEntity, `hx-swap-oob`)
		if !nameErr.MatchString(body) {
			t.Fatalf("validate: the NUL message is not under the name field:\n%s", clip(body))
		}
		f.Set("name", "rack-7")
		body = expect(t, b.post("/expected-machines", f, true), http.StatusUnprocessableEntity)
		if !regexp.MustCompile(`id="err-dpu-k2-serial_number"[^>]*>[^<]*NUL`).MatchString(body) {
			t.Fatalf("the NUL message is not under the DPU row's serial:\n%s", clip(body))
		}
		if _, err := site.a.GetExpectedMachine(context.Background(), "2a:00:00:00:00:0a"); err == nil {
			t.Fatal("a form with a NUL character was saved")
		}
		// Bytes that are not UTF-8 are refused the same way (PostgreSQL
		// cannot store them: it was a 500).
		f.Set("name", "rack-\xff")
		f["dpu_serial"] = []string{"MT1", "MT2"}
		body = expect(t, b.post("/expected-machines", f, true), http.StatusUnprocessableEntity)
		if !nameErr.MatchString(body) {
			t.Fatalf("no-JS: the UTF-8 message is not under the name field:\n%s", clip(body))
		}
		expect(t, b.post("/pools", url.Values{"name": {"p\xc3"}, "type": {"integer"}, "first": {"1"}, "last": {"9"}}, true), http.StatusUnprocessableEntity, "UTF-8")
		if _, err := site.a.GetExpectedMachine(context.Background(), "2a:00:00:00:00:0a"); err == nil {
			t.Fatal("a form with bytes that are not UTF-8 was saved")
		}
		expect(t, b.post("/pools", url.Values{"name": {"p\x00"}, "type": {"integer"}, "first": {"1"}, "last": {"9"}}, true), http.StatusUnprocessableEntity, "NUL")
		expect(t, b.htmx(http.MethodPost, "/pools", url.Values{"name": {"p\x00"}, "type": {"integer"}, "first": {"1"}, "last": {"9"}}), http.StatusUnprocessableEntity, "NUL")
		// Without the CSRF token it is still 403 first.
		noCSRF := withKV(f)
		noCSRF.Del("csrf_token")
		expect(t, b.post("/expected-machines", noCSRF, false), http.StatusForbidden)
		// The API reads JSON whatever the Content-Type says (curl -d sends
		// JSON as a form): a form body is not JSON, so 400 bad_request, and
		// nothing is stored.
		req, _ := http.NewRequest(http.MethodPost, site.srv.URL+"/api/v1/pools", strings.NewReader("name=p%00"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer "+site.tokens[auth.RoleAdmin])
		expect(t, site.anonymous().do(req), http.StatusBadRequest, "bad_request")
		if _, err := site.a.GetPool(context.Background(), "p\x00"); err == nil {
			t.Fatal("a pool named with a NUL character was stored")
		}
	})
}

// TestConsoleUXNits: GET /logout offers the sign-out button and ends
// nothing; a ready host's Delete is disabled with the reason and its
// delete dialog offers no button; impact actions are worded for humans;
// the decommission dialog says no address changes yet; deleting an
// ExpectedMachine and unquarantining ask first; the ExpectedMachine form
// does not hand hx-disabled-elt down to its validation element; an
// oversized console form post is 413, not 403.
func TestConsoleUXNits(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		site := newConsoleSite(t, db)
		seedBelievableSite(t, site)
		op := site.login(auth.RoleOperator)
		expect(t, op.get("/logout"), http.StatusOK, `action="/logout"`, `name="csrf_token"`, "Sign out")
		// Lifecycle actions live in the row menu and on the machine page,
		// not as buttons on the list rows.
		body := expect(t, op.get("/machines"), http.StatusOK, `<details class="menu">`, "Decommission…")
		if strings.Contains(body, `class="button danger"`) {
			t.Fatal("the machines list shows a red button on its rows")
		}
		host := allocator.HostMachineID("1a:1b:1c:1d:1e:1f")
		body = expect(t, op.get("/machines/"+host+"/impact?action=delete"), http.StatusOK, "cannot be deleted yet", "Decommission it first")
		if strings.Contains(body, `<button type="submit" class="danger">Delete</button>`) {
			t.Fatal("the delete dialog of a ready host offers the Delete button")
		}
		// The decommission dialog says what decommission and the later
		// delete do, not the delete's pre-check.
		body = expect(t, op.get("/machines/"+host+"/impact?action=decommission"), http.StatusOK, "Nothing else changes now", "After that, <strong>Delete</strong>", "returned to its reservation")
		if strings.Contains(body, "requires decommissioning") {
			t.Fatal("the decommission dialog shows the delete's pre-check text")
		}
		em, err := site.a.GetExpectedMachine(context.Background(), "1a:1b:1c:1d:1e:1f")
		if err != nil {
			t.Fatal(err)
		}
		// Deleting an ExpectedMachine and unquarantining open the styled
		// confirmation, not the browser's confirm().
		body = expect(t, op.get("/expected-machines/"+em.ID+"/edit"), http.StatusOK, `hx-get="/expected-machines/`+em.ID+`/delete"`, `hx-disinherit="hx-disabled-elt"`)
		if strings.Contains(body, "data-confirm=") {
			t.Fatal("the ExpectedMachine form still uses confirm()")
		}
		expect(t, op.get("/expected-machines/"+em.ID+"/delete"), http.StatusOK, `id="confirm-form"`, "Delete ExpectedMachine rack7-u12")
		admin := site.login(auth.RoleAdmin)
		body = expect(t, admin.get("/pools/lo-ip?state=quarantined"), http.StatusOK, `hx-get="/pools/lo-ip/unquarantine?value=`)
		if strings.Contains(body, "data-confirm=") {
			t.Fatal("unquarantine still uses confirm()")
		}
		body = expect(t, admin.get("/machines/"+host+"/impact?action=force-delete"), http.StatusOK, "No value goes to quarantine", "returned to its reservation")
		if strings.Contains(body, "keeps every value it may still carry out of use") {
			t.Fatal("the force-delete dialog speaks of quarantine when every value returns to its reservation")
		}

		big := url.Values{"mac": {strings.Repeat("a", 11<<20)}}
		expect(t, op.post("/expected-machines", big, true), http.StatusRequestEntityTooLarge, "larger than")
		req, _ := http.NewRequest(http.MethodPost, site.srv.URL+"/expected-machines", io.MultiReader(strings.NewReader("csrf_token="+op.csrf+"&mac="), strings.NewReader(strings.Repeat("b", 11<<20))))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.ContentLength = -1 // chunked: the limit is found while reading
		expect(t, op.do(req), http.StatusRequestEntityTooLarge)
	})
}

// TestConsoleExpectedMachineFormatAndConflictTogether: a form with a
// malformed field and a loopback that another record already declares
// shows both at once — the format problem and the conflict, each under its
// own field — as you type, on save, and per record in a merge import.
func TestConsoleExpectedMachineFormatAndConflictTogether(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		site := newConsoleSite(t, db)
		seedSite(t, site.a)
		ctx := audit.WithActor(context.Background(), "test", "")
		ip := "10.180.62.201"
		if _, err := site.a.CreateExpectedMachine(ctx, allocator.ExpectedMachineSpec{BmcMacAddress: "2a:00:00:00:00:01",
			ExpectedDPUs: &[]allocator.ExpectedDPU{{SerialNumber: "MT-OTHER", LoopbackIP: &ip}}}); err != nil {
			t.Fatal(err)
		}
		b := site.login(auth.RoleOperator)
		f := url.Values{"mac": {"not-a-mac"}, "dpu_key": {"bad", "dup"}, "dpu_serial": {"MT-A", "MT-B"},
			"dpu_ip": {"1.2.3", ip}, "dpu_ip6": {"", ""}}
		want := []*regexp.Regexp{
			regexp.MustCompile(`id="err-bmc_mac_address"[^>]*>[^<]+</div>`),
			regexp.MustCompile(`id="err-dpu-bad-loopback_ip"[^>]*>[^<]+</div>`),
			regexp.MustCompile(`id="err-dpu-dup-loopback_ip"[^>]*>[^<]*MT-OTHER[^<]*</div>`),
		}
		for what, res := range map[string]*http.Response{
			"as you type": b.htmx(http.MethodPost, "/expected-machines/validate", f),
			"htmx save":   b.htmx(http.MethodPost, "/expected-machines", f),
		} {
			body := expect(t, res, http.StatusUnprocessableEntity)
			for _, re := range want {
				if !re.MatchString(body) {
					t.Errorf("%s: no %s:\n%s", what, re, clip(body))
				}
			}
		}
	})
}

// TestConsoleFixConflict: a DPU reported under the wrong host is in
// conflict; its page names the ExpectedMachine that declares it and offers
// "Assign missing loopbacks now", which reports what is still missing
// while the cause remains and assigns the reserved value once the operator
// moved the declaration to the DPU's host.
func TestConsoleFixConflict(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		site := newConsoleSite(t, db)
		seedBelievableSite(t, site)
		ctx := audit.WithActor(context.Background(), "test", "")
		op := site.login(auth.RoleOperator)
		dpu := allocator.DPUMachineID("MT2242X00020")
		page := expect(t, op.get("/machines/"+dpu), http.StatusOK, "declared by ExpectedMachine", "rack8-u03", "Assign missing loopbacks now")
		checkFormsCarryCSRF(t, "/machines/"+dpu, page)
		expect(t, op.post("/machines/"+dpu+"/ensure-loopbacks", nil, true), http.StatusSeeOther)
		expect(t, op.get("/machines/"+dpu), http.StatusOK, "still not assigned", "MT2242X00020 ipv4")
		// The fix: rack8-u03 no longer declares the DPU, its host's
		// ExpectedMachine (rack7-u14) does, with the same reservation.
		if _, err := site.a.PatchExpectedMachine(ctx, "2a:00:00:00:00:32", []byte(`{"expected_dpus":[]}`), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := site.a.PatchExpectedMachine(ctx, "1a:1b:1c:1d:1e:20", []byte(`{"expected_dpus":[
			{"serial_number":"MT2242X00002","loopback_ip":"10.180.62.201"},{"serial_number":"MT2242X00003"},
			{"serial_number":"MT2242X00020","loopback_ip":"10.180.62.220"}]}`), nil); err != nil {
			t.Fatal(err)
		}
		res := op.htmx(http.MethodPost, "/machines/"+dpu+"/ensure-loopbacks", url.Values{})
		expect(t, res, http.StatusOK)
		if res.Header.Get("HX-Redirect") != "/machines/"+dpu {
			t.Fatalf("HX-Redirect %q", res.Header.Get("HX-Redirect"))
		}
		b, err := site.a.GetBinding(context.Background(), dpu)
		if err != nil || b.StatusV4 != allocator.BindingReserved || b.LoopbackIP == nil || *b.LoopbackIP != "10.180.62.220" {
			t.Fatalf("binding after the fix: %+v %v", b, err)
		}
		body := expect(t, op.get("/machines/"+dpu), http.StatusOK, "Every loopback of MT2242X00020 is assigned")
		if strings.Contains(body, "Assign missing loopbacks now") {
			t.Error("the button stays once every loopback is assigned")
		}
		// A viewer sees no such button and may not post it.
		v := site.login(auth.RoleViewer)
		if strings.Contains(expect(t, v.get("/machines/"+dpu), http.StatusOK), "ensure-loopbacks") {
			t.Error("a viewer sees the assign button")
		}
		expect(t, v.post("/machines/"+dpu+"/ensure-loopbacks", nil, true), http.StatusForbidden)
	})
}

// TestConsoleSearch: the header's search redirects one exact match (303)
// to its page and lists several by kind, for every role, on both
// databases; the allocations table filters by value or prefix.
func TestConsoleSearch(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		site := newConsoleSite(t, db)
		seedBelievableSite(t, site)
		v := site.login(auth.RoleViewer)
		for q, loc := range map[string]string{
			"MT2242X00001":           "/machines/" + allocator.DPUMachineID("MT2242X00001"),
			"1A-1B-1C-1D-1E-20":      "/machines/" + allocator.HostMachineID("1a:1b:1c:1d:1e:20"),
			"1a1b.1c1d.1e20":         "/machines/" + allocator.HostMachineID("1a:1b:1c:1d:1e:20"), // a switch's spelling
			"1A1B1C1D1E20":           "/machines/" + allocator.HostMachineID("1a:1b:1c:1d:1e:20"),
			"rack7-u12":              "/machines/" + allocator.HostMachineID("1a:1b:1c:1d:1e:1f"),
			"10.180.62.201":          "/machines/" + allocator.DPUMachineID("MT2242X00002"),
			"fd00:180:62:1:0:0:0:c8": "/machines/" + allocator.DPUMachineID("MT2242X00001"),
			"SN-R8-U03":              "/expected-machines/" + emID(t, site, "2a:00:00:00:00:32"),
			"vlan-id":                "/pools/vlan-id",
		} {
			res := v.get("/search?q=" + url.QueryEscape(q))
			readBody(t, res)
			if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != loc {
				t.Errorf("search %q: %d to %q, want 303 to %q", q, res.StatusCode, res.Header.Get("Location"), loc)
			}
		}
		body := expect(t, v.get("/search?q=10.180.62.0/24"), http.StatusOK, `data-kind="pool"`, `data-kind="allocation"`, "lo-ip 10.180.62.1<")
		if strings.Index(body, `data-kind="pool"`) > strings.Index(body, `data-kind="allocation"`) {
			t.Error("a prefix's pools are not listed before its values")
		}
		expect(t, v.get("/search?q=nothing-here"), http.StatusOK, "Nothing matches")
		expect(t, v.get("/search?q="+strings.Repeat("x", 201)), http.StatusUnprocessableEntity, "at most 200")
		expect(t, v.get("/pools/lo-ip?value=10.180.62.200/30"), http.StatusOK, "10.180.62.200<", "10.180.62.201<")
		expect(t, v.get("/pools/lo-ip?value=fd00::/64"), http.StatusUnprocessableEntity, "family")
	})
}
