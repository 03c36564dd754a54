package v1alpha1

import (
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PoolObject is either pool kind, for the code that treats them alike.
//
// +kubebuilder:object:generate=false
type PoolObject interface {
	client.Object
	PoolSpec() *LedgerIPPoolSpec
	PoolStatus() *LedgerIPPoolStatus
}

// PoolSpec returns the pool's spec.
func (p *LedgerIPPool) PoolSpec() *LedgerIPPoolSpec { return &p.Spec }

// PoolStatus returns the pool's status.
func (p *LedgerIPPool) PoolStatus() *LedgerIPPoolStatus { return &p.Status }

// PoolSpec returns the pool's spec.
func (p *GlobalLedgerIPPool) PoolSpec() *LedgerIPPoolSpec { return &p.Spec }

// PoolStatus returns the pool's status.
func (p *GlobalLedgerIPPool) PoolStatus() *LedgerIPPoolStatus { return &p.Status }
