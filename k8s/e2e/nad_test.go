package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipledger/ipledger/k8s/api/v1alpha1"
	"github.com/ipledger/ipledger/k8s/internal/nad"
	"github.com/ipledger/ipledger/k8s/internal/testenv"
)

const macvlan = `{"cniVersion":"1.0.0","type":"macvlan","master":"eth1","mode":"bridge","mtu":9000}`

func (f *fixture) attachment(name, cni string, addrs ...v1alpha1.AttachmentAddress) *v1alpha1.LedgerNetworkAttachment {
	f.t.Helper()
	a := &v1alpha1.LedgerNetworkAttachment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec: v1alpha1.LedgerNetworkAttachmentSpec{Addresses: addrs, CNI: apiextensionsv1.JSON{Raw: []byte(cni)}}}
	if err := f.c.Create(ctx, a); err != nil {
		f.t.Fatal(err)
	}
	return a
}

// attachmentCondition waits until the attachment's Ready condition has
// status and reason, and returns the attachment.
func (f *fixture) attachmentCondition(name string, status metav1.ConditionStatus, reason string) *v1alpha1.LedgerNetworkAttachment {
	f.t.Helper()
	a := &v1alpha1.LedgerNetworkAttachment{}
	testenv.Eventually(f.t, wait, func() error {
		if err := f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, a); err != nil {
			return err
		}
		c := meta.FindStatusCondition(a.Status.Conditions, v1alpha1.ReadyCondition)
		if c == nil || c.Status != status || c.Reason != reason || c.ObservedGeneration != a.Generation {
			return fmt.Errorf("attachment %s: Ready %+v, want %s %s", name, c, status, reason)
		}
		return nil
	})
	return a
}

// nadConfig is a NetworkAttachmentDefinition's spec.config, decoded.
type nadConfig struct {
	raw    string
	fields map[string]any
	IPAM   struct {
		Type      string        `json:"type"`
		Addresses []nad.Address `json:"addresses"`
	} `json:"ipam"`
}

// nadOf reads the NetworkAttachmentDefinition of the attachment name and
// checks that the attachment controls it.
func (f *fixture) nadOf(name string) nadConfig {
	f.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(nad.NADKind)
	if err := f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, u); err != nil {
		f.t.Fatal(err)
	}
	owner := metav1.GetControllerOf(u)
	if owner == nil || owner.Kind != "LedgerNetworkAttachment" || owner.Name != name {
		f.t.Fatalf("NetworkAttachmentDefinition %s: controller %+v", name, owner)
	}
	raw, _, _ := unstructured.NestedString(u.Object, "spec", "config")
	c := nadConfig{raw: raw}
	if err := json.Unmarshal([]byte(raw), &c.fields); err != nil {
		f.t.Fatalf("spec.config %q: %v", raw, err)
	}
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		f.t.Fatal(err)
	}
	return c
}

// waitNAD waits until the attachment's definition carries exactly want.
func (f *fixture) waitNAD(name string, want []nad.Address) nadConfig {
	f.t.Helper()
	var c nadConfig
	testenv.Eventually(f.t, wait, func() error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(nad.NADKind)
		if err := f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, u); err != nil {
			return err
		}
		c = f.nadOf(name)
		if !slices.Equal(c.IPAM.Addresses, want) {
			return fmt.Errorf("NetworkAttachmentDefinition %s carries %+v, want %+v", name, c.IPAM.Addresses, want)
		}
		return nil
	})
	return c
}

// cniIPAM is ipledger's own galactic-ipam object for an owner.
func (f *fixture) cniIPAM(ownerID string) []nad.Address {
	f.t.Helper()
	var out struct {
		Type      string        `json:"type"`
		Addresses []nad.Address `json:"addresses"`
	}
	f.l.MustCall(f.t, http.StatusOK, http.MethodGet, "/api/v1/owners/"+nad.OwnerType+"/"+url.PathEscape(ownerID)+"/cni-ipam", nil, &out)
	return out.Addresses
}

// checkADD runs the definition's spec.config through galactic-ipam ADD
// and requires exactly want back, in order, with the gateways.
func checkADD(t *testing.T, c nadConfig, want []nad.Address) {
	t.Helper()
	res := testenv.CNIAdd(t, c.raw)
	var got []nad.Address
	for _, ip := range res.IPs {
		got = append(got, nad.Address{Address: ip.Address, Gateway: ip.Gateway})
	}
	if !slices.Equal(got, want) {
		t.Fatalf("galactic-ipam ADD of %s returned %+v, want %+v", c.raw, got, want)
	}
}

// A LedgerNetworkAttachment gets one value of each pool from ipledger and
// a NetworkAttachmentDefinition whose spec.config is its cni with
// galactic-ipam's addresses (prefix lengths and gateways kept); run
// through the real galactic-ipam ADD, that config returns exactly what
// ipledger holds for the owner. A value released by hand in ipledger
// leaves the definition at once (through the feed), a value given by hand
// enters it; an exhausted pool heals when a deletion frees a value; and
// deleting an attachment deletes its definition and releases its values.
func TestNetworkAttachment(t *testing.T) {
	t.Parallel()
	for _, db := range testenv.Databases {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			f := setup(t, db)
			// One automatic value, and one an operator places by hand.
			f.l.MustCall(t, http.StatusCreated, http.MethodPost, "/api/v1/pools", map[string]any{
				"name": "att-v4", "type": "ipv4", "gateway": "10.70.0.1", "ranges": []map[string]any{
					{"first": "10.70.0.10", "last": "10.70.0.10", "auto_assign": true},
					{"first": "10.70.0.20", "last": "10.70.0.20", "auto_assign": false}},
			}, nil)
			f.l.MustCall(t, http.StatusCreated, http.MethodPost, "/api/v1/pools", map[string]any{
				"name": "att-v6", "type": "ipv6prefix", "delegate_prefix_len": 96,
				"ranges": []map[string]any{{"first": "fd00:70::", "last": "fd00:70::3:0:0", "auto_assign": true}},
			}, nil)
			f.manager("site-a", 10*time.Hour)

			f.attachment("att", macvlan, v1alpha1.AttachmentAddress{Pool: "att-v4"}, v1alpha1.AttachmentAddress{Pool: "att-v6", Gateway: "fe80::1"})
			a := f.attachmentCondition("att", metav1.ConditionTrue, nad.ReasonReady)
			owner := nad.Owner("site-a", f.ns, "att")
			if a.Annotations[nad.OwnerIDAnnotation] != owner.ID || !slices.Contains(a.Finalizers, nad.Finalizer) {
				t.Fatalf("attachment: annotations %v finalizers %v", a.Annotations, a.Finalizers)
			}
			want := []nad.Address{{Address: "10.70.0.10/32", Gateway: "10.70.0.1"}, {Address: "fd00:70::/96", Gateway: "fe80::1"}}
			c := f.waitNAD("att", want)
			if !slices.Equal(a.Status.Addresses, []string{"10.70.0.10/32", "fd00:70::/96"}) {
				t.Fatalf("status.addresses %v", a.Status.Addresses)
			}
			// spec.config is spec.cni whole, with ipam and a name added.
			var cni map[string]any
			_ = json.Unmarshal([]byte(macvlan), &cni)
			for k, v := range cni {
				if fmt.Sprint(c.fields[k]) != fmt.Sprint(v) {
					t.Fatalf("spec.config %s: %s = %v, want %v", c.raw, k, c.fields[k], v)
				}
			}
			if c.fields["name"] != "att" || c.IPAM.Type != "galactic-ipam" || len(c.fields) != len(cni)+2 {
				t.Fatalf("spec.config %s: want spec.cni with name and ipam", c.raw)
			}
			// The same addresses as ipledger's own cni-ipam object of the
			// owner (which keeps the pool's gateway, overridden here for
			// att-v6), and galactic-ipam applies exactly them.
			fromLedger := f.cniIPAM(owner.ID)
			if len(fromLedger) != 2 || fromLedger[0] != want[0] || fromLedger[1].Address != want[1].Address {
				t.Fatalf("ipledger's cni-ipam for %s: %+v, definition %+v", owner.ID, fromLedger, want)
			}
			checkADD(t, c, want)

			// Released by hand in ipledger: the definition drops the
			// value within the feed's latency and Ready says why; no
			// other value is taken behind the attachment's pods.
			f.l.MustCall(t, http.StatusNoContent, http.MethodDelete, "/api/v1/pools/att-v4/allocations/10.70.0.10?owner_type="+nad.OwnerType+"&owner_id="+url.QueryEscape(owner.ID), nil, nil)
			f.waitNAD("att", want[1:])
			f.attachmentCondition("att", metav1.ConditionFalse, nad.ReasonAddressReleased)
			if h := f.holders("att-v4"); len(h) != 0 {
				t.Fatalf("att-v4 holds %v after the hand release", h)
			}
			// Given another value by hand: the definition follows.
			f.l.MustCall(t, http.StatusOK, http.MethodPost, "/api/v1/owners/"+nad.OwnerType+"/"+url.PathEscape(owner.ID)+"/allocations",
				map[string]any{"pools": []any{map[string]any{"pool": "att-v4", "value": "10.70.0.20"}}}, nil)
			want[0].Address = "10.70.0.20/32"
			c = f.waitNAD("att", want)
			f.attachmentCondition("att", metav1.ConditionTrue, nad.ReasonReady)
			checkADD(t, c, want)

			// att-v4 has one automatic value free: the first attachment takes it,
			// the second waits on the exhausted pool and gets the value
			// the first's deletion frees.
			f.attachment("first", macvlan, v1alpha1.AttachmentAddress{Pool: "att-v4"})
			f.attachmentCondition("first", metav1.ConditionTrue, nad.ReasonReady)
			f.attachment("second", macvlan, v1alpha1.AttachmentAddress{Pool: "att-v4"})
			f.attachmentCondition("second", metav1.ConditionFalse, nad.ReasonPoolExhausted)
			if err := f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "second"}, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition"}}); !apierrors.IsNotFound(err) {
				t.Fatalf("a definition was written for an attachment that has no value: %v", err)
			}
			f.deleteAttachment("first")
			second := f.attachmentCondition("second", metav1.ConditionTrue, nad.ReasonReady)
			if !slices.Equal(second.Status.Addresses, []string{"10.70.0.10/32"}) {
				t.Fatalf("second: %v", second.Status.Addresses)
			}
			checkADD(t, f.nadOf("second"), []nad.Address{{Address: "10.70.0.10/32", Gateway: "10.70.0.1"}})

			// Deleting every attachment releases every value.
			f.deleteAttachment("att")
			f.deleteAttachment("second")
			for _, p := range []string{"att-v4", "att-v6"} {
				if h := f.holders(p); len(h) != 0 {
					t.Fatalf("%s holds %v after every attachment was deleted", p, h)
				}
			}
			if n := len(f.l.Audit(t, "allocation.release")); n < 5 {
				t.Fatalf("%d allocation.release events, want at least 5", n)
			}
		})
	}
}

// deleteAttachment deletes an attachment and waits until it is gone, and
// its definition with it.
func (f *fixture) deleteAttachment(name string) {
	f.t.Helper()
	a := &v1alpha1.LedgerNetworkAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}}
	if err := f.c.Delete(ctx, a); err != nil {
		f.t.Fatal(err)
	}
	testenv.Eventually(f.t, wait, func() error {
		err := f.c.Get(ctx, client.ObjectKeyFromObject(a), a)
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("attachment %s still there (%v)", name, err)
		}
		return nil
	})
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(nad.NADKind)
	if err := f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, u); !apierrors.IsNotFound(err) {
		f.t.Fatalf("NetworkAttachmentDefinition %s left after its attachment was deleted (%v)", name, err)
	}
}

// What the API server cannot check, the controller refuses on the Ready
// condition, naming the field, before anything is allocated: a cni
// without type or cniVersion, a configuration list, a gateway of the
// other family, a pool ipledger does not have or that holds no addresses,
// and a definition of the same name it does not own.
func TestNetworkAttachmentRefusals(t *testing.T) {
	t.Parallel()
	f := setup(t, "sqlite")
	f.l.CreatePool(t, "r-v4", "ipv4", "10.71.0.10", "10.71.0.19", "")
	f.l.MustCall(t, http.StatusCreated, http.MethodPost, "/api/v1/pools", map[string]any{
		"name": "vlans", "type": "integer", "ranges": []map[string]any{{"first": "100", "last": "199", "auto_assign": true}},
	}, nil)
	foreign := &unstructured.Unstructured{}
	foreign.SetGroupVersionKind(nad.NADKind)
	foreign.SetNamespace(f.ns)
	foreign.SetName("taken")
	_ = unstructured.SetNestedField(foreign.Object, macvlan, "spec", "config")
	if err := f.c.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	f.manager("site-a", 10*time.Hour)
	v4 := v1alpha1.AttachmentAddress{Pool: "r-v4"}
	for _, tc := range []struct {
		name, cni string
		addrs     []v1alpha1.AttachmentAddress
		reason    string
		text      string
	}{
		{"no-type", `{"cniVersion":"1.0.0","master":"eth1"}`, []v1alpha1.AttachmentAddress{v4}, nad.ReasonInvalidSpec, "spec.cni.type"},
		{"no-version", `{"type":"macvlan"}`, []v1alpha1.AttachmentAddress{v4}, nad.ReasonInvalidSpec, "spec.cni.cniVersion"},
		{"a-list", `{"cniVersion":"1.0.0","name":"l","plugins":[{"type":"macvlan"}]}`, []v1alpha1.AttachmentAddress{v4}, nad.ReasonInvalidSpec, "plugins"},
		{"v6-gateway", macvlan, []v1alpha1.AttachmentAddress{{Pool: "r-v4", Gateway: "fe80::1"}}, nad.ReasonInvalidSpec, "spec.addresses[0].gateway"},
		{"no-pool", macvlan, []v1alpha1.AttachmentAddress{v4, {Pool: "nowhere"}}, nad.ReasonPoolNotFound, `spec.addresses[1].pool: ipledger has no pool "nowhere"`},
		{"integers", macvlan, []v1alpha1.AttachmentAddress{{Pool: "vlans"}}, nad.ReasonNotAnAddressPool, "spec.addresses[0].pool"},
		{"taken", macvlan, []v1alpha1.AttachmentAddress{v4}, nad.ReasonNADConflict, "does not own"},
	} {
		f.attachment(tc.name, tc.cni, tc.addrs...)
		a := f.attachmentCondition(tc.name, metav1.ConditionFalse, tc.reason)
		if msg := meta.FindStatusCondition(a.Status.Conditions, v1alpha1.ReadyCondition).Message; !strings.Contains(msg, tc.text) {
			t.Errorf("%s: message %q does not name %q", tc.name, msg, tc.text)
		}
	}
	if h := f.holders("r-v4"); len(h) != 0 {
		t.Fatalf("refused attachments hold %v", h)
	}
	// The foreign definition is left as it was.
	if err := f.c.Get(ctx, client.ObjectKeyFromObject(foreign), foreign); err != nil || metav1.GetControllerOf(foreign) != nil {
		t.Fatalf("foreign definition: %v %+v", err, foreign.GetOwnerReferences())
	}
	// Fixing a spec makes it Ready.
	a := &v1alpha1.LedgerNetworkAttachment{}
	if err := f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "no-version"}, a); err != nil {
		t.Fatal(err)
	}
	a.Spec.CNI.Raw = []byte(macvlan)
	if err := f.c.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	f.attachmentCondition("no-version", metav1.ConditionTrue, nad.ReasonReady)
	checkADD(t, f.nadOf("no-version"), []nad.Address{{Address: "10.71.0.10/32"}})
}
