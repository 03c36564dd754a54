package web

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database/dbtest"
)

// A graceful shutdown ends open event streams and long polls instead of
// waiting for them until its deadline: the stream ends, the long poll
// answers 200 with its empty page, and Serve returns nil.
func TestShutdownEndsStreamsAndLongPolls(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		e, s := newFeedServer(t, db, 10*time.Second)
		e.must(t, "POST", "/api/v1/pools", `{"name":"sd","type":"integer","ranges":[{"first":"1","last":"9"}]}`, 201)
		waitNumbered(t, e.feed)
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		ready := make(chan string, 1)
		served := make(chan error, 1)
		go func() { served <- s.Serve(ctx, "127.0.0.1:0", func(addr string) { ready <- addr }) }()
		base := "http://" + <-ready
		get := func(path string) *http.Response {
			req, _ := http.NewRequest("GET", base+path, nil)
			req.Header.Set("Authorization", "Bearer "+e.viewer)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}
		stream := get("/api/v1/events:stream")
		defer stream.Body.Close()
		if stream.StatusCode != 200 {
			t.Fatalf("stream: %d", stream.StatusCode)
		}
		r := bufio.NewReader(stream.Body)
		if line, err := r.ReadString('\n'); err != nil || line != ": keep-alive\n" {
			t.Fatalf("stream's first line: %q %v", line, err)
		}
		streamEnded := make(chan error, 1)
		go func() { _, err := io.Copy(io.Discard, r); streamEnded <- err }()
		type poll struct {
			code int
			body []byte
			err  error
		}
		polled := make(chan poll, 1)
		go func() {
			req, _ := http.NewRequest("GET", base+"/api/v1/events?after=1000000&wait=50s", nil)
			req.Header.Set("Authorization", "Bearer "+e.viewer)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				polled <- poll{err: err}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			polled <- poll{resp.StatusCode, b, err}
		}()
		time.Sleep(300 * time.Millisecond) // the poll is waiting
		start := time.Now()
		stop()
		const bound = 5 * time.Second
		select {
		case err := <-served:
			if err != nil {
				t.Fatalf("Serve after %s: %v", time.Since(start), err)
			}
		case <-time.After(bound):
			t.Fatalf("Serve did not return within %s of the shutdown", bound)
		}
		took := time.Since(start)
		select {
		case err := <-streamEnded:
			if err != nil {
				t.Fatalf("stream ended with %v", err)
			}
		case <-time.After(bound):
			t.Fatal("the event stream is still open after Serve returned")
		}
		select {
		case p := <-polled:
			var page struct {
				Items []json.RawMessage `json:"items"`
			}
			if p.err != nil || p.code != 200 || json.Unmarshal(p.body, &page) != nil || len(page.Items) != 0 {
				t.Fatalf("long poll at shutdown: %d %s %v", p.code, p.body, p.err)
			}
		case <-time.After(bound):
			t.Fatal("the long poll did not answer after Serve returned")
		}
		t.Logf("Serve returned %s after the shutdown began", took)
	})
}
