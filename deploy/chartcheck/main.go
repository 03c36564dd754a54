// Command chartcheck renders a packaged chart as `helm template` would,
// with its default values and missing keys an error, and checks that it
// deploys the release's image: scripts/release-check.sh runs it on the
// chart archive scripts/release.sh writes. Given the release's OCI
// layout too, it checks that the layout names its image exactly as the
// chart pulls it, so an image loaded from the layout (`podman load`,
// `skopeo copy`) is the one the chart deploys.
//
//	cd deploy && go run ./chartcheck ../dist/ipledger-chart-v1.2.0.tgz v1.2.0 [../dist/oci]
//	cd deploy && go run ./chartcheck -set clusterName=a,ipledger.url=https://l,ipledger.token=t \
//	    ../dist/ipledger-k8s-chart-v1.2.0.tgz v1.2.0 ../dist/oci-ipledger-k8s
//
// -set gives the values a chart requires (as `helm template --set`).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/strvals"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	set := flag.String("set", "", "values the chart requires, as helm --set takes them (a=b,c.d=e)")
	flag.Parse()
	args := flag.Args()
	if len(args) != 2 && len(args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: chartcheck [-set VALUES] CHART.tgz VERSION [OCI-LAYOUT-DIR]")
		os.Exit(2)
	}
	values, err := strvals.Parse(*set)
	if err != nil {
		fmt.Fprintf(os.Stderr, "chartcheck: -set: %v\n", err)
		os.Exit(2)
	}
	image, err := check(args[0], args[1], values)
	if err == nil && len(args) == 3 {
		err = checkLayoutName(args[2], image)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "chartcheck %s: %v\n", args[0], err)
		os.Exit(1)
	}
}

// checkLayoutName checks that the OCI layout at dir names its one image
// image (org.opencontainers.image.ref.name).
func checkLayoutName(dir, image string) error {
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		return err
	}
	var idx struct {
		Manifests []struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		return fmt.Errorf("%s/index.json: %w", dir, err)
	}
	if len(idx.Manifests) != 1 || idx.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != image {
		return fmt.Errorf("%s/index.json names %+v; the chart deploys %s: the loaded image would not be the one the chart pulls", dir, idx.Manifests, image)
	}
	fmt.Printf("the OCI layout %s names its image %s, as the chart pulls it\n", dir, image)
	return nil
}

// check renders the chart and returns the image its Deployment runs.
func check(archive, version string, values map[string]any) (string, error) {
	ch, err := loader.Load(archive)
	if err != nil {
		return "", err
	}
	if ch.Metadata.AppVersion != version {
		return "", fmt.Errorf("appVersion %q, want %q", ch.Metadata.AppVersion, version)
	}
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{Name: "site", Namespace: "ipledger", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		return "", err
	}
	files, err := engine.Engine{Strict: true}.Render(ch, vals)
	if err != nil {
		return "", err
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
				return "", fmt.Errorf("%s: %w", name, err)
			}
			kinds = append(kinds, meta.Kind)
			if meta.Kind == "Deployment" {
				var d appsv1.Deployment
				if err := yaml.UnmarshalStrict([]byte(doc), &d); err != nil {
					return "", fmt.Errorf("%s: %w", name, err)
				}
				image = d.Spec.Template.Spec.Containers[0].Image
			}
		}
	}
	if !strings.HasSuffix(image, ":"+version) {
		return "", fmt.Errorf("the Deployment runs %q, not the release's image %s", image, version)
	}
	fmt.Printf("chart %s %s (appVersion %s) renders %s; image %s\n", ch.Metadata.Name, ch.Metadata.Version, version, strings.Join(kinds, ", "), image)
	return image, nil
}
