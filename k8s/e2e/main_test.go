// Package e2e tests ipledger-k8s against a real kube-apiserver and etcd
// (built by hack/build-apiserver.sh) and a real `ipledger serve` on SQLite
// and PostgreSQL. One API server serves every test; each test owns its
// namespaces and its ipledger database.
package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipledger/ipledger/k8s/api/v1alpha1"
	"github.com/ipledger/ipledger/k8s/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// wait is the generous deadline of every wait: the machine may be loaded.
const wait = 3 * time.Minute

var ctx = context.Background()

// fixture is one test's API server, ipledger and namespace.
type fixture struct {
	t  *testing.T
	e  *testenv.Env
	c  client.Client
	l  *testenv.Ledger
	ns string
}

func setup(t *testing.T, db string) *fixture {
	t.Helper()
	e := testenv.Require(t)
	f := &fixture{t: t, e: e, c: e.Client, ns: e.Namespace(t)}
	f.l = testenv.StartLedger(t, db)
	return f
}

// manager starts an in-process manager of cluster for the fixture's
// namespace (and the GlobalLedgerIPPools labelled with it).
func (f *fixture) manager(cluster string, sync time.Duration) func() {
	return f.e.StartManager(f.t, f.l, testenv.ManagerOptions{Cluster: cluster, Namespaces: []string{f.ns}, GlobalLabel: f.ns, SyncPeriod: sync})
}

func (f *fixture) pool(name, ledgerPool string, prefix int32, gateway string) *v1alpha1.LedgerIPPool {
	f.t.Helper()
	p := &v1alpha1.LedgerIPPool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec:       v1alpha1.LedgerIPPoolSpec{Pool: ledgerPool, Prefix: ptr.To(prefix), Gateway: gateway},
	}
	if err := f.c.Create(ctx, p); err != nil {
		f.t.Fatal(err)
	}
	return p
}

func poolRef(kind, name string) ipamv1.IPPoolReference {
	return ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: kind, Name: name}
}

func (f *fixture) newClaim(name string, ref ipamv1.IPPoolReference, cluster string) *ipamv1.IPAddressClaim {
	c := &ipamv1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec:       ipamv1.IPAddressClaimSpec{PoolRef: ref},
	}
	if cluster != "" {
		c.Labels = map[string]string{"cluster.x-k8s.io/cluster-name": cluster}
	}
	return c
}

func (f *fixture) claim(name string, ref ipamv1.IPPoolReference, cluster string) *ipamv1.IPAddressClaim {
	f.t.Helper()
	c := f.newClaim(name, ref, cluster)
	if err := f.c.Create(ctx, c); err != nil {
		f.t.Fatal(err)
	}
	return c
}

func (f *fixture) get(name string) *ipamv1.IPAddressClaim {
	f.t.Helper()
	c := &ipamv1.IPAddressClaim{}
	if err := f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, c); err != nil {
		f.t.Fatal(err)
	}
	return c
}

// ready waits until the claim is Ready and returns its IPAddress.
func (f *fixture) ready(name string) *ipamv1.IPAddress {
	f.t.Helper()
	ip := &ipamv1.IPAddress{}
	testenv.Eventually(f.t, wait, func() error {
		c := &ipamv1.IPAddressClaim{}
		if err := f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, c); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(c.Status.Conditions, ipamv1.IPAddressClaimReadyCondition)
		if cond == nil || cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("claim %s not Ready: %+v", name, cond)
		}
		if c.Status.AddressRef.Name != name {
			return fmt.Errorf("claim %s: addressRef %q", name, c.Status.AddressRef.Name)
		}
		return f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, ip)
	})
	return ip
}

// condition waits until the claim's Ready condition has status and reason
// and returns it.
func (f *fixture) condition(name string, status metav1.ConditionStatus, reason string) metav1.Condition {
	f.t.Helper()
	var got metav1.Condition
	testenv.Eventually(f.t, wait, func() error {
		c := &ipamv1.IPAddressClaim{}
		if err := f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, c); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(c.Status.Conditions, ipamv1.IPAddressClaimReadyCondition)
		if cond == nil || cond.Status != status || cond.Reason != reason {
			return fmt.Errorf("claim %s: Ready %+v, want %s %s", name, cond, status, reason)
		}
		got = *cond
		return nil
	})
	return got
}

// holders maps each value of pool to the owner ids holding it.
func (f *fixture) holders(pool string) map[string][]string {
	out := map[string][]string{}
	for _, a := range f.l.Allocations(f.t, pool) {
		out[a.Value] = append(out[a.Value], a.OwnerID)
	}
	return out
}
