package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/ipledger/ipledger/k8s/api/v1alpha1"
	"github.com/ipledger/ipledger/k8s/internal/testenv"
)

// The manager works with only the permissions of config/rbac/role.yaml
// (generated from the controllers' markers): a user bound to that role
// alone elects a leader, writes pool status, gives a claim its IPAddress
// and completes its deletion.
func TestManagerNeedsOnlyItsRole(t *testing.T) {
	t.Parallel()
	f := setup(t, "sqlite")
	b, err := os.ReadFile(filepath.Join(testenv.ModuleRoot(), "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict(b, role); err != nil {
		t.Fatal(err)
	}
	role.Name = "ipledger-k8s-" + f.ns
	if err := f.c.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	user := "ipledger-k8s-" + f.ns
	if err := f.c.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}); err != nil {
		t.Fatal(err)
	}
	f.l.CreatePool(t, "nodes", "ipv4", "10.130.0.10", "10.130.0.19", "")
	f.e.StartManager(t, f.l, testenv.ManagerOptions{Cluster: "site-r", Namespaces: []string{f.ns}, GlobalLabel: f.ns,
		SyncPeriod: 10 * time.Hour, Rest: f.e.UserConfig(t, user), LeaderElect: true})
	f.pool("nodes", "nodes", 24, "")
	f.claim("a", poolRef(v1alpha1.LedgerIPPoolKind, "nodes"), "")
	f.ready("a")
	if err := f.c.Delete(ctx, f.get("a")); err != nil {
		t.Fatal(err)
	}
	f.gone("a")
	if h := f.holders("nodes"); len(h) != 0 {
		t.Fatalf("ipledger holds %v after the claim was deleted", h)
	}
}
