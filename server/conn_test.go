package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// addrOf returns the host:port of a test server's URL.
func addrOf(ts *testServer) string { return strings.TrimPrefix(ts.url, "http://") }

// dial opens a raw connection to addr, closed when the test ends.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// rawRequest sends head (the request line and header lines, each ending
// in CRLF, without Content-Length) and body on a fresh connection and
// returns the response's status and body.
func rawRequest(t *testing.T, addr, head, body string) (int, string) {
	t.Helper()
	conn := dial(t, addr)
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(conn, "%sContent-Length: %d\r\nConnection: close\r\n\r\n%s", head, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%q: %v", head, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitClosed reads conn until the server closes it or limit passes, and
// returns what it read and how long the close took (negative: still open).
func waitClosed(conn net.Conn, start time.Time, limit time.Duration) (string, time.Duration) {
	conn.SetReadDeadline(start.Add(limit))
	b, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return string(b), -1
	}
	return string(b), time.Since(start)
}

// statusOf returns the status code of a raw response, 0 if there is none.
func statusOf(raw string) int {
	var code int
	fmt.Sscanf(raw, "HTTP/1.1 %d", &code)
	return code
}

func TestUnfinishedBodyClosesConnection(t *testing.T) {
	const timeout = 2 * time.Second
	for _, c := range []struct {
		name, key, method, path string
		status                  int // the reply sent before the close
	}{
		{"chat", "", "POST", "/v1/chat/completions", http.StatusRequestTimeout},
		{"messages", "", "POST", "/v1/messages", http.StatusRequestTimeout},
		{"count_tokens", "", "POST", "/v1/messages/count_tokens", http.StatusRequestTimeout},
		{"unauthorized", "k3y", "POST", "/v1/chat/completions", http.StatusUnauthorized},
		{"unauthorized count_tokens", "k3y", "POST", "/v1/messages/count_tokens", http.StatusUnauthorized},
		{"unknown endpoint", "", "POST", "/v1/nope", http.StatusNotFound},
		{"GET with a body", "", "GET", "/v1/models", http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ts, _ := scriptServer(t, func(cfg *Config) { cfg.ReadTimeout = timeout; cfg.APIKey = c.key })
			conn := dial(t, addrOf(ts))
			start := time.Now()
			fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", c.method, c.path)
			raw, took := waitClosed(conn, start, 2*timeout)
			if took < 0 {
				t.Fatalf("connection still open %v after a partial body (read timeout %v); read %q", 2*timeout, timeout, raw)
			}
			t.Logf("closed after %v (read timeout %v)", took.Round(time.Millisecond), timeout)
			if got := statusOf(raw); got != c.status {
				t.Errorf("status %d, want %d: %q", got, c.status, raw)
			}
		})
	}
}

func TestSlowHeadersCloseConnection(t *testing.T) {
	const timeout = 2 * time.Second
	ts, _ := scriptServer(t, func(cfg *Config) { cfg.ReadTimeout = timeout })
	conn := dial(t, addrOf(ts))
	start := time.Now()
	io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
	if raw, took := waitClosed(conn, start, 2*timeout); took < 0 {
		t.Fatalf("connection still open %v after partial headers; read %q", 2*timeout, raw)
	} else {
		t.Logf("closed after %v", took.Round(time.Millisecond))
	}
}

// TestLongRequestsOutliveReadTimeout checks that the read timeout bounds
// only the request: generations that run longer, streamed or not, finish.
func TestLongRequestsOutliveReadTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	words := strings.Repeat("w ", 40)
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			ts, sess := scriptServer(t, func(cfg *Config) { cfg.ReadTimeout = timeout }, words)
			sess.delay = 25 * time.Millisecond // 40 tokens: at least 1 s, over 3 read timeouts
			start := time.Now()
			status, _, body := post(t, ts.url+"/v1/chat/completions",
				fmt.Sprintf(`{"messages":[{"role":"user","content":"go"}],"think":false,"stream":%v}`, stream))
			took := time.Since(start)
			if status != 200 || !strings.Contains(body, `"finish_reason":"stop"`) || strings.Count(body, "w") < 40 {
				t.Fatalf("after %v: %d %s", took, status, body)
			}
			if took < 3*timeout {
				t.Fatalf("generation took %v, not longer than the read timeout %v: the test proves nothing", took, timeout)
			}
			t.Logf("generation of %v with a read timeout of %v", took.Round(time.Millisecond), timeout)
		})
	}
}

func TestMaxConnections(t *testing.T) {
	const max = 3
	ts, _ := scriptServer(t, func(cfg *Config) { cfg.MaxConnections = max; cfg.ReadTimeout = 20 * time.Second })
	addr := addrOf(ts)
	var held []net.Conn
	for range max {
		conn := dial(t, addr)
		io.WriteString(conn, "GET /healthz HTTP/1.1\r\n") // slow headers
		held = append(held, conn)
	}
	extra := dial(t, addr)
	start := time.Now()
	io.WriteString(extra, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	raw, took := waitClosed(extra, start, 10*time.Second)
	if took < 0 {
		t.Fatalf("connection %d still open after 10 s; read %q", max+1, raw)
	}
	if got := statusOf(raw); got != http.StatusServiceUnavailable || !strings.Contains(raw, "too_many_connections") || !strings.Contains(raw, "Retry-After: 1") {
		t.Fatalf("connection %d: %q, want a 503", max+1, raw)
	}
	t.Logf("connection %d refused in %v", max+1, took.Round(time.Millisecond))
	// A held connection closing frees its slot.
	held[0].Close()
	deadline := time.Now().Add(10 * time.Second)
	for ts.stats.conns.Load() >= max {
		if time.Now().After(deadline) {
			t.Fatal("no slot freed 10 s after a client left")
		}
		time.Sleep(5 * time.Millisecond)
	}
	status, body := rawRequest(t, addr, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n", "")
	if status != 200 {
		t.Fatalf("after a client left: %d %s", status, body)
	}
	for _, want := range []string{"ds4_connections_open 3", "ds4_connections_max 3", "ds4_connections_refused_total 1"} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestLoopbackOnlyWithoutKey(t *testing.T) {
	open, _ := scriptServer(t, nil)
	keyed, _ := scriptServer(t, func(cfg *Config) { cfg.APIKey = "k3y" })
	const chat = `{"messages":[{"role":"user","content":"hi"}],"max_tokens":1,"think":false}`
	const count = `{"model":"deepseek-v4-flash","messages":[{"role":"user","content":"hi"}]}`
	json := "Content-Type: application/json\r\n"
	for _, c := range []struct {
		name   string
		ts     *testServer
		method string
		path   string
		host   string
		header string // extra header lines
		status int
	}{
		{"loopback address", open, "POST", "/v1/chat/completions", "127.0.0.1:8000", json, 200},
		{"loopback /8", open, "POST", "/v1/chat/completions", "127.45.6.7", json, 200},
		{"localhost", open, "POST", "/v1/chat/completions", "localhost:8000", json, 200},
		{"LOCALHOST.", open, "POST", "/v1/chat/completions", "LOCALHOST.", json, 200},
		{"IPv6 loopback", open, "POST", "/v1/chat/completions", "[::1]:8000", json, 200},
		{"IPv6 loopback without port", open, "POST", "/v1/chat/completions", "[::1]", json, 200},
		{"charset parameter", open, "POST", "/v1/chat/completions", "127.0.0.1", "Content-Type: application/json; charset=utf-8\r\n", 200},
		{"upper-case type", open, "POST", "/v1/chat/completions", "127.0.0.1", "Content-Type: Application/JSON\r\n", 200},
		{"count_tokens", open, "POST", "/v1/messages/count_tokens", "127.0.0.1", json, 200},
		{"healthz", open, "GET", "/healthz", "localhost", "", 200},
		{"models", open, "GET", "/v1/models", "127.0.0.1", "", 200},

		{"foreign host", open, "POST", "/v1/chat/completions", "attacker.example:8000", json, 403},
		{"loopback-looking name", open, "POST", "/v1/chat/completions", "127.0.0.1.attacker.example", json, 403},
		{"localhost subdomain", open, "POST", "/v1/chat/completions", "localhost.attacker.example", json, 403},
		{"private address", open, "POST", "/v1/chat/completions", "192.168.1.10:8000", json, 403},
		{"unspecified address", open, "POST", "/v1/chat/completions", "0.0.0.0:8000", json, 403},
		{"foreign host count_tokens", open, "POST", "/v1/messages/count_tokens", "attacker.example", json, 403},
		{"foreign host models", open, "GET", "/v1/models", "attacker.example", "", 403},
		{"foreign host metrics", open, "GET", "/metrics", "attacker.example", "", 403},
		{"foreign host healthz", open, "GET", "/healthz", "attacker.example", "", 403},
		{"foreign host preflight", open, "OPTIONS", "/v1/chat/completions", "attacker.example", "", 403},

		{"text/plain", open, "POST", "/v1/chat/completions", "127.0.0.1", "Content-Type: text/plain\r\n", 415},
		{"text/plain with charset", open, "POST", "/v1/messages", "127.0.0.1", "Content-Type: text/plain;charset=UTF-8\r\n", 415},
		{"no content type", open, "POST", "/v1/chat/completions", "127.0.0.1", "", 415},
		{"form", open, "POST", "/v1/completions", "127.0.0.1", "Content-Type: application/x-www-form-urlencoded\r\n", 415},
		{"multipart", open, "POST", "/v1/responses", "127.0.0.1", "Content-Type: multipart/form-data; boundary=x\r\n", 415},
		{"json look-alike", open, "POST", "/v1/chat/completions", "127.0.0.1", "Content-Type: application/jsonx\r\n", 415},
		{"count_tokens text/plain", open, "POST", "/v1/messages/count_tokens", "127.0.0.1", "Content-Type: text/plain\r\n", 415},

		{"key: foreign host", keyed, "POST", "/v1/chat/completions", "ds4.example:443", json + "Authorization: Bearer k3y\r\n", 200},
		{"key: text/plain", keyed, "POST", "/v1/chat/completions", "127.0.0.1", "Content-Type: text/plain\r\nAuthorization: Bearer k3y\r\n", 200},
		{"key: foreign host, no key", keyed, "POST", "/v1/chat/completions", "ds4.example", json, 401},
	} {
		body := ""
		switch c.method {
		case "POST":
			body = chat
			if strings.HasSuffix(c.path, "count_tokens") {
				body = count
			}
			if c.path == "/v1/messages" {
				body = `{"model":"deepseek-v4-flash","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`
			}
		}
		head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\n%s", c.method, c.path, c.host, c.header)
		status, b := rawRequest(t, addrOf(c.ts), head, body)
		if status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, status, b, c.status)
		}
	}
}

// TestOversizeDeclaredBodyRefusedUnread sends only the headers of a
// request whose Content-Length passes the body limit: the 413 comes at
// once, without waiting for (or reading) the body, and the connection is
// closed, long before the read timeout.
func TestOversizeDeclaredBodyRefusedUnread(t *testing.T) {
	const timeout = time.Minute
	ts, _ := scriptServer(t, func(cfg *Config) { cfg.ReadTimeout = timeout; cfg.MaxBodyBytes = 1 << 20 })
	conn := dial(t, addrOf(ts))
	start := time.Now()
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", 1<<20+1)
	raw, took := waitClosed(conn, start, timeout/2)
	if took < 0 {
		t.Fatalf("connection still open %v after the headers of an oversize body; read %q", timeout/2, raw)
	}
	if got := statusOf(raw); got != http.StatusRequestEntityTooLarge {
		t.Errorf("status %d, want 413: %q", got, raw)
	}
}
