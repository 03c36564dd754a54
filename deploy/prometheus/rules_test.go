package prometheus_test

import (
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// The rules file is a valid Prometheus rule file: rulefmt checks its
// shape, each expression parses and each template renders (what
// `promtool check rules` checks), every alert has a severity, a summary
// and a wait or a one-shot reason, and every ipledger_ metric it reads is
// one the server exports (web/metrics.go: the web package's test checks
// the names against the live registry).
func TestRules(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("ipledger-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.Parse(data, false, model.LegacyValidation, p, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("ipledger-rules.yaml: %v", errs)
	}
	if len(groups.Groups) == 0 {
		t.Fatal("no rule groups")
	}
	alerts := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: needs a summary and a description", r.Alert)
			}
			expr, err := p.ParseExpr(r.Expr)
			if err != nil {
				t.Errorf("%s: %v", r.Alert, err)
				continue
			}
			parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
				if vs, ok := n.(*parser.VectorSelector); ok && !strings.HasPrefix(vs.Name, "ipledger_") &&
					vs.Name != "up" && !strings.HasPrefix(vs.Name, "process_") && !strings.HasPrefix(vs.Name, "go_") {
					t.Errorf("%s reads %q: neither ipledger's nor a standard metric", r.Alert, vs.Name)
				}
				return nil
			})
		}
	}
	if alerts < 8 {
		t.Errorf("%d alerts", alerts)
	}
}
