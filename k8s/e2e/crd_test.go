package e2e

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipledger/ipledger/k8s/api/v1alpha1"
	"github.com/ipledger/ipledger/k8s/internal/testenv"
)

// The API server itself refuses bad specs of the ipam.ipledger.io kinds,
// each with a message naming the field (the CRDs' OpenAPI schema and CEL
// rules, generated from the Go types).
func TestBadSpecsRefused(t *testing.T) {
	t.Parallel()
	e := testenv.Require(t)
	ns := e.Namespace(t)
	pool := func(name string, s v1alpha1.LedgerIPPoolSpec) client.Object {
		return &v1alpha1.LedgerIPPool{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: s}
	}
	attachment := func(name string, a []v1alpha1.AttachmentAddress, cni string) client.Object {
		return &v1alpha1.LedgerNetworkAttachment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: v1alpha1.LedgerNetworkAttachmentSpec{Addresses: a, CNI: apiextensionsv1.JSON{Raw: []byte(cni)}}}
	}
	macvlan := `{"cniVersion":"1.0.0","type":"macvlan","master":"eth1"}`
	for _, tc := range []struct {
		name  string
		obj   client.Object
		field string // the field the message names
		text  string
	}{
		{"pool missing", pool("p1", v1alpha1.LedgerIPPoolSpec{}), "spec.pool", ""},
		{"pool name not ipledger's", pool("p2", v1alpha1.LedgerIPPoolSpec{Pool: "has space", Prefix: ptrTo[int32](24)}), "spec.pool", ""},
		{"prefix above 128", pool("p3", v1alpha1.LedgerIPPoolSpec{Pool: "a", Prefix: ptrTo[int32](129)}), "spec.prefix", "128"},
		{"prefix negative", pool("p4", v1alpha1.LedgerIPPoolSpec{Pool: "a", Prefix: ptrTo[int32](-1)}), "spec.prefix", ""},
		{"gateway not an IP", pool("p5", v1alpha1.LedgerIPPoolSpec{Pool: "a", Prefix: ptrTo[int32](24), Gateway: "gw.example"}), "spec.gateway", "IP address"},
		{"gateway with a zone", pool("p6", v1alpha1.LedgerIPPoolSpec{Pool: "a", Prefix: ptrTo[int32](64), Gateway: "fe80::1%eth0"}), "spec.gateway", "IP address"},
		{"IPv4 gateway with a /48", pool("p7", v1alpha1.LedgerIPPoolSpec{Pool: "a", Prefix: ptrTo[int32](48), Gateway: "10.0.0.1"}), "spec.prefix", "0 to 32"},
		{"global: prefix above 128", &v1alpha1.GlobalLedgerIPPool{ObjectMeta: metav1.ObjectMeta{Name: "bad-" + ns},
			Spec: v1alpha1.LedgerIPPoolSpec{Pool: "a", Prefix: ptrTo[int32](200)}}, "spec.prefix", ""},
		{"attachment: the same pool twice", attachment("a1", []v1alpha1.AttachmentAddress{{Pool: "v4"}, {Pool: "v6"}, {Pool: "v4"}}, macvlan), "spec.addresses[2]", "Duplicate"},
		{"attachment: no addresses", attachment("a2", nil, macvlan), "spec.addresses", ""},
		{"attachment: gateway not an IP", attachment("a3", []v1alpha1.AttachmentAddress{{Pool: "v4", Gateway: "x"}}, macvlan), "spec.addresses[0].gateway", "IP address"},
		{"attachment: cni not an object", attachment("a4", []v1alpha1.AttachmentAddress{{Pool: "v4"}}, `"macvlan"`), "spec.cni", ""},
	} {
		err := e.Client.Create(ctx, tc.obj)
		if !apierrors.IsInvalid(err) {
			t.Errorf("%s: got %v, want 422 Invalid", tc.name, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: message %q does not name %s (%q)", tc.name, err, tc.field, tc.text)
		}
	}

	// spec.pool cannot change.
	ok := pool("ok", v1alpha1.LedgerIPPoolSpec{Pool: "a", Prefix: ptrTo[int32](24), Gateway: "10.0.0.1"})
	if err := e.Client.Create(ctx, ok); err != nil {
		t.Fatal(err)
	}
	p := ok.(*v1alpha1.LedgerIPPool)
	p.Spec.Pool = "b"
	err := e.Client.Update(ctx, p)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.pool") || !strings.Contains(err.Error(), "immutable") {
		t.Fatalf("changing spec.pool: %v, want Invalid naming spec.pool as immutable", err)
	}
	// A valid attachment is accepted, with the cni object kept whole.
	good := attachment("good", []v1alpha1.AttachmentAddress{{Pool: "v4", Gateway: "10.0.0.1"}, {Pool: "v6"}}, macvlan)
	if err := e.Client.Create(ctx, good); err != nil {
		t.Fatal(err)
	}
	back := &v1alpha1.LedgerNetworkAttachment{}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(good), back); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(back.Spec.CNI.Raw), `"master":"eth1"`) {
		t.Fatalf("cni pruned: %s", back.Spec.CNI.Raw)
	}
}
