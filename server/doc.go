// Package server is the home of the HTTP server that exposes the engine
// through the OpenAI, Anthropic and Responses APIs.
package server
