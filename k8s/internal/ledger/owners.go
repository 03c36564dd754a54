package ledger

import (
	"context"
	"net/http"
)

// AllocateOwner gives owner one value of each of pools in one transaction,
// all or nothing (POST /api/v1/owners/{owner_type}/{owner_id}/allocations,
// docs/api.md "Owner allocations"): the values it already holds, else the
// lowest free ones. The answer is in the order of pools. A refusal is an
// *Error whose Field is "pools[i]" (or "pools[i].value").
func (c *Client) AllocateOwner(ctx context.Context, owner Owner, pools []string) ([]Allocation, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out struct {
		Items []Allocation `json:"items"`
	}
	body := map[string]any{"pools": pools}
	_, err := c.do(ctx, http.MethodPost, []string{"owners", owner.Type, owner.ID, "allocations"}, nil, body, &out)
	return out.Items, err
}

// ReleaseOwner releases every value owner holds, in every pool, in one
// transaction (DELETE /api/v1/owners/{owner_type}/{owner_id}/allocations).
// An owner that holds nothing is no error.
func (c *Client) ReleaseOwner(ctx context.Context, owner Owner) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := c.do(ctx, http.MethodDelete, []string{"owners", owner.Type, owner.ID, "allocations"}, nil, nil, nil)
	return err
}
