package helm_test

import (
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The install notes say how to read the admin token: from the Secret the
// pod reads it from (the same Secret and key as the Deployment's
// IPLEDGER_ADMIN_TOKEN, holding the value given), or, when none was given,
// from the log line the first start prints, with a way to make another
// once that log is gone.
func TestChartNotesShowTheAdminToken(t *testing.T) {
	t.Parallel()
	secretCmd := regexp.MustCompile(`kubectl -n (\S+) get secret (\S+) -o jsonpath='\{\.data\.((?:[^}\\]|\\.)+)\}' \| base64 -d`)
	for _, c := range []struct{ values, token string }{
		{"adminToken: bootstrap-admin-token-0123", "bootstrap-admin-token-0123"},
		{"adminToken: t0k3n\nsecret: {adminTokenKey: admin.token}", "t0k3n"},
		{"database: {type: postgres}\nsecret: {existingSecret: site-secrets, adminTokenKey: ipledger-admin}", ""},
	} {
		files, err := render(t, c.values)
		if err != nil {
			t.Fatalf("values %q: %v", c.values, err)
		}
		notes := files["ipledger/templates/NOTES.txt"]
		m := secretCmd.FindStringSubmatch(notes)
		if m == nil {
			t.Errorf("values %q: the notes give no command reading the admin token from its Secret:\n%s", c.values, notes)
			continue
		}
		key := strings.ReplaceAll(m[3], `\.`, ".")
		ref := env(decode(t, c.values).deployment.Spec.Template.Spec.Containers[0])["IPLEDGER_ADMIN_TOKEN"].ValueFrom
		if ref == nil || ref.SecretKeyRef == nil || m[1] != "ipledger" || m[2] != ref.SecretKeyRef.Name || key != ref.SecretKeyRef.Key {
			t.Errorf("values %q: the notes read namespace %s, Secret %s, key %s; the pod reads IPLEDGER_ADMIN_TOKEN from %+v",
				c.values, m[1], m[2], key, ref)
		}
		if c.token != "" {
			if s := decode(t, c.values).secret; s == nil || s.Name != m[2] || s.StringData[key] != c.token {
				t.Errorf("values %q: the Secret the notes read (%s key %s) does not hold the token: %+v", c.values, m[2], key, s)
			}
		}
		if strings.Contains(notes, "logs deploy/") {
			t.Errorf("values %q: the notes send the admin to the log although the token is in a Secret:\n%s", c.values, notes)
		}
	}
	files, err := render(t, "")
	if err != nil {
		t.Fatal(err)
	}
	notes := files["ipledger/templates/NOTES.txt"]
	for _, want := range []string{
		"kubectl -n ipledger logs deploy/site-ipledger | grep 'First admin token'",
		"kubectl -n ipledger exec deploy/site-ipledger -- ipledger token create --name admin-2 --role admin",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("without an admin token the notes lack %q:\n%s", want, notes)
		}
	}
	if d := decode(t, "").deployment; d.Name != "site-ipledger" {
		t.Errorf("the notes name deploy/site-ipledger; the Deployment is %s", d.Name)
	}
}

// A disruption budget that lets no pod go is refused: it would block
// every node drain. One that lets one go renders, from maxUnavailable or
// from minAvailable.
func TestChartRefusesABudgetThatBlocksDrains(t *testing.T) {
	t.Parallel()
	const pg = "database: {type: postgres, url: 'postgres://h/db'}\n"
	for _, c := range []struct{ values, want string }{
		{pg + "replicaCount: 3\npodDisruptionBudget: {maxUnavailable: 0}", "podDisruptionBudget.maxUnavailable 0 lets no pod be evicted"},
		{pg + "replicaCount: 3\npodDisruptionBudget: {maxUnavailable: '0%'}", "podDisruptionBudget.maxUnavailable 0% lets no pod be evicted"},
		{pg + "replicaCount: 3\npodDisruptionBudget: {minAvailable: 3}", "podDisruptionBudget.minAvailable 3 with replicaCount 3 lets no pod be evicted"},
		{pg + "replicaCount: 2\npodDisruptionBudget: {minAvailable: 5}", "podDisruptionBudget.minAvailable 5 with replicaCount 2"},
		{pg + "replicaCount: 3\npodDisruptionBudget: {minAvailable: '100%'}", "podDisruptionBudget.minAvailable 100% with replicaCount 3"},
		// 70% of 3 is 2.1, which Kubernetes rounds up to 3: all of them.
		{pg + "replicaCount: 3\npodDisruptionBudget: {minAvailable: '70%'}", "podDisruptionBudget.minAvailable 70% with replicaCount 3"},
	} {
		if _, err := render(t, c.values); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("values %q: err = %v, want %q", c.values, err, c.want)
		}
	}
	for values, want := range map[string]string{
		pg + "replicaCount: 3": "maxUnavailable 1",
		pg + "replicaCount: 3\npodDisruptionBudget: {minAvailable: 2}":       "minAvailable 2",
		pg + "replicaCount: 3\npodDisruptionBudget: {minAvailable: '60%'}":   "minAvailable 60%",
		pg + "replicaCount: 4\npodDisruptionBudget: {maxUnavailable: '25%'}": "maxUnavailable 25%",
	} {
		pdb := decode(t, values).pdb
		if pdb == nil {
			t.Errorf("values %q: no PodDisruptionBudget", values)
			continue
		}
		got := "maxUnavailable " + pdb.Spec.MaxUnavailable.String()
		if pdb.Spec.MinAvailable != nil {
			got = "minAvailable " + pdb.Spec.MinAvailable.String()
			if pdb.Spec.MaxUnavailable != nil {
				t.Errorf("values %q: both minAvailable and maxUnavailable in %+v", values, pdb.Spec)
			}
		}
		if got != want {
			t.Errorf("values %q: budget %s, want %s", values, got, want)
		}
	}
}

// Replicas spread across nodes by default, as a preference selecting
// the release's own pods; a list of one's own replaces it (an entry
// without a selector gets the release's), and [] turns it off.
func TestChartSpreadsReplicasAcrossNodes(t *testing.T) {
	t.Parallel()
	const pg = "database: {type: postgres, url: 'postgres://h/db'}\nreplicaCount: 3\n"
	d := decode(t, pg).deployment
	tsc := d.Spec.Template.Spec.TopologySpreadConstraints
	if len(tsc) != 1 {
		t.Fatalf("topology spread constraints %+v, want one across nodes", tsc)
	}
	c := tsc[0]
	if c.TopologyKey != "kubernetes.io/hostname" || c.MaxSkew != 1 || c.WhenUnsatisfiable != corev1.ScheduleAnyway || c.LabelSelector == nil {
		t.Fatalf("spread %+v: want maxSkew 1 across kubernetes.io/hostname, ScheduleAnyway, selecting the release's pods", c)
	}
	for k, v := range c.LabelSelector.MatchLabels {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("the spread selects %v, which the pods (%v) do not carry", c.LabelSelector.MatchLabels, d.Spec.Template.Labels)
		}
	}
	if len(c.LabelSelector.MatchLabels) == 0 || c.LabelSelector.MatchLabels["app.kubernetes.io/instance"] != "site" {
		t.Errorf("the spread's selector %v does not name the release", c.LabelSelector.MatchLabels)
	}
	own := pg + `topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}
  - {maxSkew: 2, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {team: netops}}}
`
	tsc = decode(t, own).deployment.Spec.Template.Spec.TopologySpreadConstraints
	if len(tsc) != 2 || tsc[0].TopologyKey != "topology.kubernetes.io/zone" || tsc[0].LabelSelector == nil ||
		tsc[0].LabelSelector.MatchLabels["app.kubernetes.io/instance"] != "site" || tsc[1].LabelSelector.MatchLabels["team"] != "netops" {
		t.Errorf("own constraints rendered as %+v", tsc)
	}
	if tsc := decode(t, pg+"topologySpreadConstraints: []").deployment.Spec.Template.Spec.TopologySpreadConstraints; len(tsc) != 0 {
		t.Errorf("topologySpreadConstraints: [] rendered %+v", tsc)
	}
}

// Every probe has an explicit timeout, above Kubernetes's default of one
// second (which a busy node misses) and within its period; the startup
// probe still allows five minutes for migrations.
func TestChartProbesHaveTimeouts(t *testing.T) {
	t.Parallel()
	c := decode(t, "").deployment.Spec.Template.Spec.Containers[0]
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe} {
		if p == nil {
			t.Errorf("no %s probe", name)
			continue
		}
		if p.TimeoutSeconds < 2 || p.TimeoutSeconds > p.PeriodSeconds {
			t.Errorf("%s probe: timeout %d s, period %d s: want an explicit timeout of 2 s or more, within the period", name, p.TimeoutSeconds, p.PeriodSeconds)
		}
	}
	if p := c.StartupProbe; p != nil && p.PeriodSeconds*p.FailureThreshold < 300 {
		t.Errorf("startup probe allows %d s, want at least 300 for migrations", p.PeriodSeconds*p.FailureThreshold)
	}
}
