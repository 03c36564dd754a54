package feed

import (
	"context"
	"regexp"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/ident"
	"github.com/ipledger/ipledger/models"
)

// FeedQuery reads the change feed: the events after revision After, oldest
// first (docs/feed.md).
type FeedQuery struct {
	After int64
	Limit int
	// Wait, when the page would be empty, waits up to this long (at most
	// MaxFeedWait) for the first new matching event.
	Wait time.Duration
	// Filters; empty matches everything. Action is an exact action, a
	// prefix written "allocation.*", or "*".
	ObjectType string
	Action     string
	Pool       string
}

// FeedPage is one page of the feed. NextAfter is the revision to resume
// from: the last item's, or, when the page holds every matching event up
// to the head, the head (never below the query's After).
type FeedPage struct {
	Items     []audit.Event `json:"items"`
	NextAfter int64         `json:"next_after"`
}

// MaxFeedWait bounds a long poll.
const MaxFeedWait = 60 * time.Second

var (
	actionFilterRE = regexp.MustCompile(`^([a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*(\.\*)?|\*)$`)
	objectTypeRE   = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
)

// ActionFilter is one parsed action filter.
type ActionFilter struct {
	exact  string // an exact action
	prefix string // "allocation." for "allocation.*"
	all    bool   // "*"
}

// ParseActionFilter parses an action filter (an action, a prefix written
// "allocation.*", or "*"), naming field in its error.
func ParseActionFilter(field, s string) (ActionFilter, error) {
	if !actionFilterRE.MatchString(s) {
		return ActionFilter{}, fault.Errf(fault.CodeInvalid, field, "%s %q is neither an action (allocation.create), a prefix (allocation.*) nor *", field, s)
	}
	switch {
	case s == "*":
		return ActionFilter{all: true}, nil
	case strings.HasSuffix(s, ".*"):
		return ActionFilter{prefix: strings.TrimSuffix(s, "*")}, nil
	}
	return ActionFilter{exact: s}, nil
}

// Match reports whether action passes the filter.
func (af ActionFilter) Match(action string) bool {
	switch {
	case af.all:
		return true
	case af.prefix != "":
		return strings.HasPrefix(action, af.prefix)
	}
	return action == af.exact
}

// validateFeedQuery checks the filters, naming the query parameter.
func validateFeedQuery(q *FeedQuery) (ActionFilter, error) {
	if q.After < 0 {
		return ActionFilter{}, fault.Errf(fault.CodeInvalid, "after", "after %d is negative", q.After)
	}
	if q.Wait < 0 || q.Wait > MaxFeedWait {
		return ActionFilter{}, fault.Errf(fault.CodeInvalid, "wait", "wait %s is outside 0s..%s", q.Wait, MaxFeedWait)
	}
	if q.ObjectType != "" && !objectTypeRE.MatchString(q.ObjectType) {
		return ActionFilter{}, fault.Errf(fault.CodeInvalid, "object_type", "object_type %q is not an object type (allocation, pool, machine, …)", q.ObjectType)
	}
	if q.Pool != "" && !ident.ValidPoolName(q.Pool) {
		return ActionFilter{}, fault.Errf(fault.CodeInvalid, "pool", "pool %q is not a pool name", q.Pool)
	}
	af := ActionFilter{all: true}
	if q.Action != "" {
		var err error
		if af, err = ParseActionFilter("action", q.Action); err != nil {
			return af, err
		}
	}
	if q.Limit <= 0 {
		q.Limit = 100
	}
	if q.Limit > 1000 {
		q.Limit = 1000
	}
	return af, nil
}

// ReadFeed returns the events after q.After that match its filters, in
// revision order. With q.Wait, an empty page waits for the first matching
// event (or the end of the wait, or of ctx) before it answers.
func (f *Feed) ReadFeed(ctx context.Context, q FeedQuery) (*FeedPage, error) {
	af, err := validateFeedQuery(&q)
	if err != nil {
		return nil, err
	}
	var deadline <-chan time.Time
	if q.Wait > 0 {
		t := time.NewTimer(q.Wait)
		defer t.Stop()
		deadline = t.C
	}
	for {
		// Take the wake-up channel before reading, so that a pass that
		// commits between the read and the wait still wakes this reader.
		woken := f.hub.wait()
		page, err := f.readFeedPage(ctx, q, af)
		if err != nil || len(page.Items) > 0 || deadline == nil {
			return page, err
		}
		q.After = page.NextAfter
		select {
		case <-woken:
		case <-deadline:
			return page, nil
		case <-ctx.Done():
			// The client left or the request's time is up: an empty page
			// is still a true answer.
			return page, nil
		}
	}
}

// readFeedPage reads one page. The head is read first: every revision up
// to a visible revision is visible (sequencer passes commit in revision
// order), so the page's read sees every event up to the head, and when it
// holds fewer than the limit the reader may resume from the head even if
// the last events up to it did not match.
func (f *Feed) readFeedPage(ctx context.Context, q FeedQuery, af ActionFilter) (*FeedPage, error) {
	var rows []models.AuditEvent
	var head int64
	err := f.read(ctx, func(db *gorm.DB) error {
		if err := db.Raw(`SELECT COALESCE(MAX(revision), 0) FROM audit_events`).Scan(&head).Error; err != nil {
			return err
		}
		if head <= q.After {
			return nil
		}
		s := db.Model(&models.AuditEvent{}).Where("revision > ? AND revision <= ?", q.After, head)
		if q.ObjectType != "" {
			s = s.Where("object_type = ?", q.ObjectType)
		}
		switch {
		case af.exact != "":
			s = s.Where("action = ?", af.exact)
		case af.prefix != "":
			s = s.Where("substr(action, 1, ?) = ?", len(af.prefix), af.prefix)
		}
		if q.Pool != "" {
			s = s.Where("((object_type = 'pool' AND object_id = ?) OR (object_type = 'allocation' AND substr(object_id, 1, ?) = ?))",
				q.Pool, len(q.Pool)+1, q.Pool+"/")
		}
		return s.Order("revision").Limit(q.Limit).Find(&rows).Error
	})
	if err != nil {
		return nil, err
	}
	page := &FeedPage{Items: make([]audit.Event, 0, len(rows)), NextAfter: max(q.After, head)}
	for i := range rows {
		page.Items = append(page.Items, audit.EventOut(&rows[i]))
	}
	if len(rows) == q.Limit {
		page.NextAfter = *rows[len(rows)-1].Revision
	}
	return page, nil
}
