package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
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
	if err != nil || u.Scheme != "http" || u.Hostname() == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(u.Host, ":") {
		return nil, fmt.Errorf("server %q: want http://host[:port] (no path, query or credentials)", base)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
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
//
// The timeout covers the whole exchange, dialling included: a server that
// accepts no connection for that long is a hang too. A timeout of 0 means
// none. 1xx interim answers are skipped. Bytes that arrive beyond the
// answer (a second answer, a body longer than its Content-Length) are an
// error: they would otherwise be read as the next request's answer.
func (cc *clientConn) do(method, path string, body []byte) (int, []byte, error) {
	var deadline time.Time
	if cc.timeout > 0 {
		deadline = time.Now().Add(cc.timeout)
	}
	if cc.c == nil {
		c, err := (&net.Dialer{Deadline: deadline}).Dial("tcp", cc.addr)
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
	var resp *http.Response
	for {
		var err error
		if resp, err = http.ReadResponse(cc.br, nil); err != nil {
			cc.close()
			return 0, nil, err
		}
		if resp.StatusCode < 100 || resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
	}
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	resp.Body.Close()
	switch {
	case err != nil:
		cc.close()
		return 0, nil, err
	case len(out) > maxAnswer:
		cc.close()
		return 0, nil, fmt.Errorf("answer body longer than %d bytes", maxAnswer)
	case cc.br.Buffered() > 0:
		n := cc.br.Buffered()
		cc.close()
		return 0, nil, fmt.Errorf("%d unsolicited bytes after the answer (a second answer, or a body longer than its Content-Length)", n)
	}
	if resp.Close {
		cc.close()
	}
	return resp.StatusCode, out, nil
}

// maxAnswer bounds an answer's body (the largest are allocation pages of
// -limit items).
const maxAnswer = 64 << 20

func (cc *clientConn) close() {
	if cc.c != nil {
		cc.c.Close()
		cc.c, cc.br = nil, nil
	}
}
