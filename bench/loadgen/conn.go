package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// clientConn is one client's keep-alive HTTP/1.1 connection to one server.
// Each client sends one request at a time, so it needs no connection pool:
// it writes the request itself and reads the answer with net/http's parser
// (http.ReadResponse: status line, headers, Content-Length or chunked body)
// on the same goroutine. net/http's Transport would run two goroutines per
// connection and hand every request and answer between them; on the 2-core
// benchmark machine that client-side work competes with the server and
// PostgreSQL under test (pgbench, the ceiling we compare with, is a C
// client). See docs/benchmarks.md "The load generator".
type clientConn struct {
	addr    string // host:port
	host    string // Host header
	timeout time.Duration
	header  string // fixed headers (Authorization, Cookie), each ending in CRLF

	c   net.Conn
	br  *bufio.Reader
	buf []byte
}

func newClientConn(base string, c config) (*clientConn, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("server %q: want http://host:port", base)
	}
	addr := u.Host
	if u.Port() == "" {
		addr += ":80"
	}
	h := ""
	if c.token != "" {
		h += "Authorization: Bearer " + c.token + "\r\n"
	}
	if c.cookie != "" {
		h += "Cookie: " + c.cookie + "\r\n"
	}
	return &clientConn{addr: addr, host: u.Host, timeout: c.timeout, header: h}, nil
}

// do sends one request and returns its status and body. Any error closes
// the connection (the next request dials a new one); the error is a
// net.Error with Timeout() when no complete answer came within the timeout.
func (cc *clientConn) do(method, path string, body []byte) (int, []byte, error) {
	deadline := time.Now().Add(cc.timeout)
	if cc.c == nil {
		c, err := net.DialTimeout("tcp", cc.addr, min(cc.timeout, 3*time.Second))
		if err != nil {
			return 0, nil, err
		}
		cc.c, cc.br = c, bufio.NewReaderSize(c, 16<<10)
	}
	b := cc.buf[:0]
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, cc.host...)
	b = append(b, "\r\n"...)
	b = append(b, cc.header...)
	if body != nil {
		b = append(b, "Content-Type: application/json\r\nContent-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	b = append(b, body...)
	cc.buf = b
	if err := cc.c.SetDeadline(deadline); err != nil {
		cc.close()
		return 0, nil, err
	}
	if _, err := cc.c.Write(b); err != nil {
		cc.close()
		return 0, nil, err
	}
	resp, err := http.ReadResponse(cc.br, nil)
	if err != nil {
		cc.close()
		return 0, nil, err
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		cc.close()
		return 0, nil, err
	}
	if resp.Close {
		cc.close()
	}
	return resp.StatusCode, out, nil
}

func (cc *clientConn) close() {
	if cc.c != nil {
		cc.c.Close()
		cc.c, cc.br = nil, nil
	}
}
