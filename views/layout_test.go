package views

import (
	"context"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/buildinfo"
)

// Every signed-in page's footer names the running build.
func TestLayoutFooterShowsVersion(t *testing.T) {
	var b strings.Builder
	if err := Layout(Page{Title: "Pools", Nav: "pools", User: "token:admin"}).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	in := buildinfo.Get()
	html := b.String()
	_, foot, ok := strings.Cut(html, "<footer")
	foot, _, ok2 := strings.Cut(foot, "</footer>")
	if !ok || !ok2 {
		t.Fatalf("no footer in:\n%s", html)
	}
	for _, want := range []string{`data-version="` + in.Version + `"`, "ipledger " + in.Version, in.ShortCommit(), "built " + in.Date} {
		if !strings.Contains(foot, want) {
			t.Errorf("footer %q lacks %q", foot, want)
		}
	}
}
