package helm_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// manifests is one rendering of the chart, decoded: one object per kind
// the chart can render (nil when absent).
type manifests struct {
	deployment     *appsv1.Deployment
	service        *corev1.Service
	secret         *corev1.Secret
	pvc            *corev1.PersistentVolumeClaim
	configMap      *corev1.ConfigMap
	pdb            *policyv1.PodDisruptionBudget
	serviceMonitor *monitoringv1.ServiceMonitor
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load("ipledger")
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// render renders the chart with values over its defaults, as
// `helm template site ./ipledger -n ipledger -f values.yaml` would, with
// missing keys an error (a template typo fails here, not on a cluster).
func render(t *testing.T, values string) (map[string]string, error) {
	t.Helper()
	ch := loadChart(t)
	over, err := chartutil.ReadValues([]byte(values))
	if err != nil {
		t.Fatal(err)
	}
	// values.schema.json is checked here, as helm install checks it.
	vals, err := chartutil.ToRenderValues(ch, over, chartutil.ReleaseOptions{Name: "site", Namespace: "ipledger", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	return engine.Engine{Strict: true}.Render(ch, vals)
}

// decode renders the chart and decodes every manifest strictly into its
// Kubernetes API type: an unknown or duplicate field, a wrong type or an
// unexpected kind fails the test.
func decode(t *testing.T, values string) manifests {
	t.Helper()
	files, err := render(t, values)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	var m manifests
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		for i, doc := range strings.Split(files[name], "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var meta struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				t.Fatalf("%s #%d: %v\n%s", name, i, err, doc)
			}
			var into any
			switch meta.APIVersion + " " + meta.Kind {
			case "apps/v1 Deployment":
				m.deployment = new(appsv1.Deployment)
				into = m.deployment
			case "v1 Service":
				m.service = new(corev1.Service)
				into = m.service
			case "v1 Secret":
				m.secret = new(corev1.Secret)
				into = m.secret
			case "v1 PersistentVolumeClaim":
				m.pvc = new(corev1.PersistentVolumeClaim)
				into = m.pvc
			case "v1 ConfigMap":
				m.configMap = new(corev1.ConfigMap)
				into = m.configMap
			case "policy/v1 PodDisruptionBudget":
				m.pdb = new(policyv1.PodDisruptionBudget)
				into = m.pdb
			case "monitoring.coreos.com/v1 ServiceMonitor":
				m.serviceMonitor = new(monitoringv1.ServiceMonitor)
				into = m.serviceMonitor
			default:
				t.Fatalf("%s #%d: unexpected %s %s", name, i, meta.APIVersion, meta.Kind)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
				t.Fatalf("%s #%d does not decode strictly into %s: %v\n%s", name, i, meta.Kind, err, doc)
			}
		}
	}
	if m.deployment == nil || m.service == nil {
		t.Fatalf("no Deployment or Service rendered: %v", slices.Sorted(maps.Keys(files)))
	}
	return m
}

func env(c corev1.Container) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		if _, dup := out[e.Name]; dup {
			panic("duplicate env " + e.Name)
		}
		out[e.Name] = e
	}
	return out
}

func volume(spec corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

// checkPod asserts what every variant shares: probes on /readyz and
// /healthz, a non-root user, a read-only root filesystem with writable
// volumes for /tmp (and the data), the serve command on 0.0.0.0:8080.
func checkPod(t *testing.T, d *appsv1.Deployment, scheme corev1.URIScheme) {
	t.Helper()
	spec := d.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("containers: %d", len(spec.Containers))
	}
	c := spec.Containers[0]
	if got := fmt.Sprint(c.Args); got != "[serve]" {
		t.Errorf("args %s, want [serve]", got)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port.String() != "http" || p.HTTPGet.Scheme != scheme {
		t.Errorf("readiness probe %+v, want GET /readyz on http over %s", p, scheme)
	}
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Scheme != scheme {
		t.Errorf("liveness probe %+v, want GET /healthz over %s", p, scheme)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 8080 {
		t.Errorf("ports %+v", c.Ports)
	}
	if e := env(c)["IPLEDGER_LISTEN"]; e.Value != "0.0.0.0:8080" {
		t.Errorf("IPLEDGER_LISTEN = %q", e.Value)
	}
	ps := spec.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser == 0 {
		t.Errorf("pod security context %+v: want a non-root numeric user", ps)
	}
	cs := c.SecurityContext
	if cs == nil || cs.ReadOnlyRootFilesystem == nil || !*cs.ReadOnlyRootFilesystem ||
		cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation || cs.Capabilities == nil || fmt.Sprint(cs.Capabilities.Drop) != "[ALL]" {
		t.Errorf("container security context %+v: want a read-only root, no privilege escalation, no capabilities", cs)
	}
	if v := volume(spec, "tmp"); v == nil || v.EmptyDir == nil {
		t.Errorf("no emptyDir for /tmp: %+v", spec.Volumes)
	}
	if c.Resources.Limits.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("resources %+v", c.Resources)
	}
	sel := d.Spec.Selector.MatchLabels
	for k, v := range sel {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("selector %v does not match the pod's labels %v", sel, d.Spec.Template.Labels)
		}
	}
}

func TestChartDefaults(t *testing.T) {
	t.Parallel()
	m := decode(t, "")
	d := m.deployment
	checkPod(t, d, corev1.URISchemeHTTP)
	if *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("replicas %d, strategy %s: want 1 and Recreate on SQLite", *d.Spec.Replicas, d.Spec.Strategy.Type)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if got := c.Image; got != "ghcr.io/ipledger/ipledger:"+loadChart(t).Metadata.AppVersion {
		t.Errorf("image %q: want the chart's appVersion as tag", got)
	}
	e := env(c)
	if e["IPLEDGER_DATABASE_URL"].Value != "sqlite:/var/lib/ipledger/ipledger.db" {
		t.Errorf("IPLEDGER_DATABASE_URL = %+v", e["IPLEDGER_DATABASE_URL"])
	}
	for _, k := range []string{"IPLEDGER_ADMIN_TOKEN", "IPLEDGER_TLS_CERT", "IPLEDGER_OIDC_ISSUER", "IPLEDGER_AUTH_PROXY_HEADER"} {
		if _, ok := e[k]; ok {
			t.Errorf("%s set by default", k)
		}
	}
	mounted := false
	for _, vm := range c.VolumeMounts {
		mounted = mounted || (vm.Name == "data" && vm.MountPath == "/var/lib/ipledger" && !vm.ReadOnly)
	}
	if v := volume(d.Spec.Template.Spec, "data"); v == nil || v.EmptyDir == nil || !mounted {
		t.Errorf("data volume %+v (mounted %v): want an emptyDir at /var/lib/ipledger", v, mounted)
	}
	if m.secret != nil || m.pdb != nil || m.serviceMonitor != nil || m.pvc != nil || m.configMap != nil {
		t.Errorf("defaults rendered a Secret, PDB, ServiceMonitor, PVC or ConfigMap: %+v", m)
	}
	if s := m.service.Spec; s.Type != corev1.ServiceTypeClusterIP || len(s.Ports) != 1 || s.Ports[0].Port != 8080 || s.Ports[0].TargetPort.String() != "http" {
		t.Errorf("service %+v", s)
	}
}

// The production shape: PostgreSQL from a chart-made Secret, three
// replicas with a disruption budget, HTTPS with client certificates, the
// identity settings, a ServiceMonitor.
const productionValues = `
replicaCount: 3
image: {tag: v1.2.0}
database:
  type: postgres
  url: postgres://ipledger@pg-rw,pg-ro/ipledger?target_session_attrs=read-write
  maxConns: 16
adminToken: bootstrap-admin-token-0123456789
tls:
  enabled: true
  secretName: ipledger-tls
  clientCASecret: site-ca
  clientRoles: spiffe://site.example/ns/forge/sa/site-explorer=operator
identity:
  externalURL: https://ipledger.site.example
  roleGroups: {admin: netops-admins, operator: netops, viewer: noc}
  oidc:
    issuer: https://sso.site.example/realms/dc
    clientID: ipledger
    clientSecret: oidc-client-secret-value
  authProxy:
    header: X-Forwarded-User
    groupsHeader: X-Forwarded-Groups
    trusted: 10.0.0.0/24
    logoutURL: /oauth2/sign_out
settings: {logLevel: warn, secureCookies: "true"}
serviceMonitor: {enabled: true, labels: {release: prom}}
poolFile: |
  [pools.lo-ip]
  type = "ipv4"
`

func TestChartPostgresTLSThreeReplicas(t *testing.T) {
	t.Parallel()
	m := decode(t, productionValues)
	d := m.deployment
	checkPod(t, d, corev1.URISchemeHTTPS)
	if *d.Spec.Replicas != 3 || d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		t.Errorf("replicas %d, strategy %s: want 3 and RollingUpdate", *d.Spec.Replicas, d.Spec.Strategy.Type)
	}
	spec := d.Spec.Template.Spec
	c := spec.Containers[0]
	if c.Image != "ghcr.io/ipledger/ipledger:v1.2.0" {
		t.Errorf("image %q", c.Image)
	}
	e := env(c)
	for k, key := range map[string]string{"IPLEDGER_DATABASE_URL": "database-url", "IPLEDGER_ADMIN_TOKEN": "admin-token", "IPLEDGER_OIDC_CLIENT_SECRET": "oidc-client-secret"} {
		ref := e[k].ValueFrom
		if ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != "site-ipledger" || ref.SecretKeyRef.Key != key || e[k].Value != "" {
			t.Errorf("%s = %+v: want the Secret site-ipledger key %s", k, e[k], key)
		}
	}
	for k, v := range map[string]string{
		"IPLEDGER_TLS_CERT": "/etc/ipledger/tls/tls.crt", "IPLEDGER_TLS_KEY": "/etc/ipledger/tls/tls.key",
		"IPLEDGER_TLS_CLIENT_CA": "/etc/ipledger/client-ca/ca.crt", "IPLEDGER_TLS_CLIENT_ROLES": "spiffe://site.example/ns/forge/sa/site-explorer=operator",
		"IPLEDGER_EXTERNAL_URL": "https://ipledger.site.example", "IPLEDGER_ROLE_ADMIN_GROUPS": "netops-admins",
		"IPLEDGER_ROLE_OPERATOR_GROUPS": "netops", "IPLEDGER_ROLE_VIEWER_GROUPS": "noc",
		"IPLEDGER_OIDC_ISSUER": "https://sso.site.example/realms/dc", "IPLEDGER_OIDC_CLIENT_ID": "ipledger",
		"IPLEDGER_AUTH_PROXY_HEADER": "X-Forwarded-User", "IPLEDGER_AUTH_PROXY_GROUPS_HEADER": "X-Forwarded-Groups",
		"IPLEDGER_AUTH_PROXY_TRUSTED": "10.0.0.0/24", "IPLEDGER_AUTH_PROXY_LOGOUT_URL": "/oauth2/sign_out", "IPLEDGER_DB_MAX_CONNS": "16", "IPLEDGER_LOG_LEVEL": "warn",
		"IPLEDGER_SECURE_COOKIES": "true", "IPLEDGER_POOLS": "/etc/ipledger/pools/pools.toml",
	} {
		if e[k].Value != v {
			t.Errorf("%s = %q, want %q", k, e[k].Value, v)
		}
	}
	if v := volume(spec, "tls"); v == nil || v.Secret == nil || v.Secret.SecretName != "ipledger-tls" {
		t.Errorf("tls volume %+v", v)
	}
	if v := volume(spec, "client-ca"); v == nil || v.Secret == nil || v.Secret.SecretName != "site-ca" {
		t.Errorf("client-ca volume %+v", v)
	}
	if volume(spec, "data") != nil {
		t.Error("a data volume with PostgreSQL")
	}
	if m.secret == nil || m.secret.StringData["database-url"] != "postgres://ipledger@pg-rw,pg-ro/ipledger?target_session_attrs=read-write" ||
		m.secret.StringData["admin-token"] != "bootstrap-admin-token-0123456789" || m.secret.StringData["oidc-client-secret"] != "oidc-client-secret-value" {
		t.Errorf("secret %+v", m.secret)
	}
	if d.Spec.Template.Annotations["checksum/secret"] == "" {
		t.Error("no checksum/secret annotation: a changed Secret would not roll the pods")
	}
	if m.pdb == nil || m.pdb.Spec.MaxUnavailable == nil || m.pdb.Spec.MaxUnavailable.IntValue() != 1 || m.pdb.Spec.Selector.MatchLabels["app.kubernetes.io/instance"] != "site" {
		t.Errorf("pdb %+v", m.pdb)
	}
	sm := m.serviceMonitor
	if sm == nil || len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Path != "/metrics" || sm.Labels["release"] != "prom" {
		t.Fatalf("service monitor %+v", sm)
	}
	if ep := sm.Spec.Endpoints[0]; ep.Port != "http" || ep.Scheme == nil || ep.Scheme.String() != "https" {
		t.Errorf("service monitor endpoint %+v", ep)
	}
	if m.configMap == nil || !strings.Contains(m.configMap.Data["pools.toml"], "[pools.lo-ip]") {
		t.Errorf("pool file config map %+v", m.configMap)
	}
}

// A SQLite file with a persistent volume: a claim, mounted as the data.
func TestChartSQLitePersistence(t *testing.T) {
	t.Parallel()
	m := decode(t, "database: {persistence: {enabled: true, size: 5Gi, storageClass: local-ssd}}")
	if m.pvc == nil || m.pvc.Spec.Resources.Requests.Storage().String() != "5Gi" || *m.pvc.Spec.StorageClassName != "local-ssd" {
		t.Fatalf("pvc %+v", m.pvc)
	}
	v := volume(m.deployment.Spec.Template.Spec, "data")
	if v == nil || v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != m.pvc.Name {
		t.Fatalf("data volume %+v, want the claim %s", v, m.pvc.Name)
	}
	// `helm uninstall` must not delete the ledger with the release.
	if got := m.pvc.Annotations["helm.sh/resource-policy"]; got != "keep" {
		t.Errorf("pvc annotation helm.sh/resource-policy = %q, want keep", got)
	}
}

// An install whose SQLite file lives on an emptyDir says, in its notes,
// that the data dies with the pod; one with a volume does not.
func TestChartNotesWarnOfAnEmptyDir(t *testing.T) {
	t.Parallel()
	for values, want := range map[string]bool{
		"": true,
		"database: {persistence: {enabled: true}}":           false,
		"database: {type: postgres, url: 'postgres://h/db'}": false,
	} {
		files, err := render(t, values)
		if err != nil {
			t.Fatalf("values %q: %v", values, err)
		}
		notes := files["ipledger/templates/NOTES.txt"]
		if got := strings.Contains(notes, "emptyDir"); got != want {
			t.Errorf("values %q: notes warn of an emptyDir: %v, want %v\n%s", values, got, want, notes)
		}
	}
}

// What the server cannot run is refused at rendering, naming the values.
func TestChartRefusals(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ values, want string }{
		{"replicaCount: 3", "replicaCount 3 with database.type sqlite"},
		{"replicaCount: 2\ndatabase: {type: sqlite}", "replicaCount 2 with database.type sqlite"},
		{"database: {type: mysql}", `database.type "mysql"`},
		{"database: {type: postgres}", "database.type postgres needs database.url or secret.existingSecret"},
		{"database: {type: postgres, url: 'sqlite:x.db'}", "database.url must start with postgres://"},
		{"database: {url: 'postgres://h/db'}", "database.url is for PostgreSQL"},
		{"tls: {enabled: true}", "tls.enabled needs tls.secretName"},
		{"tls: {clientCASecret: ca}", "tls.clientCASecret needs tls.enabled"},
		{"identity: {authProxy: {header: X-User}}", "identity.authProxy.header needs identity.authProxy.trusted"},
		{"identity: {authProxy: {trusted: 10.0.0.0/8}}", "identity.authProxy.groupsHeader, .trusted and .logoutURL need identity.authProxy.header"},
		{"identity: {authProxy: {logoutURL: /oauth2/sign_out}}", "identity.authProxy.groupsHeader, .trusted and .logoutURL need identity.authProxy.header"},
		{"identity: {authProxy: {header: X-User, trusted: 10.0.0.1, logoutURL: oauth2/sign_out}}", `identity.authProxy.logoutURL "oauth2/sign_out": want a path`},
		{"identity: {authProxy: {header: X-User, trusted: 10.0.0.1, logoutURL: '//evil.example/x'}}", `identity.authProxy.logoutURL "//evil.example/x": want a path`},
		// What the server refuses at start is refused at render.
		{"identity: {externalURL: 'https://ipl', oidc: {issuer: 'https://sso'}}", "identity.oidc.issuer needs identity.oidc.clientID"},
		{"identity: {oidc: {issuer: 'https://sso', clientID: ipl}}", "identity.oidc.issuer needs identity.externalURL"},
		{"identity: {oidc: {clientID: ipl}}", "identity.oidc.clientID and .clientSecret need identity.oidc.issuer"},
		{"identity: {tokenLogin: false}", "identity.tokenLogin false leaves the console without a way to sign in"},
		{"identity: {tokenLogin: 'false'}", "identity.tokenLogin false leaves the console without a way to sign in"},
		{"tls: {enabled: true, secretName: t, clientRoles: 'a=viewer'}", "tls.clientRoles needs tls.clientCASecret"},
		// A Secret of one's own replaces the chart's: a secret value beside
		// it would be silently unused.
		{"database: {type: postgres, url: 'postgres://h/db'}\nsecret: {existingSecret: mine}", `database.url is set with secret.existingSecret "mine"`},
		{"adminToken: t0k3n\nsecret: {existingSecret: mine, adminTokenKey: token}", `adminToken is set with secret.existingSecret "mine", which replaces the chart's Secret, so the value would be ignored: put it under the key "token" of that Secret`},
		{"identity: {externalURL: 'https://ipl', oidc: {issuer: 'https://sso', clientID: ipl, clientSecret: s3cr3t}}\nsecret: {existingSecret: mine}", `identity.oidc.clientSecret is set with secret.existingSecret "mine"`},
		{"settings: {goMemLimit: garbage}", "goMemLimit"},
		{"settings: {secureCookies: 'yes'}", "secureCookies"},
		{"database: {type: postgres, url: 'postgres://h/db', maxConns: -5}", "maxConns"},
		{"database: {type: postgres, url: 'postgres://h/db', maxConns: 'many'}", "maxConns"},
		// values.schema.json: a misspelt or misplaced value is refused, not
		// silently ignored.
		{"replicas: 3", "additional properties 'replicas' not allowed"},
		{"database: {urls: 'postgres://h/db'}", "at '/database': additional properties 'urls' not allowed"},
		{"identity: {oidc: {issuerURL: https://sso}}", "at '/identity/oidc': additional properties 'issuerURL' not allowed"},
		{"replicaCount: three", "replicaCount"},
		{"settings: {logLevel: verbose}", "logLevel"},
	} {
		_, err := render(t, c.values)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("values %q: err = %v, want %q", c.values, err, c.want)
		}
	}
	// Three replicas are fine on PostgreSQL through a Secret of one's own.
	m := decode(t, "replicaCount: 3\ndatabase: {type: postgres}\nsecret: {existingSecret: ipledger-db}")
	if m.secret != nil {
		t.Error("a chart Secret beside secret.existingSecret")
	}
	e := env(m.deployment.Spec.Template.Spec.Containers[0])
	if ref := e["IPLEDGER_DATABASE_URL"].ValueFrom; ref == nil || ref.SecretKeyRef.Name != "ipledger-db" {
		t.Errorf("IPLEDGER_DATABASE_URL = %+v", e["IPLEDGER_DATABASE_URL"])
	}
	if ref := e["IPLEDGER_ADMIN_TOKEN"].ValueFrom; ref == nil || ref.SecretKeyRef.Name != "ipledger-db" || ref.SecretKeyRef.Optional == nil || !*ref.SecretKeyRef.Optional {
		t.Errorf("IPLEDGER_ADMIN_TOKEN = %+v: want an optional key of the existing Secret", e["IPLEDGER_ADMIN_TOKEN"])
	}
}
