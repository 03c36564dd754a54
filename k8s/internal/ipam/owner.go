package ipam

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"

	"github.com/ipledger/ipledger/k8s/internal/ledger"
)

// OwnerType is the ipledger owner type of an IPAddressClaim's value.
const OwnerType = "k8s-ipaddressclaim"

// maxOwnerID is ipledger's limit on owner ids (docs/api.md).
const maxOwnerID = 128

// clusterNameRE is what --cluster-name accepts: a DNS-1123 label, so the
// owner id's first segment is unambiguous and short.
var clusterNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ValidateClusterName checks the value of --cluster-name.
func ValidateClusterName(name string) error {
	if !clusterNameRE.MatchString(name) {
		return fmt.Errorf("--cluster-name %q must be 1 to 63 lower-case letters, digits or '-', starting and ending with a letter or digit", name)
	}
	return nil
}

// OwnerID is the ipledger owner id of the claim namespace/name of cluster:
// "CLUSTER/NAMESPACE/NAME", readable back to the claim and unique across
// clusters of distinct names. Kubernetes names may be longer than
// ipledger's 128 characters; such an id keeps its first 111 characters
// and ends in "~" and 16 hex digits of the SHA-256 of the whole
// "CLUSTER/NAMESPACE/NAME", so it stays unique and still starts with the
// cluster and the namespace. The claim carries its owner id in the
// annotation ipam.ipledger.io/owner-id either way (docs/kubernetes.md).
func OwnerID(cluster, namespace, name string) string {
	id := cluster + "/" + namespace + "/" + name
	if len(id) <= maxOwnerID {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	suffix := "~" + hex.EncodeToString(sum[:8])
	return id[:maxOwnerID-len(suffix)] + suffix
}

// ClaimOwner is the ipledger owner of a claim.
func ClaimOwner(cluster, namespace, name string) ledger.Owner {
	return ledger.Owner{Type: OwnerType, ID: OwnerID(cluster, namespace, name)}
}
