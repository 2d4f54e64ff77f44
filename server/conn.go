package server

import (
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// refuseTimeout bounds the life of a connection refused for being over
// Config.MaxConnections: the time to write the 503 and to drain what the
// client sent so that closing does not reset the connection under it.
const refuseTimeout = time.Second

// limitListener bounds the connections it has accepted and not yet seen
// closed; connections past the bound get a 503 and are closed.
type limitListener struct {
	net.Listener
	max      int64
	open     *atomic.Int64
	refused  *atomic.Int64
	refusing chan struct{} // bounds the refusals in progress
}

func newLimitListener(ln net.Listener, max int, m *metrics) *limitListener {
	return &limitListener{Listener: ln, max: int64(max), open: &m.conns, refused: &m.connsRefused, refusing: make(chan struct{}, max)}
}

// Accept returns the next connection within the bound, refusing those
// beyond it.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &limitConn{Conn: c, open: l.open}, nil
		}
		l.open.Add(-1)
		l.refused.Add(1)
		select {
		case l.refusing <- struct{}{}:
			go func() {
				defer func() { <-l.refusing }()
				refuse(c, l.max)
			}()
		default:
			c.Close() // a flood: no reply
		}
	}
}

// refuse answers c with a 503 and closes it.
func refuse(c net.Conn, max int64) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(refuseTimeout))
	e := &apiError{status: http.StatusServiceUnavailable, code: "too_many_connections",
		message: "server busy: " + strconv.FormatInt(max, 10) + " connections already open; retry later"}
	b := e.body(apiOther)
	head := "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: " +
		strconv.Itoa(len(b)) + "\r\n\r\n"
	if _, err := c.Write(append([]byte(head), b...)); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	io.Copy(io.Discard, io.LimitReader(c, 64<<10))
}

// limitConn gives its slot back to the limitListener when closed.
type limitConn struct {
	net.Conn
	open *atomic.Int64
	once sync.Once
}

func (c *limitConn) Close() error {
	c.once.Do(func() { c.open.Add(-1) })
	return c.Conn.Close()
}

// CloseWrite shuts down the writing side, as net/http does before closing
// a connection whose request it did not read to the end.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// requestBody wraps a request body to notice its end.
type requestBody struct {
	io.ReadCloser
	done bool // read to io.EOF
}

func (b *requestBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.done = true
	}
	return n, err
}

// loopbackHost reports whether host, a Host header, names a loopback
// address: localhost, 127.0.0.0/8 or ::1, with or without a port. An
// empty host (HTTP/1.0) is accepted: browsers always send one.
func loopbackHost(host string) bool {
	if host == "" {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	host = strings.TrimSuffix(host, ".")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// jsonContentType reports whether ct, a Content-Type header, is
// application/json, with any parameters.
func jsonContentType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return (err == nil || errors.Is(err, mime.ErrInvalidMediaParameter)) && mt == "application/json"
}
