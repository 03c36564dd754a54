package ledger

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Pool types that hold addresses (docs/pools.md); ipledger's fourth type,
// integer, cannot back an IPAddress.
const (
	TypeIPv4       = "ipv4"
	TypeIPv6       = "ipv6"
	TypeIPv6Prefix = "ipv6prefix"
)

// Counts are one kind of range's counts, each a decimal string.
type Counts struct {
	Size        string `json:"size"`
	Allocated   string `json:"allocated"`
	Free        string `json:"free"`
	Quarantined string `json:"quarantined"`
	Reserved    string `json:"reserved"`
}

// Pool is an ipledger pool as GET /api/v1/pools/{name} shows it.
type Pool struct {
	Name              string `json:"name"`
	Type              string `json:"type"`
	DelegatePrefixLen int    `json:"delegate_prefix_len,omitempty"`
	Gateway           string `json:"gateway,omitempty"`
	Stats             struct {
		Auto     Counts `json:"auto"`
		Explicit Counts `json:"explicit"`
	} `json:"stats"`
}

// Owner is who holds an allocation in ipledger.
type Owner struct {
	Type string `json:"owner_type"`
	ID   string `json:"owner_id"`
}

func (o Owner) String() string { return o.Type + "/" + o.ID }

// Allocation is one allocation as ipledger shows it.
type Allocation struct {
	Pool        string    `json:"pool"`
	Value       string    `json:"value"`
	OwnerType   string    `json:"owner_type"`
	OwnerID     string    `json:"owner_id"`
	State       string    `json:"state"`
	AllocatedAt time.Time `json:"allocated_at"`
}

// GetPool reads one pool with its stats.
func (c *Client) GetPool(ctx context.Context, name string) (Pool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var p Pool
	_, err := c.do(ctx, http.MethodGet, []string{"pools", name}, nil, nil, &p)
	return p, err
}

// Allocate gives owner a value of pool: the value it already holds, or the
// lowest free one (created tells which). Allocation is idempotent per
// owner, so asking again after a crash or from a stale cache returns the
// same value.
func (c *Client) Allocate(ctx context.Context, pool string, owner Owner) (a Allocation, created bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := c.do(ctx, http.MethodPost, []string{"pools", pool, "allocations"}, nil, owner, &a)
	return a, st == http.StatusCreated, err
}

// OwnerAllocations lists what owner holds in pool (normally one value).
func (c *Client) OwnerAllocations(ctx context.Context, pool string, owner Owner) ([]Allocation, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	q := url.Values{"owner_type": {owner.Type}, "owner_id": {owner.ID}, "limit": {"1000"}}
	var out struct {
		Items []Allocation `json:"items"`
	}
	_, err := c.do(ctx, http.MethodGet, []string{"pools", pool, "allocations"}, q, nil, &out)
	return out.Items, err
}

// Release gives value back to pool; ipledger checks that owner holds it.
func (c *Client) Release(ctx context.Context, pool, value string, owner Owner) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	q := url.Values{"owner_type": {owner.Type}, "owner_id": {owner.ID}}
	_, err := c.do(ctx, http.MethodDelete, []string{"pools", pool, "allocations", value}, q, nil, nil)
	return err
}

// Holder reads who holds value in pool now (nil when nobody does).
func (c *Client) Holder(ctx context.Context, pool, value string) (*Allocation, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var a Allocation
	_, err := c.do(ctx, http.MethodGet, []string{"pools", pool, "allocations", value}, nil, nil, &a)
	if IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &a, nil
}
