package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/feed"
)

// feedQuery reads the feed's query parameters (docs/feed.md): after,
// limit, wait, object_type, action, pool. after is required by the caller
// where it matters.
func feedQuery(c echo.Context) (feed.FeedQuery, error) {
	var q feed.FeedQuery
	if s := c.QueryParam("after"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(s, "-") {
			return q, fault.Errf(fault.CodeInvalid, "after", "after %q is larger than any revision (at most %d)", s, int64(math.MaxInt64))
		}
		if err != nil || n < 0 {
			return q, fault.Errf(fault.CodeInvalid, "after", "after %q must be a revision (an integer ≥ 0)", s)
		}
		q.After = n
	}
	limit, err := Limit(c)
	if err != nil {
		return q, err
	}
	q.Limit = limit
	if s := c.QueryParam("wait"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return q, fault.Errf(fault.CodeInvalid, "wait", "wait %q must be a duration such as 30s", s)
		}
		if d > feed.MaxFeedWait {
			return q, fault.Errf(fault.CodeInvalid, "wait", "wait %q is longer than %s", s, feed.MaxFeedWait)
		}
		q.Wait = d
	}
	q.ObjectType, q.Action, q.Pool = c.QueryParam("object_type"), c.QueryParam("action"), c.QueryParam("pool")
	return q, nil
}

// readFeed: GET /api/v1/events?after=R&limit=&wait=&object_type=&action=&pool=,
// the change feed in revision order (ListEvents sends requests with after
// here).
func (h *API) readFeed(c echo.Context) error {
	if c.QueryParams().Has("cursor") {
		return fault.Errf(fault.CodeInvalid, "cursor", "cursor pages the newest-first audit log and after reads the feed; give one of them")
	}
	if err := OnlyQuery(c, "after", "limit", "wait", "object_type", "action", "pool"); err != nil {
		return err
	}
	q, err := feedQuery(c)
	if err != nil {
		return err
	}
	page, err := h.Feed.ReadFeed(Ctx(c), q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

// DefaultStreamKeepAlive is how often an idle event stream sends a
// comment, so that proxies keep it open.
const DefaultStreamKeepAlive = 15 * time.Second

// StreamEvents: GET /api/v1/events:stream?after=&object_type=&action=&pool=
// (Server-Sent Events). Last-Event-ID wins over after; with neither the
// stream starts at the current head. Each event is sent as id (the
// revision), event (the action) and data (the event JSON). The stream
// holds at most one page of events in memory, read from the database,
// whatever the reader's speed.
func (h *API) StreamEvents(c echo.Context) error {
	if err := OnlyQuery(c, "after", "object_type", "action", "pool"); err != nil {
		return err
	}
	q, err := feedQuery(c)
	if err != nil {
		return err
	}
	ctx := Ctx(c)
	switch id := strings.TrimSpace(c.Request().Header.Get("Last-Event-ID")); {
	case id != "":
		n, err := strconv.ParseInt(id, 10, 64)
		if errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(id, "-") {
			return fault.Errf(fault.CodeInvalid, "Last-Event-ID", "Last-Event-ID %q is larger than any revision (at most %d)", id, int64(math.MaxInt64))
		}
		if err != nil || n < 0 {
			return fault.Errf(fault.CodeInvalid, "Last-Event-ID", "Last-Event-ID %q must be a revision (an integer ≥ 0)", id)
		}
		q.After = n
	case c.QueryParam("after") == "":
		if q.After, err = h.Feed.FeedHead(ctx); err != nil {
			return err
		}
	}
	// A first read checks the filters while an error can still be an
	// answer of its own.
	q.Limit = 100
	page, err := h.Feed.ReadFeed(ctx, q)
	if err != nil {
		return err
	}
	keepAlive := h.StreamKeepAlive
	if keepAlive <= 0 {
		keepAlive = DefaultStreamKeepAlive
	}
	w := c.Response()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w.Writer)
	var buf []byte
	for {
		buf = buf[:0]
		if len(page.Items) == 0 {
			buf = append(buf, ": keep-alive\n\n"...)
		}
		for i := range page.Items {
			e := &page.Items[i]
			data, err := json.Marshal(e)
			if err != nil {
				return err
			}
			buf = fmt.Appendf(buf, "id: %d\nevent: %s\ndata: %s\n\n", *e.Revision, e.Action, data)
		}
		// A reader that stops reading holds this one page, and is dropped
		// when it does not take it within the deadline.
		_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := w.Write(buf); err != nil {
			return nil
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
		q.After = page.NextAfter
		q.Wait = keepAlive
		if page, err = h.Feed.ReadFeed(ctx, q); err != nil || ctx.Err() != nil {
			return nil // the client reconnects with Last-Event-ID
		}
	}
}
