package server

import (
	"net/http"
	"time"
)

// sseWriter writes a server-sent event stream, flushing every event. The
// first failed write sticks: later writes fail at once and the generation
// loop stops at its next token.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	started bool
	last    time.Time
	buf     []byte
	err     error
}

// start sends the response headers once.
func (s *sseWriter) start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
}

// event writes one event: an optional "event:" line and a "data:" line
// holding v as JSON.
func (s *sseWriter) event(name string, v any) error {
	s.buf = s.buf[:0]
	if name != "" {
		s.buf = append(s.buf, "event: "...)
		s.buf = append(s.buf, name...)
		s.buf = append(s.buf, '\n')
	}
	s.buf = append(s.buf, "data: "...)
	s.buf = appendJSON(s.buf, v)
	s.buf = append(s.buf, '\n', '\n')
	return s.write(s.buf)
}

// data writes a "data:" line with text verbatim (e.g. "[DONE]").
func (s *sseWriter) data(text string) error {
	s.buf = append(append(append(s.buf[:0], "data: "...), text...), '\n', '\n')
	return s.write(s.buf)
}

// comment writes an SSE comment line, which clients ignore: a keep-alive.
func (s *sseWriter) comment(text string) error {
	s.buf = append(append(append(s.buf[:0], ": "...), text...), '\n', '\n')
	return s.write(s.buf)
}

// streamError reports an error after the headers went out (docs/formats/server.md#errors-after-the-headers).
func (s *sseWriter) streamError(a api, msg string) error {
	if a == apiMessages {
		return s.event("error", ordered{{"type", "error"}, {"error", ordered{{"type", "api_error"}, {"message", msg}}}})
	}
	return s.event("error", ordered{{"error", ordered{{"message", msg}, {"type", "server_error"}}}})
}

func (s *sseWriter) write(b []byte) error {
	if s.err != nil {
		return s.err
	}
	s.start()
	s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	if _, err := s.w.Write(b); err != nil {
		s.err = err
		return err
	}
	if err := s.rc.Flush(); err != nil {
		s.err = err
		return err
	}
	s.last = time.Now()
	return nil
}

// lastWrite returns the time of the last write, or since when none.
func (s *sseWriter) lastWrite(since time.Time) time.Time {
	if s.last.IsZero() {
		return since
	}
	return s.last
}
