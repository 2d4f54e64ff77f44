package server

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// api identifies the protocol of an endpoint; it selects the request
// decoder, the response shapes and the error shape.
type api uint8

const (
	apiOther api = iota
	apiChat
	apiCompletions
	apiResponses
	apiMessages
)

func (a api) String() string {
	switch a {
	case apiChat:
		return "chat"
	case apiCompletions:
		return "completions"
	case apiResponses:
		return "responses"
	case apiMessages:
		return "messages"
	}
	return "other"
}

// apiError is an error reported to the client with an HTTP status, in the
// error shape of the endpoint's protocol.
type apiError struct {
	status  int
	message string
	param   string // OpenAI "param", when one field is at fault
	code    string // OpenAI "code"

	// Context overflow details (code "context_length_exceeded").
	promptTokens, contextSize int
}

func (e *apiError) Error() string { return e.message }

var (
	errInvalidJSON = &apiError{status: http.StatusBadRequest, message: "invalid JSON request"}
	errNotFound    = &apiError{status: http.StatusNotFound, message: "unknown endpoint"}
)

// badRequest returns a 400 error with message.
func badRequest(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, message: fmt.Sprintf(format, args...)}
}

// fieldError returns a 400 error about the request member k.
func fieldError(k, what string) *apiError {
	return &apiError{status: http.StatusBadRequest, message: k + " " + what, param: k}
}

// overflowError is the context-length error of a prompt of n tokens.
func overflowError(a api, n, ctx int) *apiError {
	param := "messages"
	switch a {
	case apiCompletions:
		param = "prompt"
	case apiResponses:
		param = "input"
	}
	return &apiError{
		status:       http.StatusBadRequest,
		message:      fmt.Sprintf("Prompt has %d tokens, but the configured context size is %d tokens", n, ctx),
		param:        param,
		code:         "context_length_exceeded",
		promptTokens: n,
		contextSize:  ctx,
	}
}

// overflowAtLeast is the context-length error of a prompt known to have at
// least n tokens, n ≥ ctx, found without tokenizing all of it.
func overflowAtLeast(a api, n, ctx int) *apiError {
	e := overflowError(a, n, ctx)
	e.message = fmt.Sprintf("Prompt has at least %d tokens, but the configured context size is %d tokens", n, ctx)
	return e
}

// asAPIError converts any error into an apiError, a 500 unless it already is
// one.
func asAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	return &apiError{status: http.StatusInternalServerError, message: err.Error()}
}

// anthropicErrorType maps a status to the Anthropic error type.
func anthropicErrorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// body returns the JSON error body for protocol a.
func (e *apiError) body(a api) []byte {
	if a == apiMessages {
		inner := ordered{{"type", anthropicErrorType(e.status)}, {"message", e.message}}
		if e.code == "context_length_exceeded" {
			inner = append(inner, field{"n_prompt_tokens", e.promptTokens}, field{"n_ctx", e.contextSize})
		}
		return append(marshal(ordered{{"type", "error"}, {"error", inner}}), '\n')
	}
	inner := ordered{{"message", e.message}, {"type", "invalid_request_error"}}
	if e.param != "" {
		inner = append(inner, field{"param", e.param})
	}
	if e.code != "" {
		inner = append(inner, field{"code", e.code})
	}
	if e.code == "context_length_exceeded" {
		inner = append(inner, field{"n_prompt_tokens", e.promptTokens}, field{"n_ctx", e.contextSize})
	}
	return append(marshal(ordered{{"error", inner}}), '\n')
}

// writeError writes e as a complete response in the shape of protocol a.
func writeError(w http.ResponseWriter, a api, e *apiError) {
	b := e.body(a)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	if e.status == http.StatusTooManyRequests || e.status == http.StatusServiceUnavailable {
		h.Set("Retry-After", "1")
	}
	w.WriteHeader(e.status)
	w.Write(b)
}
