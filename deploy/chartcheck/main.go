// Command chartcheck renders a packaged chart as `helm template` would,
// with its default values and missing keys an error, and checks that it
// deploys the release's image: scripts/ci-extra.sh runs it on the chart
// archive scripts/release.sh writes.
//
//	cd deploy && go run ./chartcheck ../dist/ipledger-chart-v1.2.0.tgz v1.2.0
package main

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: chartcheck CHART.tgz VERSION")
		os.Exit(2)
	}
	if err := check(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintf(os.Stderr, "chartcheck %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func check(archive, version string) error {
	ch, err := loader.Load(archive)
	if err != nil {
		return err
	}
	if ch.Metadata.AppVersion != version {
		return fmt.Errorf("appVersion %q, want %q", ch.Metadata.AppVersion, version)
	}
	vals, err := chartutil.ToRenderValues(ch, nil, chartutil.ReleaseOptions{Name: "site", Namespace: "ipledger", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		return err
	}
	files, err := engine.Engine{Strict: true}.Render(ch, vals)
	if err != nil {
		return err
	}
	var kinds []string
	image := ""
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		for _, doc := range strings.Split(files[name], "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var meta struct{ Kind string }
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			kinds = append(kinds, meta.Kind)
			if meta.Kind == "Deployment" {
				var d appsv1.Deployment
				if err := yaml.UnmarshalStrict([]byte(doc), &d); err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				image = d.Spec.Template.Spec.Containers[0].Image
			}
		}
	}
	if !strings.HasSuffix(image, ":"+version) {
		return fmt.Errorf("the Deployment runs %q, not the release's image %s", image, version)
	}
	fmt.Printf("chart %s %s (appVersion %s) renders %s; image %s\n", ch.Metadata.Name, ch.Metadata.Version, version, strings.Join(kinds, ", "), image)
	return nil
}
