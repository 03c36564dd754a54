package ledger

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Event is one event of ipledger's change feed (docs/feed.md), with what
// the manager reads of it.
type Event struct {
	Revision   int64  `json:"revision"`
	Action     string `json:"action"`
	ObjectType string `json:"object_type"`
	ObjectID   string `json:"object_id"`
	Actor      string `json:"actor"`
	// Pool and Value are set for pool values; Pool also for pool events.
	Pool  string `json:"pool"`
	Value string `json:"value"`
	// Before and After are the object before and after the change; for
	// allocations they name the owner.
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

// Owners returns the owners an allocation event names, before and after
// the change (a release names the former holder, an allocation the new).
func (e Event) Owners() []Owner {
	var out []Owner
	for _, raw := range []json.RawMessage{e.Before, e.After} {
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		var o struct {
			OwnerType       *string `json:"owner_type"`
			OwnerID         *string `json:"owner_id"`
			FormerOwnerType *string `json:"former_owner_type"`
			FormerOwnerID   *string `json:"former_owner_id"`
		}
		if json.Unmarshal(raw, &o) != nil {
			continue
		}
		if o.OwnerType != nil && o.OwnerID != nil {
			out = append(out, Owner{Type: *o.OwnerType, ID: *o.OwnerID})
		}
		if o.FormerOwnerType != nil && o.FormerOwnerID != nil {
			out = append(out, Owner{Type: *o.FormerOwnerType, ID: *o.FormerOwnerID})
		}
	}
	return out
}

// Head returns the newest numbered revision of the feed: a reader that
// starts after it sees only new events. It reads the newest page of the
// audit log, whose newest events may not be numbered yet.
func (c *Client) Head(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out struct {
		Items []struct {
			Revision *int64 `json:"revision"`
		} `json:"items"`
	}
	if _, err := c.do(ctx, http.MethodGet, []string{"events"}, url.Values{"limit": {"100"}}, nil, &out); err != nil {
		return 0, err
	}
	var head int64
	for _, it := range out.Items {
		if it.Revision != nil && *it.Revision > head {
			head = *it.Revision
		}
	}
	return head, nil
}

// Events long-polls the feed: the events after revision after, oldest
// first, waiting up to wait for the first one when there is none yet. It
// returns the events and the revision to resume from.
func (c *Client) Events(ctx context.Context, after int64, wait time.Duration) ([]Event, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, wait+timeout)
	defer cancel()
	q := url.Values{"after": {strconv.FormatInt(after, 10)}, "limit": {"1000"}, "wait": {wait.String()}}
	var out struct {
		Items     []Event `json:"items"`
		NextAfter int64   `json:"next_after"`
	}
	if _, err := c.do(ctx, http.MethodGet, []string{"events"}, q, nil, &out); err != nil {
		return nil, after, err
	}
	if out.NextAfter < after {
		out.NextAfter = after
	}
	return out.Items, out.NextAfter, nil
}
