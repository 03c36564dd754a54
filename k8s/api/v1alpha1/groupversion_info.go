// Package v1alpha1 holds the kinds of the group ipam.ipledger.io: the pools
// of the Cluster API IPAM provider (LedgerIPPool, GlobalLedgerIPPool) and
// LedgerNetworkAttachment. The CRDs in config/crd are generated from these
// types (go generate ./... in the k8s module).
//
// +kubebuilder:object:generate=true
// +groupName=ipam.ipledger.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

//go:generate go tool controller-gen object paths=./... crd:maxDescLen=400 output:crd:artifacts:config=../../config/crd/bases
//go:generate go tool controller-gen rbac:roleName=ipledger-k8s paths=../../internal/ipam/...;../../internal/nad/... output:rbac:artifacts:config=../../config/rbac

var (
	// GroupVersion is the group and version of every kind here.
	GroupVersion = schema.GroupVersion{Group: "ipam.ipledger.io", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this group to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&LedgerIPPool{}, &LedgerIPPoolList{}, &GlobalLedgerIPPool{}, &GlobalLedgerIPPoolList{},
		&LedgerNetworkAttachment{}, &LedgerNetworkAttachmentList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// Kind names, as a claim's spec.poolRef.kind carries them.
const (
	LedgerIPPoolKind       = "LedgerIPPool"
	GlobalLedgerIPPoolKind = "GlobalLedgerIPPool"
)

// ReadyCondition is the condition type every kind here reports.
const ReadyCondition = "Ready"

// After controller-gen: config/ipam-components.yaml, clusterctl's
// components, from the CRDs and the ClusterRole just written.
//go:generate go run ../../hack/components -config ../../config -chart ../../../deploy/helm/ipledger-k8s
