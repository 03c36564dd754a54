// Package v1alpha1 holds the kinds of the group ipam.ipledger.io: the pools
// of the Cluster API IPAM provider (LedgerIPPool, GlobalLedgerIPPool) and
// LedgerNetworkAttachment. The CRDs in config/crd are generated from these
// types (go generate ./... in the k8s module).
//
// +kubebuilder:object:generate=true
// +groupName=ipam.ipledger.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

//go:generate go tool controller-gen object paths=./... crd:maxDescLen=400 output:crd:artifacts:config=../../config/crd/bases

var (
	// GroupVersion is the group and version of every kind here.
	GroupVersion = schema.GroupVersion{Group: "ipam.ipledger.io", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the kinds of this group to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Kind names, as a claim's spec.poolRef.kind carries them.
const (
	LedgerIPPoolKind       = "LedgerIPPool"
	GlobalLedgerIPPoolKind = "GlobalLedgerIPPool"
)

// ReadyCondition is the condition type every kind here reports.
const ReadyCondition = "Ready"
