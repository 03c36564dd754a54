package ipam

// The permissions the manager needs, from which controller-gen writes
// config/rbac/role.yaml (go generate ./api/... in the k8s module).
//
// +kubebuilder:rbac:groups=ipam.ipledger.io,resources=ledgerippools;globalledgerippools,verbs=get;list;watch
// +kubebuilder:rbac:groups=ipam.ipledger.io,resources=ledgerippools/status;globalledgerippools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ipam.ipledger.io,resources=ledgerippools/finalizers;globalledgerippools/finalizers,verbs=update
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddressclaims,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddressclaims/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddressclaims/finalizers,verbs=update
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddresses,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
