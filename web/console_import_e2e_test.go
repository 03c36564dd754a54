package web_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/bench/emfile"
	"github.com/ipledger/ipledger/poolfile"
)

// TestConsoleImportShowsServerWork imports a NICo file of 3,000 records
// (300 with -short: CI's race run, where 3,000 outlast a browser step) in
// replace mode through the console in headless Chromium: once the upload
// bar is full, the status names the number of records the server is
// checking and writing (counted from the chosen file) until the outcome
// replaces it (docs/console.md "Import").
func TestConsoleImportShowsServerWork(t *testing.T) {
	t.Parallel()
	site := newSQLiteSite(t)
	if _, err := poolfile.Load(context.Background(), site.a, []byte(emfile.Pools)); err != nil {
		t.Fatal(err)
	}
	n, shown := 3000, "3,000"
	if testing.Short() {
		n, shown = 300, "300"
	}
	file := filepath.Join(t.TempDir(), "expected-machines.json")
	if err := os.WriteFile(file, emfile.Generate(n, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := newBrowser(t, 1280, 900)
	base := site.srv.URL
	run(t, ctx, "sign in",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), site.tokens[auth.RoleOperator]),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button[type=submit]`)),
		poll(`location.pathname === "/" && document.querySelector("h1").innerText === "Dashboard"`),
	)
	run(t, ctx, "choose the file: the page counts its records",
		chromedp.Navigate(base+"/expected-machines/import"),
		chromedp.WaitVisible(chromedp.CSS(`#i-file`)),
		chromedp.SetUploadFiles(chromedp.CSS(`#i-file`), []string{file}),
		poll(fmt.Sprintf(`document.querySelector("#i-file").dataset.records === "%d"`, n)),
	)
	run(t, ctx, "import in replace mode: the status follows the server's work, then the outcome shows",
		chromedp.Evaluate[chromedp.Void](`(() => {
			window.importStatuses = [];
			const s = document.querySelector("#import-status");
			new MutationObserver(() => window.importStatuses.push(s.textContent)).observe(s, {childList: true, characterData: true, subtree: true});
			return true })()`),
		chromedp.Click(chromedp.CSS(`input[name=mode][value=replace]`)),
		chromedp.Click(chromedp.CSS(`form[action="/expected-machines/import"] button[type=submit]`)),
		poll(fmt.Sprintf(`document.querySelector("#import-result").innerText.includes("of %d records")`, n)),
	)
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.importStatuses`))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range got {
		found = found || strings.Contains(s, "The server is checking and writing "+shown+" records in one transaction… ")
	}
	if !found {
		t.Fatalf("no status named the records the server works on; statuses: %q", got)
	}
	res, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#import-result").innerText`))
	if err != nil || !strings.Contains(res, fmt.Sprintf("0 failed of %d records", n)) {
		t.Fatalf("outcome: %q %v", res, err)
	}
}
