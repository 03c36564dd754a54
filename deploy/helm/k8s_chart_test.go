package helm_test

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// The manager's settings every rendering below starts from.
const k8sValues = `
clusterName: site-a
ipledger:
  url: https://ipledger.example:8443
  token: operator-token
`

// k8sManifests is one rendering of the ipledger-k8s chart, decoded.
type k8sManifests struct {
	deployment     *appsv1.Deployment
	serviceAccount *corev1.ServiceAccount
	role           *rbacv1.ClusterRole
	binding        *rbacv1.ClusterRoleBinding
	secret         *corev1.Secret
	service        *corev1.Service
}

// renderK8s renders the ipledger-k8s chart as `helm template site
// ./ipledger-k8s -n capi-ipam -f values.yaml` would, missing keys an
// error.
func renderK8s(t *testing.T, values string) (map[string]string, error) {
	t.Helper()
	ch, err := loader.Load("ipledger-k8s")
	if err != nil {
		t.Fatal(err)
	}
	over, err := chartutil.ReadValues([]byte(values))
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ToRenderValues(ch, over, chartutil.ReleaseOptions{Name: "site", Namespace: "capi-ipam", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	return engine.Engine{Strict: true}.Render(ch, vals)
}

// decodeK8s renders the chart and decodes every manifest strictly into
// its Kubernetes API type.
func decodeK8s(t *testing.T, values string) k8sManifests {
	t.Helper()
	files, err := renderK8s(t, values)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	var m k8sManifests
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		for i, doc := range strings.Split(files[name], "\n---") {
			if strings.TrimSpace(stripYAMLComments(doc)) == "" {
				continue
			}
			var meta struct{ APIVersion, Kind string }
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				t.Fatalf("%s #%d: %v\n%s", name, i, err, doc)
			}
			var into any
			switch meta.APIVersion + " " + meta.Kind {
			case "apps/v1 Deployment":
				m.deployment = new(appsv1.Deployment)
				into = m.deployment
			case "v1 ServiceAccount":
				m.serviceAccount = new(corev1.ServiceAccount)
				into = m.serviceAccount
			case "rbac.authorization.k8s.io/v1 ClusterRole":
				m.role = new(rbacv1.ClusterRole)
				into = m.role
			case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
				m.binding = new(rbacv1.ClusterRoleBinding)
				into = m.binding
			case "v1 Secret":
				m.secret = new(corev1.Secret)
				into = m.secret
			case "v1 Service":
				m.service = new(corev1.Service)
				into = m.service
			default:
				t.Fatalf("%s #%d: unexpected %s %s", name, i, meta.APIVersion, meta.Kind)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
				t.Fatalf("%s #%d does not decode strictly into %s: %v\n%s", name, i, meta.Kind, err, doc)
			}
		}
	}
	if m.deployment == nil || m.serviceAccount == nil || m.role == nil || m.binding == nil {
		t.Fatalf("no Deployment, ServiceAccount, ClusterRole or ClusterRoleBinding rendered: %v", slices.Sorted(maps.Keys(files)))
	}
	return m
}

func stripYAMLComments(doc string) string {
	var out []string
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// The chart renders the manager of one cluster: every object decodes
// strictly; the Deployment runs the image of the chart's appVersion with
// the URL, cluster name and token file, leader election, probes on
// /readyz and /healthz, non-root on a read-only root filesystem; the
// ServiceAccount is bound to a ClusterRole granting exactly what the
// manager's RBAC markers say (k8s/config/rbac/role.yaml).
func TestK8sChartRendersTheManager(t *testing.T) {
	t.Parallel()
	m := decodeK8s(t, k8sValues)
	pod := m.deployment.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("containers: %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image != "ghcr.io/ipledger/ipledger-k8s:dev" {
		t.Errorf("image %q, want the chart's appVersion", c.Image)
	}
	for _, a := range []string{"--ipledger-url=https://ipledger.example:8443", "--cluster-name=site-a", "--token-file=/etc/ipledger/token",
		"--leader-elect", "--health-probe-bind-address=:8081", "--metrics-bind-address=:8080"} {
		if !slices.Contains(c.Args, a) {
			t.Errorf("args %q lack %s", c.Args, a)
		}
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("probes %+v %+v", c.ReadinessProbe, c.LivenessProbe)
	}
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot ||
		c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("the manager must run as non-root on a read-only root filesystem")
	}
	if m.secret == nil || string(m.secret.Data["token"]) != "operator-token" {
		t.Fatalf("the chart's Secret does not hold the token: %+v", m.secret)
	}
	if v := volume(pod, "ipledger"); v == nil || v.Secret == nil || v.Secret.SecretName != m.secret.Name {
		t.Errorf("the token's volume is not the chart's Secret %s: %+v", m.secret.Name, v)
	}
	if pod.ServiceAccountName != m.serviceAccount.Name || m.binding.RoleRef.Name != m.role.Name ||
		len(m.binding.Subjects) != 1 || m.binding.Subjects[0].Name != m.serviceAccount.Name || m.binding.Subjects[0].Namespace != "capi-ipam" {
		t.Errorf("the ClusterRoleBinding %+v does not bind %s to the pod's ServiceAccount %s", m.binding, m.role.Name, pod.ServiceAccountName)
	}
	b, err := os.ReadFile("../../k8s/config/rbac/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var want rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(b, &want); err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(m.role.Rules, want.Rules, func(a, b rbacv1.PolicyRule) bool {
		return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) && slices.Equal(a.Verbs, b.Verbs)
	}) {
		t.Errorf("the chart's ClusterRole differs from k8s/config/rbac/role.yaml: run `go generate ./api/...` in k8s/")
	}
	if m.service == nil || m.service.Spec.Ports[0].Port != 8080 {
		t.Errorf("metrics Service: %+v", m.service)
	}
}

// The chart's CRDs are those generated from the manager's API types,
// byte for byte (Helm installs crds/ before the templates, and never
// upgrades them: docs/kubernetes.md says so).
func TestK8sChartCRDsAreGenerated(t *testing.T) {
	t.Parallel()
	want, err := filepath.Glob("../../k8s/config/crd/bases/*.yaml")
	if err != nil || len(want) == 0 {
		t.Fatalf("no CRDs in k8s/config/crd/bases: %v", err)
	}
	ch, err := loader.Load("ipledger-k8s")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	for _, f := range ch.CRDObjects() {
		got[filepath.Base(f.Filename)] = f.File.Data
	}
	for _, f := range want {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[filepath.Base(f)], b) {
			t.Errorf("the chart's crds/%s differs from k8s/config/crd/bases: run `go generate ./api/...` in k8s/", filepath.Base(f))
		}
	}
	if len(got) != len(want) {
		t.Errorf("the chart holds %d CRDs, k8s/config/crd/bases %d", len(got), len(want))
	}
}

// A missing setting fails the rendering with a message naming the value;
// a token given twice is refused rather than one of them ignored; a
// Secret of one's own replaces the chart's.
func TestK8sChartSettings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ values, want string }{
		{"ipledger: {url: https://l, token: t}", "clusterName"},
		{"clusterName: a\nipledger: {token: t}", "ipledger.url"},
		{"clusterName: a\nipledger: {url: https://l}", "ipledger.token"},
		{"clusterName: a\nipledger: {url: https://l, token: t, existingSecret: mine}", "both set"},
		{"clusterName: a\nipledger: {url: https://l, existingSecret: mine, caCert: PEM}", "caCertKey"},
	} {
		if _, err := renderK8s(t, tc.values); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error naming %s", tc.values, err, tc.want)
		}
	}
	m := decodeK8s(t, "clusterName: a\nipledger: {url: https://l, existingSecret: mine, tokenKey: tok, caCertKey: ca.pem}\nmanager: {watchNamespaces: [capi-a, capi-b], kubeAPIQPS: 300}")
	if m.secret != nil {
		t.Errorf("a Secret rendered beside existingSecret")
	}
	pod := m.deployment.Spec.Template.Spec
	if v := volume(pod, "ipledger"); v == nil || v.Secret == nil || v.Secret.SecretName != "mine" {
		t.Errorf("the token's volume is not the Secret mine: %+v", v)
	}
	for _, a := range []string{"--token-file=/etc/ipledger/tok", "--ca-cert=/etc/ipledger/ca.pem", "--watch-namespaces=capi-a,capi-b", "--kube-api-qps=300"} {
		if !slices.Contains(pod.Containers[0].Args, a) {
			t.Errorf("args %q lack %s", pod.Containers[0].Args, a)
		}
	}
}
