// Package server is the HTTP server that exposes the engine through the
// OpenAI Chat Completions, Completions and Responses APIs and the Anthropic
// Messages API, with streaming (server-sent events) and DSML tool calls,
// following upstream ds4_server.c (spec server.md).
//
// # Endpoints
//
//	GET  /v1/models, /v1/models/{id}   deepseek-v4-flash and deepseek-v4-pro
//	POST /v1/chat/completions          OpenAI chat (tools, streaming, logprobs)
//	POST /v1/completions               OpenAI legacy completions
//	POST /v1/responses                 OpenAI Responses (function calls, reasoning summaries)
//	POST /v1/messages                  Anthropic Messages (tools, thinking, streaming)
//	POST /v1/messages/count_tokens     Anthropic token counting
//	GET  /healthz                      liveness, never authenticated
//	GET  /metrics                      Prometheus text counters
//
// # Execution
//
// Requests are decoded, rendered and tokenized concurrently by the HTTP
// handlers; inference is serialized through one worker goroutine that owns
// the engine session and takes jobs from a bounded queue (429 when full,
// 503 while shutting down). Every job carries its request's context, so a
// client that disconnects stops its generation before the next token and
// a queued request whose client left is dropped. Streaming requests get
// SSE comment lines while they wait in the queue or in a long prefill.
//
// The worker reuses the live KV cache across the stateless requests of a
// conversation (spec §13): the protocol continuations of the Responses and
// Anthropic tool-call bindings, a token prefix, the thinking binding and a
// text prefix with suffix-only tokenization, and with Config.KVCache the
// disk checkpoints of package kvcache. It remembers the exact DSML bytes
// sampled for each tool call (a bounded LRU keyed by unguessable ids) so
// that the next turn renders them unchanged, falling back to the canonical
// rendering for unknown ids. Inside a tool-call block the structural
// tokens are decoded greedily and the argument payloads are sampled.
//
// # Deviations from upstream
//
// Deliberate, for clients that must work unchanged:
//   - unknown model ids get 404 (model_not_found) unless
//     Config.AcceptAnyModel is set;
//   - errors on /v1/messages use Anthropic's error shape
//     {"type":"error","error":{...}} with Anthropic error types;
//   - Anthropic message ids are "msg_" and 24 hex digits (upstream:
//     chatcmpl-N), also in message_start and as the thinking signature;
//   - Anthropic usage reports prompt tokens reused from the live KV or a
//     disk checkpoint as cache_read_input_tokens and the rest as
//     input_tokens; only a request that sets cache_control (top level, a
//     system or content block, a tool) gets them as
//     cache_creation_input_tokens instead, since every evaluated prompt
//     token stays cached in the live KV for the next request (upstream
//     reports every request that way, with input_tokens 0);
//     count_tokens counts the whole prompt, the sum of the three;
//   - a stop sequence ends an Anthropic message with stop_reason
//     "stop_sequence" and the matched stop_sequence;
//   - numeric fields are range-checked (400) instead of clamped, null
//     numeric fields mean "default", and max_completion_tokens wins over
//     max_tokens when both are present;
//   - an output limit (max_tokens, max_completion_tokens,
//     max_output_tokens) larger than the server's whole context can never
//     be honoured and gets a 400 stating the context size; one that fits
//     the context but not the room the prompt leaves is clamped, and
//     generation ends at the context's end with finish_reason "length"
//     (upstream clamps every limit). Agent clients routinely send 32,000:
//     that works with ds4-server's default --ctx of 32768 but is refused
//     by a server started with a smaller context, which must be raised
//     (or the client's limit lowered);
//   - /v1/messages requires max_tokens, as Anthropic's API does
//     (count_tokens does not read it);
//   - an empty messages array (or Responses input), and a message whose
//     role the prompt template does not know, get a 400 naming the field
//     (upstream renders no conversation, or drops the message, and
//     generates anyway);
//   - a Completions prompt is a string, an array of one string, an array
//     of token ids or an array of one such array (ids are decoded to
//     text); batches of several prompts and other values get a 400
//     (upstream uses the first string and renders anything else as an
//     empty prompt);
//   - HTTP keep-alive, chunked request bodies and IPv6 work (net/http);
//   - a stop-sequence hit keeps the live KV (only the protocol bindings are
//     dropped): token and text prefix matching stay exact because they
//     compare against what the KV really holds;
//   - visible-transcript bindings are keyed without their final EOS, so
//     the EOS that closed the turn enters the KV with the next suffix
//     (spec §13.1 "EOS gap", fixed);
//   - the last sampled token is evaluated after the response is sent;
//   - an incomplete Responses turn gives incomplete_details.reason
//     "max_output_tokens", the API's value (upstream: "max_tokens");
//   - a thinking turn that ends before "</think>" (max_tokens, EOS, a stop
//     sequence) is reasoning in every response, streamed or not: chat
//     reasoning_content with empty content, an Anthropic thinking block,
//     an incomplete Responses reasoning item (upstream returns it as
//     content when not streaming);
//   - Chat Completions logprobs (logprobs, top_logprobs ≤ 20) cover every
//     generated token, reasoning and tool-call tokens included, computed
//     from the unscaled logits, and are not available when streaming
//     (400); top_logprobs requires logprobs: true, as with OpenAI.
package server
