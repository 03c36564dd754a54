package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LedgerIPPoolSpec names an ipledger pool and says how its values are
// written into IPAddresses.
//
// +kubebuilder:validation:XValidation:rule="!has(self.gateway) || !has(self.prefix) || !isIP(self.gateway) || ip(self.gateway).family() == 6 || self.prefix <= 32",message="prefix must be 0 to 32 with an IPv4 gateway",fieldPath=".prefix"
type LedgerIPPoolSpec struct {
	// Pool is the name of the ipledger pool that hands out the values. It
	// cannot change: claims hold values of that pool.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="pool is immutable"
	Pool string `json:"pool"`

	// Prefix is the prefix length written to each IPAddress: required for
	// an ipv4 (0 to 32) or ipv6 (0 to 128) pool; for an ipv6prefix pool
	// the block length is the default.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=128
	Prefix *int32 `json:"prefix,omitempty"`

	// Gateway is written to each IPAddress: an IP address of the pool's
	// family.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="gateway must be an IP address without a zone"
	Gateway string `json:"gateway,omitempty"`
}

// LedgerIPPoolStatus is what ipledger says of the pool.
type LedgerIPPoolStatus struct {
	// Conditions: Ready is True when the ipledger pool exists, is an
	// address pool and fits the spec.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Type is the ipledger pool's type: ipv4, ipv6 or ipv6prefix.
	// +optional
	Type string `json:"type,omitempty"`

	// Gateway is the ipledger pool's own gateway, written to IPAddresses
	// when spec.gateway is empty.
	// +optional
	Gateway string `json:"gateway,omitempty"`

	// Size, Allocated and Free count the pool's values in its automatic
	// ranges, as decimal strings (an IPv6 pool does not fit in 64 bits).
	// +optional
	Size string `json:"size,omitempty"`
	// +optional
	Allocated string `json:"allocated,omitempty"`
	// +optional
	Free string `json:"free,omitempty"`

	// ObservedGeneration is the generation the status was written for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// LedgerIPPool is a namespaced pool of the Cluster API IPAM provider: an
// IPAddressClaim of its namespace whose poolRef names it gets a value of
// the ipledger pool spec.pool.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=cluster-api,shortName=lipp
// +kubebuilder:printcolumn:name="Pool",type=string,JSONPath=".spec.pool"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Size",type=string,JSONPath=".status.size"
// +kubebuilder:printcolumn:name="Allocated",type=string,JSONPath=".status.allocated"
// +kubebuilder:printcolumn:name="Free",type=string,JSONPath=".status.free"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type LedgerIPPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LedgerIPPoolSpec   `json:"spec"`
	Status LedgerIPPoolStatus `json:"status,omitempty"`
}

// LedgerIPPoolList is a list of LedgerIPPools.
//
// +kubebuilder:object:root=true
type LedgerIPPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LedgerIPPool `json:"items"`
}

// GlobalLedgerIPPool is the cluster-scoped LedgerIPPool: claims of every
// namespace may name it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=cluster-api,shortName=glipp
// +kubebuilder:printcolumn:name="Pool",type=string,JSONPath=".spec.pool"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Size",type=string,JSONPath=".status.size"
// +kubebuilder:printcolumn:name="Allocated",type=string,JSONPath=".status.allocated"
// +kubebuilder:printcolumn:name="Free",type=string,JSONPath=".status.free"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type GlobalLedgerIPPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LedgerIPPoolSpec   `json:"spec"`
	Status LedgerIPPoolStatus `json:"status,omitempty"`
}

// GlobalLedgerIPPoolList is a list of GlobalLedgerIPPools.
//
// +kubebuilder:object:root=true
type GlobalLedgerIPPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GlobalLedgerIPPool `json:"items"`
}
