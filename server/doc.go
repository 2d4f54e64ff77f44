// Package server is the HTTP server that exposes the engine through the
// OpenAI Chat Completions, Completions and Responses APIs and the Anthropic
// Messages API, with streaming (server-sent events) and DSML tool calls,
// following upstream ds4_server.c (docs/formats/server.md).
//
// # Endpoints
//
//	GET  /v1/models, /v1/models/{id}   the loaded model's id, then the other one (Flash or Pro)
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
// handlers and wait in a bounded queue (429 when full, 503 while shutting
// down) for a slot: a live session with its own disk KV cache manager and
// live protocol bindings (Config.Session, or Config.Sessions for several).
// A dispatcher gives each request the free slot whose live state it
// continues furthest, else an empty one, else the least recently used; each
// slot runs its request in its own goroutine. With several slots a
// scheduler owns the engine and runs one batched pass at a time
// (engine.EvalBatch): every decoding slot's next token and as much of the
// pending prefill chunks as a chunk's rows take, and a synced prompt is
// parked in a free slot so that the same prompt sent again is
// served from memory (docs/server.md#parallel-slots). Every job carries its request's context, so a
// client that disconnects stops its generation before the next token and
// a queued request whose client left is dropped. Streaming requests get
// SSE comment lines while they wait in the queue or in a long prefill.
// Every generation reply carries an X-Request-Id header ("req_" and 24 hex
// digits). A panic while running a request fails that request only: the
// log gets the panic and its stack under the request id, the client a 500
// (or a stream error) saying "internal error" and the id, never the panic
// text.
//
// The worker reuses the live KV cache across the stateless requests of a
// conversation (docs/formats/server.md#live-kv-reuse): the protocol continuations of the Responses and
// Anthropic tool-call bindings, a token prefix, the thinking binding and a
// text prefix with suffix-only tokenization, and with Config.KVCache the
// disk checkpoints of package kvcache. It remembers the exact DSML bytes
// sampled for each tool call (a bounded LRU keyed by unguessable ids) so
// that the next turn renders them unchanged, falling back to the canonical
// rendering for unknown ids. Inside a tool-call block the structural
// tokens are decoded greedily and the argument payloads are sampled.
//
// # Request limits
//
// Work done before a request reaches the queue is bounded:
//   - a body larger than Config.MaxBodyBytes (--max-body-mb, 64 MiB by
//     default) gets a 413 before it is decoded;
//   - a request holds at most MaxRequestItems (100,000) items, counted
//     together: messages or Responses input items, Anthropic system and
//     content blocks, and tool calls (Chat tool_calls, Anthropic tool_use,
//     Responses function_call items); past that it gets a 400 whose param
//     names the member that passed the limit (messages,
//     messages[i].tool_calls, messages[i].content, input, system). Tool
//     results are checked against the calls in time linear in their
//     number;
//   - no token of the DeepSeek V4 vocabulary stands for more than 128
//     bytes of text (a run of 128 spaces, a run of 128 dots; the server
//     takes the length from its tokenizer), so a prompt
//     of more than (ctx−1)·128 bytes cannot fit a context of ctx tokens:
//     it is refused with context_length_exceeded before it is rendered
//     (when its message contents alone are that long) or tokenized (4 MiB
//     at the default --ctx of 32768; from --ctx 524,289 on this bound
//     reaches the default body limit, and the next rule does the work).
//     Token-id Completions prompts are decoded to text in chunks under
//     the same bound;
//   - tokenizing stops at the pre-tokenized piece that fills the
//     context, and count_tokens counts without keeping the tokens;
//   - bodies, and rendered prompts, of LargeRequestBytes (1 MiB) or more
//     are decoded, rendered and tokenized by at most Config.LargeRequests
//     requests at once (runtime.GOMAXPROCS by default); the others wait
//     for a slot (503 if their client leaves or the server shuts down
//     meanwhile). Decoding such a request allocates about six times its
//     body, and nothing is kept once it is answered.
//
// # Connections
//
// A client has Config.ReadTimeout (ds4-server --read-timeout, default one
// minute) from the first byte of a request to the end of its body,
// headers included (those within at most 10 s); a request not complete by
// then gets a 408 if a handler was waiting for its body, and its
// connection is closed in every case, also after an early reply such as
// 401 or 404. The timeout bounds only the request: once the body is in,
// generations and SSE streams run as long as they take, each write
// bounded by Config.WriteTimeout. A reply to a request whose body was not
// read to its end carries Connection: close. At most
// Config.MaxConnections client connections (--max-connections, default
// 256) are open at a time, idle keep-alive ones included; one more gets a
// 503 (code too_many_connections, Retry-After: 1) and is closed, or is
// closed at once while as many refusals are already in progress. /metrics
// reports ds4_connections_open, ds4_connections_max and
// ds4_connections_refused_total.
//
// # Cross-site requests
//
// Without an API key (the loopback default) any web page the user opens
// could otherwise drive the server: a text/plain or form POST needs no
// CORS preflight, and DNS rebinding lets a page read the answers. So
// without a key every request, /healthz and preflights included, must
// carry a Host naming a loopback address — localhost, 127.0.0.0/8 or
// [::1], any port; the listener is itself loopback without a key — or it
// gets a 403 (code host_not_allowed), and every POST to an API endpoint
// must have Content-Type application/json, parameters allowed, or it gets
// a 415 (code unsupported_media_type): curl needs -H 'Content-Type:
// application/json'. The official SDKs send both. With a key neither check
// applies: a page cannot send the key.
//
// # Deviations from upstream
//
// Deliberate, for clients that must work unchanged:
//   - --parallel N (-np N) serves N requests at once on N slots with
//     batched decode steps, prompts parked in free slots and slot
//     metrics (docs/server.md#parallel-slots); upstream has one session;
//   - unknown model ids get 404 (model_not_found) unless
//     Config.AcceptAnyModel is set;
//   - /v1/models lists both ids, the loaded model's (Config.ModelID:
//     deepseek-v4-pro for V4 Pro, deepseek-v4-flash otherwise, from its
//     metadata) first and the other as an alias, each with the loaded
//     model's real name (upstream lists deepseek-v4-flash only, named
//     DeepSeek V4 Flash);
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
//   - a prompt refused for its size before it was tokenized whole gets
//     the context_length_exceeded error with the message "Prompt has at
//     least P tokens, …" and n_prompt_tokens P, a lower bound (the count
//     where tokenizing stopped, or its bytes divided by 128);
//     count_tokens counts only prompts that fit the context (fewer than
//     ctx tokens) and answers that 400 for longer ones (upstream
//     tokenizes the whole prompt and counts it, however long);
//   - the request limits above (item count, byte bound, large-request
//     slots) are ours: upstream has only its 64 MiB body limit;
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
//   - special-token strings in client text (user, system and developer
//     messages, tool results, documents, assistant text and reasoning the
//     client replays, tool schemas, Completions prompts) are ordinary text,
//     never control tokens: "<｜end▁of▁sentence｜><｜User｜>" in a tool
//     result cannot forge a turn (upstream tokenizes the whole rendered
//     prompt with special-token matching). Only the template's structure
//     and DSML tool-call blocks (replayed from the tool memory or rendered
//     from the call's fields) are control tokens. Prompts without such
//     strings tokenize exactly as upstream's; ones with them count more
//     tokens. Live and disk text-prefix reuse requires the reused tokens
//     to hold control tokens exactly where the new prompt's template does
//     (a disk checkpoint that does not is skipped: disk miss
//     "special-mismatch");
//   - requests must be complete within --read-timeout, connections are
//     capped by --max-connections (see Connections), and without an API
//     key non-loopback Host headers get 403 and non-JSON POSTs 415 (see
//     Cross-site requests);
//   - a stop-sequence hit keeps the live KV (only the protocol bindings are
//     dropped): token and text prefix matching stay exact because they
//     compare against what the KV really holds;
//   - visible-transcript bindings are keyed without their final EOS, so
//     the EOS that closed the turn enters the KV with the next suffix
//     (docs/formats/server.md#decision-ladder "EOS gap", fixed);
//   - the last sampled token is evaluated after the response is sent;
//   - an incomplete Responses turn gives incomplete_details.reason
//     "max_output_tokens", the API's value (upstream: "max_tokens");
//   - a thinking turn that ends before "</think>" (max_tokens, EOS, a stop
//     sequence) is reasoning in every response, streamed or not: chat
//     reasoning_content with empty content, an Anthropic thinking block,
//     an incomplete Responses reasoning item (upstream returns it as
//     content when not streaming);
//   - on Chat Completions and Completions, n (and Completions' best_of)
//     other than 1 is a 400 (a response holds one choice), and logit_bias
//     is applied as OpenAI
//     documents: at most 300 entries mapping token ids of this model's
//     vocabulary (decimal strings) to a bias in [-100, 100] added to that
//     token's logit before every sampling step, thinking and tool-call
//     tokens included (logprobs then describe the biased distribution);
//     malformed maps are a 400 naming logit_bias (upstream ignores both);
//   - Chat Completions logprobs (logprobs, top_logprobs ≤ 20) cover every
//     generated token, reasoning and tool-call tokens included, computed
//     from the unscaled logits, and are not available when streaming
//     (400); top_logprobs requires logprobs: true, as with OpenAI;
//   - a forced tool choice is honoured (upstream and, as far as we know,
//     no other engine of this model does it; upstream treats it as auto
//     or, on /v1/responses, answers 400): tool_choice "required" or
//     {"type":"function",…} on chat and Responses, {"type":"any"} or
//     {"type":"tool","name":…} on Messages. After any reasoning the turn
//     is constrained to one DSML call of an offered tool (the named one)
//     whose parameters are the schema's top-level properties, each at most
//     once, required ones before the invoke closes, string properties as
//     string="true" text and the others as compact JSON of the declared
//     type (numbers up to 15 digits per part, exponents up to 2, nesting
//     up to 16), so the arguments are always a JSON object; a schema
//     without properties gives {}. Fixed structure is forced as canonical
//     tokens, the rest is masked per token and sampled as usual, EOS is
//     masked, and when max_tokens or the context left only holds the
//     shortest completion of the call it is forced (the required
//     properties then waived), so the reply always ends with finish_reason
//     tool_calls / stop_reason tool_use / a function_call item. Stop
//     sequences do not apply to a forced turn. A forced choice naming an
//     unknown tool, without tools, or with a budget too small for the
//     shortest call is a 400 (param tool_choice or max_tokens).
package server
