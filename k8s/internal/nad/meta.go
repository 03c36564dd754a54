// Package nad is the LedgerNetworkAttachment controller of ipledger-k8s:
// each attachment gets one value of each of its pools in ipledger (one
// owner, all or nothing) and a NetworkAttachmentDefinition of its name
// whose CNI configuration carries those values to galactic-ipam, and
// follows ipledger's changes to them through the change feed. See
// docs/kubernetes.md, "LedgerNetworkAttachments".
package nad

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ipledger/ipledger/k8s/internal/ipam"
	"github.com/ipledger/ipledger/k8s/internal/ledger"
)

// OwnerType is the ipledger owner type of an attachment's values.
const OwnerType = "k8s-networkattachment"

// Names written on the attachments.
const (
	// Finalizer keeps an attachment until its NetworkAttachmentDefinition
	// is deleted and its values released in ipledger.
	Finalizer = "ipam.ipledger.io/release-addresses"
	// OwnerIDAnnotation is the attachment's owner id in ipledger, written
	// before anything is allocated.
	OwnerIDAnnotation = ipam.OwnerIDAnnotation
	// PoolsAnnotation lists, comma-separated, the ipledger pools the
	// attachment was given a value of. A listed pool whose value ipledger
	// no longer holds was released there by hand: the controller says so
	// rather than take another value behind the attachment's pods.
	PoolsAnnotation = "ipam.ipledger.io/allocated-pools"
)

// Reasons of an attachment's Ready condition.
const (
	ReasonReady             = "Ready"
	ReasonInvalidSpec       = "InvalidSpec"
	ReasonPoolNotFound      = "PoolNotFound"
	ReasonNotAnAddressPool  = "NotAnAddressPool"
	ReasonPoolExhausted     = "PoolExhausted"
	ReasonAllocationFailed  = "AllocationFailed"
	ReasonAddressReleased   = "AddressReleased"
	ReasonLedgerUnreachable = "LedgerUnreachable"
	ReasonNADConflict       = "NetworkAttachmentDefinitionExists"
)

// NADKind is the kind written for each attachment (k8s.cni.cncf.io/v1,
// the Network Plumbing Working Group's multi-net spec). No Go module of
// its types is used: the object is written as unstructured.
var NADKind = schema.GroupVersionKind{Group: "k8s.cni.cncf.io", Version: "v1", Kind: "NetworkAttachmentDefinition"}

// Owner is the ipledger owner of the attachment namespace/name of cluster:
// owner id "CLUSTER/NAMESPACE/NAME", shortened as a claim's is
// (ipam.OwnerID).
func Owner(cluster, namespace, name string) ledger.Owner {
	return ledger.Owner{Type: OwnerType, ID: ipam.OwnerID(cluster, namespace, name)}
}

func schemaGK(group, kind string) schema.GroupKind { return schema.GroupKind{Group: group, Kind: kind} }
