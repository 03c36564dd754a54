// Package browserkit drives headless Chromium (chromedp) for the
// end-to-end tests of the console: a browser off the network, steps that
// fail the test with the page's text, and polls that survive navigation.
package browserkit

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// ChromiumPath is the browser the tests drive (Debian package chromium,
// installed by .ci/run); IPLEDGER_CHROMIUM overrides it.
func ChromiumPath() string {
	if p := os.Getenv("IPLEDGER_CHROMIUM"); p != "" {
		return p
	}
	return "/usr/bin/chromium"
}

// New starts headless Chromium with a fresh profile and the flags that
// keep it off the network, sized w×h. Without Chromium the test skips
// (fails under CI=true).
func New(t testing.TB, w, h int) context.Context {
	t.Helper()
	path := ChromiumPath()
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Chromium is required under CI=true but %s is missing: %v", path, err)
		}
		t.Skipf("Chromium not found at %s (apt-get install chromium, or set IPLEDGER_CHROMIUM): skipping the browser test", path)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(w, h),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 10*time.Minute)
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}

// Run runs browser actions, failing the test with the step's name and
// the page's text.
func Run(t testing.TB, ctx context.Context, step string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		loc, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
		if len(body) > 2000 {
			body = body[:2000] + "…"
		}
		t.Fatalf("%s: %v\nat %s, page text:\n%s", step, err, loc, body)
	}
}

// Poll waits until the JavaScript expression is truthy. A navigation (a
// form posted, a redirect followed) ends a running poll; it then starts
// again on the new page until the step's deadline.
func Poll(expr string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		for {
			p := chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(90*time.Second))
			v, err := p(ctx, tg)
			if err == nil || ctx.Err() != nil {
				return v, err
			}
			m := err.Error()
			if !strings.Contains(m, "navigated") && !strings.Contains(m, "context was destroyed") &&
				!strings.Contains(m, "Cannot find context") && !strings.Contains(m, "null") {
				return v, err
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// JSString quotes s as a JavaScript string literal.
func JSString(s string) string {
	return "\"" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "\"", "\\\"") + "\""
}
