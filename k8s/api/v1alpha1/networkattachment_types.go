package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AttachmentAddress is one pool an attachment takes a value from.
type AttachmentAddress struct {
	// Pool is the ipledger pool's name.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`
	Pool string `json:"pool"`

	// Gateway overrides the pool's gateway for this attachment: an IP
	// address of the pool's family.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="gateway must be an IP address without a zone"
	Gateway string `json:"gateway,omitempty"`
}

// LedgerNetworkAttachmentSpec says where an attachment's addresses come
// from and which CNI plugin carries them.
type LedgerNetworkAttachmentSpec struct {
	// Addresses: one value from each pool, one entry per pool.
	//
	// +required
	// +listType=map
	// +listMapKey=pool
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Addresses []AttachmentAddress `json:"addresses"`

	// CNI is the main plugin's configuration, a JSON object such as
	// {"cniVersion": "1.0.0", "type": "macvlan", "master": "eth1"}. Its
	// "ipam" key is written by ipledger. The API server checks only that
	// it is an object; its controller checks the rest.
	//
	// +required
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	CNI apiextensionsv1.JSON `json:"cni"`
}

// LedgerNetworkAttachmentStatus is what the attachment holds in ipledger.
type LedgerNetworkAttachmentStatus struct {
	// Conditions: Ready is True when every pool gave a value and the
	// NetworkAttachmentDefinition carries them.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Addresses are the values ipledger holds for the attachment, as CIDRs
	// with the pools' prefix lengths.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Addresses []string `json:"addresses,omitempty"`

	// ObservedGeneration is the generation the status was written for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// LedgerNetworkAttachment is a NetworkAttachmentDefinition whose addresses
// ipledger decides: its controller writes a NetworkAttachmentDefinition of
// the same name with spec.cni as its config and ipledger's galactic-ipam
// object as the config's ipam.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lna
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Addresses",type=string,JSONPath=".status.addresses"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type LedgerNetworkAttachment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LedgerNetworkAttachmentSpec   `json:"spec"`
	Status LedgerNetworkAttachmentStatus `json:"status,omitempty"`
}

// LedgerNetworkAttachmentList is a list of LedgerNetworkAttachments.
//
// +kubebuilder:object:root=true
type LedgerNetworkAttachmentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LedgerNetworkAttachment `json:"items"`
}
