package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/ipledger/ipledger/k8s/internal/app"
)

const configDir = "../../config"

// variables are the clusterctl variables of the components, each
// documented in docs/kubernetes.md, with a value to substitute here.
var variables = map[string]string{
	"IPLEDGER_URL":           "https://ipledger.example:8443",
	"IPLEDGER_TOKEN":         "operator-token",
	"IPLEDGER_CLUSTER_NAME":  "mgmt",
	"IPLEDGER_K8S_IMAGE":     "",
	"IPLEDGER_K8S_LOG_LEVEL": "",
}

var variableRE = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)(:=([^}]*))?\}`)

// substitute replaces each ${NAME} or ${NAME:=default} as clusterctl does
// with the value of variables (or the default when that is empty).
func substitute(t *testing.T, s string) string {
	t.Helper()
	return variableRE.ReplaceAllStringFunc(s, func(m string) string {
		g := variableRE.FindStringSubmatch(m)
		v, ok := variables[g[1]]
		if !ok {
			t.Errorf("the components use the variable %s, which this test (and docs/kubernetes.md) does not know", g[1])
		}
		if v == "" {
			if g[2] == "" {
				t.Errorf("the variable %s has no default and no test value", g[1])
			}
			v = g[3]
		}
		return v
	})
}

// decodeStrict decodes every object of a YAML stream into its Go type,
// refusing unknown and duplicate fields and kinds the scheme does not
// know.
func decodeStrict(t *testing.T, name string, b []byte) []client.Object {
	t.Helper()
	scheme, err := app.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := apiextv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	dec := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	var out []client.Object
	for i, doc := range splitDocs(b) {
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, gvk, err := dec.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: object %d does not decode strictly: %v\n%s", name, i, err, doc)
		}
		co, ok := obj.(client.Object)
		if !ok {
			t.Fatalf("%s: object %d (%s) is not a Kubernetes object", name, i, gvk)
		}
		out = append(out, co)
	}
	return out
}

func stripComments(b []byte) []byte {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			out = append(out, l)
		}
	}
	return []byte(strings.Join(out, "\n"))
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The committed components are what hack/components writes from the
// CRDs, the ClusterRole and the manager's part: a change to the API types
// or the RBAC markers reaches clusterctl's file through go generate.
func TestComponentsAreGenerated(t *testing.T) {
	t.Parallel()
	want, err := build(configDir)
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(configDir, "ipam-components.yaml")); !bytes.Equal(got, want) {
		t.Fatal("config/ipam-components.yaml is stale: run `go generate ./api/...` in the k8s module and commit it")
	}
}

// Every object of ipam-components.yaml, its variables substituted as
// clusterctl does, decodes strictly into its Go type and carries the
// provider label; its CRDs are those of config/crd/bases, its ClusterRole
// grants what config/rbac/role.yaml does, and the Deployment runs the
// manager with the token, URL and cluster name given.
func TestComponentsDecodeStrictly(t *testing.T) {
	t.Parallel()
	raw := string(read(t, filepath.Join(configDir, "ipam-components.yaml")))
	docs := string(read(t, "../../../docs/kubernetes.md"))
	for name := range variables {
		if !strings.Contains(docs, "`"+name+"`") {
			t.Errorf("docs/kubernetes.md does not document the clusterctl variable `%s`", name)
		}
		if !strings.Contains(raw, "${"+name) {
			t.Errorf("the components do not use the variable %s", name)
		}
	}
	objs := decodeStrict(t, "ipam-components.yaml", []byte(substitute(t, raw)))

	kinds := map[string]int{}
	crds := map[string]*apiextv1.CustomResourceDefinition{}
	var role *rbacv1.ClusterRole
	var binding *rbacv1.ClusterRoleBinding
	var dep *appsv1.Deployment
	var secret *corev1.Secret
	var sa *corev1.ServiceAccount
	for _, o := range objs {
		kind := o.GetObjectKind().GroupVersionKind().Kind
		kinds[kind]++
		if o.GetLabels()[ProviderLabel] != Provider {
			t.Errorf("%s %s: labels %v, want %s: %s", kind, o.GetName(), o.GetLabels(), ProviderLabel, Provider)
		}
		if o.GetNamespace() != "" && o.GetNamespace() != "ipam-ipledger-system" {
			t.Errorf("%s %s in namespace %s, want ipam-ipledger-system", kind, o.GetName(), o.GetNamespace())
		}
		switch v := o.(type) {
		case *apiextv1.CustomResourceDefinition:
			crds[v.Name] = v
		case *rbacv1.ClusterRole:
			role = v
		case *rbacv1.ClusterRoleBinding:
			binding = v
		case *appsv1.Deployment:
			dep = v
		case *corev1.Secret:
			secret = v
		case *corev1.ServiceAccount:
			sa = v
		}
	}
	for kind, n := range map[string]int{"Namespace": 1, "ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "Secret": 1, "Deployment": 1} {
		if kinds[kind] != n {
			t.Errorf("%d objects of kind %s, want %d (all: %v)", kinds[kind], kind, n, kinds)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// The CRDs: those generated from the API types, nothing more.
	files, _ := filepath.Glob(filepath.Join(configDir, "crd", "bases", "*.yaml"))
	var names []string
	for _, f := range files {
		for _, o := range decodeStrict(t, f, read(t, f)) {
			want := o.(*apiextv1.CustomResourceDefinition)
			names = append(names, want.Name)
			got := crds[want.Name]
			if got == nil {
				t.Errorf("the components lack the CRD %s of %s", want.Name, f)
				continue
			}
			if !equality.Semantic.DeepEqual(got.Spec, want.Spec) {
				t.Errorf("the CRD %s differs from %s", want.Name, f)
			}
		}
	}
	if len(crds) != len(names) {
		t.Errorf("the components hold the CRDs %v, config/crd/bases %v", keys(crds), names)
	}

	// RBAC: the ClusterRole controller-gen writes, bound to the manager.
	want := decodeStrict(t, "role.yaml", read(t, filepath.Join(configDir, "rbac", "role.yaml")))[0].(*rbacv1.ClusterRole)
	if !equality.Semantic.DeepEqual(role.Rules, want.Rules) {
		t.Errorf("the ClusterRole's rules differ from config/rbac/role.yaml's")
	}
	if binding.RoleRef.Name != role.Name || len(binding.Subjects) != 1 || binding.Subjects[0].Name != sa.Name ||
		binding.Subjects[0].Namespace != sa.Namespace {
		t.Errorf("the ClusterRoleBinding %+v does not bind %s to the ServiceAccount %s/%s", binding, role.Name, sa.Namespace, sa.Name)
	}

	// The Deployment: the manager with the substituted settings, its
	// token from the Secret, non-root, probes on /readyz and /healthz.
	pod := dep.Spec.Template.Spec
	if pod.ServiceAccountName != sa.Name || len(pod.Containers) != 1 {
		t.Fatalf("the Deployment's pod: service account %q, %d containers", pod.ServiceAccountName, len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image != "ghcr.io/ipledger/ipledger-k8s:dev" {
		t.Errorf("image %q: want the default of IPLEDGER_K8S_IMAGE, which scripts/release.sh sets to the release", c.Image)
	}
	for _, a := range []string{"--ipledger-url=https://ipledger.example:8443", "--cluster-name=mgmt", "--leader-elect",
		"--token-file=/etc/ipledger/token", "--log-level=info"} {
		if !slices.Contains(c.Args, a) {
			t.Errorf("the manager's args %q lack %s", c.Args, a)
		}
	}
	if secret.StringData["token"] != "operator-token" || pod.Volumes[0].Secret == nil || pod.Volumes[0].Secret.SecretName != secret.Name {
		t.Errorf("the token does not reach the manager from the Secret %s", secret.Name)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("probes: %+v %+v", c.ReadinessProbe, c.LivenessProbe)
	}
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot ||
		c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("the manager must run as non-root on a read-only root filesystem")
	}
}

// metadata.yaml is clusterctl's Metadata (decoded strictly): its release
// series implement the v1beta2 contract.
func TestMetadata(t *testing.T) {
	t.Parallel()
	var md struct {
		APIVersion    string `json:"apiVersion"`
		Kind          string `json:"kind"`
		ReleaseSeries []struct {
			Major    int32  `json:"major"`
			Minor    int32  `json:"minor"`
			Contract string `json:"contract"`
		} `json:"releaseSeries"`
	}
	if err := yaml.UnmarshalStrict(read(t, filepath.Join(configDir, "metadata.yaml")), &md); err != nil {
		t.Fatalf("metadata.yaml: %v", err)
	}
	if md.APIVersion != "clusterctl.cluster.x-k8s.io/v1alpha3" || md.Kind != "Metadata" || len(md.ReleaseSeries) == 0 {
		t.Fatalf("metadata.yaml: %+v", md)
	}
	for _, s := range md.ReleaseSeries {
		if s.Contract != "v1beta2" {
			t.Errorf("release series %d.%d: contract %q, want v1beta2", s.Major, s.Minor, s.Contract)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
