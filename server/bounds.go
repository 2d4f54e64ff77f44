package server

import (
	"context"
	"fmt"
	"net/http"
)

// LargeRequestBytes is the size from which a request body, or a rendered
// prompt, is decoded, rendered and tokenized only in one of the server's
// large-request slots (Config.LargeRequests), so that few large prompts
// are held in memory and tokenized at once.
const LargeRequestBytes = 1 << 20

// promptLimit returns the most tokens a prompt may have: one context slot
// stays free for the first generated token.
func (s *Server) promptLimit() int { return s.ctx - 1 }

// promptByteLimit returns the most bytes of rendered text that can
// tokenize to promptLimit tokens: no token stands for more than
// maxTokenBytes bytes, so longer text certainly overflows the context.
func (s *Server) promptByteLimit() int64 {
	return int64(s.promptLimit()) * int64(s.maxTokenBytes)
}

// tooManyBytes is the context-length error of a prompt of n bytes, more
// than promptByteLimit: it has at least n/maxTokenBytes tokens.
func (s *Server) tooManyBytes(a api, n int64) *apiError {
	m := int64(s.maxTokenBytes)
	return overflowAtLeast(a, int((n+m-1)/m), s.ctx)
}

// textBytes returns a lower bound on the bytes of r's rendered prompt: the
// content of every message (each role renders its content) or the
// Completions prompt.
func (r *request) textBytes() int64 {
	n := int64(len(r.completion))
	for _, m := range r.msgs {
		n += int64(len(m.Content))
	}
	return n
}

// acquireLarge takes one of the large-request slots, waiting while all are
// taken, unless r already holds one. It gives up with an error when ctx
// ends or the server shuts down.
func (s *Server) acquireLarge(ctx context.Context, r *request) error {
	if r.large {
		return nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	select {
	case s.large <- struct{}{}:
		r.large = true
		return nil
	case <-ctx.Done():
		return &apiError{status: http.StatusServiceUnavailable, message: fmt.Sprintf("request abandoned while waiting to decode: %v", context.Cause(ctx))}
	case <-s.base.Done():
		return errShutdown
	}
}

// releaseLarge gives back the large-request slot r holds, if any.
func (s *Server) releaseLarge(r *request) {
	if r.large {
		r.large = false
		<-s.large
	}
}
