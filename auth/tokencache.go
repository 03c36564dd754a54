package auth

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/models"
)

// TokenChannel is the PostgreSQL notification channel on which migration
// 10's statement trigger on api_tokens announces every committed change
// (INSERT, UPDATE, DELETE, TRUNCATE), whichever process or tool made it.
const TokenChannel = "ipledger_api_tokens"

// tokenCacheMax bounds the cache; it is emptied when full. Only tokens
// that exist are cached, so the bound matters only for sites with very
// many tokens in use at once.
const tokenCacheMax = 10000

// tokenCache keeps the tokens Authenticate found, by hash, while (and only
// while) this process listens on TokenChannel: every change to api_tokens
// empties it, in every process, within the time PostgreSQL takes to
// deliver a notification. While the listening connection is down, the
// cache is empty and unused, so a lost notification can never leave a
// deleted token working: each request then reads the token from the
// database, as without the cache.
//
// gen counts invalidations. A look-up that started before one may have read
// the row it removed, so its result is stored only if gen has not moved
// since the look-up began.
type tokenCache struct {
	mu   sync.Mutex
	live bool
	gen  uint64
	m    map[string]Token
	pid  uint32 // the listening connection's backend (tests)
}

// get returns the cached token for this hash, and the generation to pass
// to put after a database look-up.
func (c *tokenCache) get(hash string) (Token, bool, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live {
		return Token{}, false, c.gen
	}
	t, ok := c.m[hash]
	return t, ok, c.gen
}

func (c *tokenCache) put(hash string, t Token, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live || c.gen != gen {
		return
	}
	if len(c.m) >= tokenCacheMax {
		clear(c.m)
	}
	c.m[hash] = t
}

// invalidate empties the cache and sets whether it may be used from now on.
func (c *tokenCache) invalidate(live bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.live = live
	if c.m == nil {
		c.m = map[string]Token{}
	}
	clear(c.m)
}

func (c *tokenCache) isLive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live
}

// flush empties the cache and leaves it on or off.
func (c *tokenCache) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.m)
}

// ListenForTokenChanges lets Authenticate answer from memory on PostgreSQL:
// it keeps one extra connection (outside the pool, with the pool's
// settings) listening on TokenChannel until ctx ends, and empties the
// token cache on every notification, on every reconnect and whenever the
// connection fails. Without it (SQLite, tests, tools) every
// authentication reads the database. It returns at once; ready is closed
// once the first LISTEN succeeded (or at once on SQLite) — callers that
// do not care may ignore it.
func (s *Service) ListenForTokenChanges(ctx context.Context) (ready <-chan struct{}) {
	done := make(chan struct{})
	if s.dialect != models.Postgres {
		close(done)
		return done
	}
	go s.listenTokens(ctx, done)
	return done
}

func (s *Service) listenTokens(ctx context.Context, ready chan struct{}) {
	defer s.tokens.invalidate(false)
	backoff := 100 * time.Millisecond
	first := true
	for ctx.Err() == nil {
		err := s.listenTokensOnce(ctx, func() {
			backoff = 100 * time.Millisecond
			if first {
				first = false
				close(ready)
			}
		})
		s.tokens.invalidate(false)
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("token change listener lost its connection; authenticating from the database until it is back", "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// listenTokensOnce opens the listening connection, turns the cache on once
// LISTEN is in place, and empties it on each notification until the
// connection fails or ctx ends.
func (s *Service) listenTokensOnce(ctx context.Context, listening func()) error {
	conn, err := database.DialLike(ctx, s.db)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+TokenChannel); err != nil {
		return err
	}
	s.tokens.invalidate(true)
	s.tokens.mu.Lock()
	s.tokens.pid = conn.PgConn().PID()
	s.tokens.mu.Unlock()
	listening()
	for {
		// Wake up now and then to prove the connection still answers: a
		// connection cut without a TCP reset would otherwise keep the cache
		// on while notifications no longer arrive.
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			s.tokens.invalidate(true)
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err = conn.Ping(pctx)
			cancel()
			if err != nil {
				return err
			}
		default:
			return err
		}
	}
}
