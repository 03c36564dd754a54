package nad

// The permissions the controller needs, from which controller-gen writes
// config/rbac/role.yaml with the IPAM provider's (go generate ./api/...
// in the k8s module).
//
// +kubebuilder:rbac:groups=ipam.ipledger.io,resources=ledgernetworkattachments,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=ipam.ipledger.io,resources=ledgernetworkattachments/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ipam.ipledger.io,resources=ledgernetworkattachments/finalizers,verbs=update
// +kubebuilder:rbac:groups=k8s.cni.cncf.io,resources=network-attachment-definitions,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
