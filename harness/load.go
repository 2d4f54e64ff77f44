package harness

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// LoadConfig configures Load.
type LoadConfig struct {
	// Endpoint is the server: its base URL (http://HOST:PORT), its /v1
	// URL, or the full URL of its chat completions.
	Endpoint  string
	Model     string // model id sent with every request ("": left out)
	APIKey    string // sent as a bearer token when set
	Clients   []int  // concurrency levels, run one after the other
	Requests  int    // requests each client sends in turn at each level
	MaxTokens int    // max_tokens of every request
	// Prompt returns the user message of the request numbered seq, unique
	// over the run.
	Prompt  func(seq int) string
	Timeout time.Duration // bound on one request (0: none)
	// Client sends the requests; nil means one with an idle connection
	// per client of the largest level.
	Client *http.Client
	// Done, when set, is called as each request ends, from the goroutine
	// of its client.
	Done func(LoadRequest)
}

// LoadRequest is the outcome of one request of a load run, one row of the
// load_requests table. Times are in milliseconds from the start of the
// request's level.
type LoadRequest struct {
	Clients int64   `parquet:"clients"` // the level: clients running at once
	Client  int64   `parquet:"client"`
	Request int64   `parquet:"request"` // its index in the client's sequence
	StartMS float64 `parquet:"start_ms"`
	// FirstMS is when the first chunk with content or reasoning text
	// arrived; 0 when none did.
	FirstMS float64 `parquet:"first_ms"`
	LastMS  float64 `parquet:"last_ms"` // when the last chunk with text arrived
	EndMS   float64 `parquet:"end_ms"`  // when the reply ended
	TTFTMS  float64 `parquet:"ttft_ms"` // FirstMS - StartMS; 0 when no text came
	// TPOTMS is the time per output token after the first: (LastMS -
	// FirstMS) / (CompletionTokens - 1); 0 for fewer than two tokens.
	TPOTMS float64 `parquet:"tpot_ms"`
	Chunks int64   `parquet:"chunks"` // chunks carrying content or reasoning text
	// CompletionTokens is the usage's completion_tokens, or Chunks when the
	// server sent no usage.
	CompletionTokens int64  `parquet:"completion_tokens"`
	PromptTokens     int64  `parquet:"prompt_tokens"` // from the usage; 0 without
	CachedTokens     int64  `parquet:"cached_tokens"` // usage's prompt_tokens_details.cached_tokens
	Usage            bool   `parquet:"usage"`         // the server sent a usage
	FinishReason     string `parquet:"finish_reason"`
	Status           int64  `parquet:"status"` // HTTP status; 0 when no reply came
	Error            string `parquet:"error"`  // "" for a complete reply
	// PromptSHA256 and OutputSHA256 are hex SHA-256 digests of the user
	// message and of the reply's text (reasoning, a zero byte, content),
	// so that replies to one prompt can be compared across levels: at
	// temperature 0 a deterministic server answers a prompt alike at
	// every concurrency.
	PromptSHA256 string `parquet:"prompt_sha256"`
	OutputSHA256 string `parquet:"output_sha256"`

	itl                []time.Duration // inter-token latencies, see Load
	reasoning, content []byte          // the reply's text until finish
}

// LoadLevel is the aggregate of one concurrency level, one row of the load
// table.
type LoadLevel struct {
	Clients          int64   `parquet:"clients"`
	Requests         int64   `parquet:"requests"` // sent
	Errors           int64   `parquet:"errors"`
	WallS            float64 `parquet:"wall_s"` // from the level's start to its last reply's end
	CompletionTokens int64   `parquet:"completion_tokens"`
	PromptTokens     int64   `parquet:"prompt_tokens"`
	CachedTokens     int64   `parquet:"cached_tokens"`
	// DecodeTPS is the aggregate generation rate: CompletionTokens / WallS.
	DecodeTPS float64 `parquet:"decode_tps"`
	// PrefillTPS is the aggregate rate of prompt tokens evaluated: the
	// prompt tokens less the cached ones over WallS (0 without usage).
	PrefillTPS   float64 `parquet:"prefill_tps"`
	RequestsPerS float64 `parquet:"requests_per_s"` // replies without error / WallS
	TTFTP50MS    float64 `parquet:"ttft_p50_ms"`
	TTFTP99MS    float64 `parquet:"ttft_p99_ms"`
	ITLP50MS     float64 `parquet:"itl_p50_ms"`
	ITLP99MS     float64 `parquet:"itl_p99_ms"`
	TPOTP50MS    float64 `parquet:"tpot_p50_ms"` // median of the requests' TPOTMS
}

// Load drives an OpenAI-compatible chat completions endpoint with each
// level's number of concurrent streaming clients, each sending
// cfg.Requests greedy requests in turn, and returns one aggregate per
// level and one outcome per request. Failed requests are recorded and
// counted, not fatal; Load stops early only when ctx ends.
//
// Tokens are counted from the usage the server sends (stream_options
// include_usage), or as the chunks with text when it sends none. The
// inter-token latencies of a request are the gaps between its successive
// chunks with text, each divided by the request's mean tokens per chunk
// when the usage counts more tokens than chunks (a server sending several
// tokens in a chunk).
func Load(ctx context.Context, cfg LoadConfig) ([]LoadLevel, []LoadRequest, error) {
	chat, err := ChatURL(cfg.Endpoint)
	if err != nil {
		return nil, nil, err
	}
	if cfg.Prompt == nil || cfg.Requests <= 0 || len(cfg.Clients) == 0 || slices.Min(cfg.Clients) <= 0 {
		return nil, nil, errors.New("harness: load needs a prompt, requests and clients")
	}
	if cfg.Client == nil {
		cfg.Client = loadClient(slices.Max(cfg.Clients))
	}
	var levels []LoadLevel
	var all []LoadRequest
	seq := 0
	for _, n := range cfg.Clients {
		reqs := runLevel(ctx, cfg, chat, n, seq)
		seq += n * cfg.Requests
		all = append(all, reqs...)
		if err := ctx.Err(); err != nil {
			return levels, all, err
		}
		levels = append(levels, aggregate(n, reqs))
	}
	return levels, all, nil
}

// loadClient returns an HTTP client that keeps an idle connection for
// each of n clients and asks for no compression, which would hold back
// the stream.
func loadClient(n int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = n
	tr.MaxIdleConns = max(n, tr.MaxIdleConns)
	tr.DisableCompression = true
	return &http.Client{Transport: tr}
}

// runLevel runs n clients at once, the first request numbered seq, and
// returns their requests in client order.
func runLevel(ctx context.Context, cfg LoadConfig, chat string, n, seq int) []LoadRequest {
	reqs := make([]LoadRequest, n*cfg.Requests)
	start := time.Now()
	var wg sync.WaitGroup
	for c := range n {
		wg.Go(func() {
			for r := range cfg.Requests {
				if ctx.Err() != nil {
					return
				}
				i := c*cfg.Requests + r
				q := &reqs[i]
				q.Clients, q.Client, q.Request = int64(n), int64(c), int64(r)
				send(ctx, cfg, chat, cfg.Prompt(seq+i), start, q)
				if cfg.Done != nil {
					cfg.Done(*q)
				}
			}
		})
	}
	wg.Wait()
	// Requests left unsent when ctx ended have no level.
	return slices.DeleteFunc(reqs, func(q LoadRequest) bool { return q.Clients == 0 })
}

// digest returns the hex SHA-256 digest of b.
func digest(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// DifferingOutputs counts the prompts of reqs answered without error and
// the ones among them whose replies differ from one another.
func DifferingOutputs(reqs []LoadRequest) (prompts, differing int) {
	first := map[string]string{}
	differs := map[string]bool{}
	for _, q := range reqs {
		if q.Error != "" || q.OutputSHA256 == "" {
			continue
		}
		out, seen := first[q.PromptSHA256]
		if !seen {
			first[q.PromptSHA256] = q.OutputSHA256
			continue
		}
		if out != q.OutputSHA256 && !differs[q.PromptSHA256] {
			differs[q.PromptSHA256] = true
			differing++
		}
	}
	return len(first), differing
}

// ms returns d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// chatRequest is the body of a request.
type chatRequest struct {
	Model         string        `json:"model,omitempty"`
	Messages      []chatMessage `json:"messages"`
	MaxTokens     int           `json:"max_tokens"`
	Temperature   float64       `json:"temperature"`
	Stream        bool          `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// send sends one request and records its outcome in q; times count from
// the level's start.
func send(ctx context.Context, cfg LoadConfig, chat, prompt string, level time.Time, q *LoadRequest) {
	body := chatRequest{Model: cfg.Model, Messages: []chatMessage{{"user", prompt}}, MaxTokens: cfg.MaxTokens, Stream: true}
	body.StreamOptions.IncludeUsage = true
	raw, err := json.Marshal(body)
	if err != nil {
		q.Error = err.Error()
		return
	}
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, chat, bytes.NewReader(raw))
	if err != nil {
		q.Error = err.Error()
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.APIKey)
	}
	q.PromptSHA256 = digest([]byte(prompt))
	t0 := time.Now()
	q.StartMS = ms(t0.Sub(level))
	defer func() { q.EndMS = ms(time.Since(level)) }()
	resp, err := cfg.Client.Do(req)
	if err != nil {
		q.Error = err.Error()
		return
	}
	defer resp.Body.Close()
	q.Status = int64(resp.StatusCode)
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		q.Error = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(msg)))
		return
	}
	times, err := readStream(resp.Body, q, t0)
	if err != nil {
		q.Error = err.Error()
	}
	q.finish(t0.Sub(level), times)
}

// streamChunk is what Load reads of a chat.completion.chunk.
type streamChunk struct {
	Choices []struct {
		Delta struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
			Reasoning        string `json:"reasoning"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int64 `json:"prompt_tokens"`
		CompletionTokens    int64 `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// readStream reads a server-sent event stream of chat completion chunks
// into q and returns the arrival times, from t0, of the chunks with text.
// It returns an error for an error event, a chunk that is not JSON, and a
// stream that ends before "[DONE]" without a finish reason.
func readStream(body io.Reader, q *LoadRequest, t0 time.Time) ([]time.Duration, error) {
	sr := NewSSEReader(body)
	var times []time.Duration
	for {
		data, err := sr.Next()
		at := time.Since(t0)
		if err == io.EOF {
			if q.FinishReason == "" {
				return times, errors.New("stream ended before [DONE] and a finish reason")
			}
			return times, nil
		}
		if err != nil {
			return times, fmt.Errorf("broken stream: %w", err)
		}
		if string(data) == "[DONE]" {
			return times, nil
		}
		var ch streamChunk
		if err := json.Unmarshal(data, &ch); err != nil {
			return times, fmt.Errorf("bad chunk: %w", err)
		}
		if ch.Error != nil {
			return times, fmt.Errorf("error event: %s", ch.Error.Message)
		}
		text := false
		for _, c := range ch.Choices {
			d := c.Delta
			text = text || d.Content != "" || d.ReasoningContent != "" || d.Reasoning != ""
			q.content = append(q.content, d.Content...)
			q.reasoning = append(append(q.reasoning, d.ReasoningContent...), d.Reasoning...)
			if c.FinishReason != nil && *c.FinishReason != "" {
				q.FinishReason = *c.FinishReason
			}
		}
		if text {
			times = append(times, at)
		}
		if u := ch.Usage; u != nil {
			q.Usage = true
			q.PromptTokens, q.CompletionTokens = u.PromptTokens, u.CompletionTokens
			if u.PromptTokensDetails != nil {
				q.CachedTokens = u.PromptTokensDetails.CachedTokens
			}
		}
	}
}

// finish fills q's times, token count and inter-token latencies from the
// arrival times of its chunks with text, from its start at offset from
// the level's start.
func (q *LoadRequest) finish(offset time.Duration, times []time.Duration) {
	q.OutputSHA256 = digest(append(append(q.reasoning, 0), q.content...))
	q.reasoning, q.content = nil, nil
	q.Chunks = int64(len(times))
	if !q.Usage {
		q.CompletionTokens = q.Chunks
	}
	if len(times) == 0 {
		return
	}
	first, last := times[0], times[len(times)-1]
	q.TTFTMS = ms(first)
	q.FirstMS, q.LastMS = ms(offset+first), ms(offset+last)
	if q.CompletionTokens > 1 {
		q.TPOTMS = ms(last-first) / float64(q.CompletionTokens-1)
	}
	perChunk := 1.0
	if q.CompletionTokens > q.Chunks {
		perChunk = float64(q.CompletionTokens) / float64(q.Chunks)
	}
	for i := 1; i < len(times); i++ {
		q.itl = append(q.itl, time.Duration(float64(times[i]-times[i-1])/perChunk))
	}
}

// Summary describes the request in one line: its level, client and
// index, then its tokens and latencies or its error.
func (q LoadRequest) Summary() string {
	s := fmt.Sprintf("clients %d, client %d, request %d: %d tokens, ttft %.1f ms, tpot %.1f ms",
		q.Clients, q.Client, q.Request, q.CompletionTokens, q.TTFTMS, q.TPOTMS)
	if q.Error != "" {
		s += ", error: " + q.Error
	}
	return s
}

// aggregate sums up the requests of the level of n clients.
func aggregate(n int, reqs []LoadRequest) LoadLevel {
	l := LoadLevel{Clients: int64(n), Requests: int64(len(reqs))}
	var ttft, itl []time.Duration
	var tpot []float64
	end := 0.0
	for _, q := range reqs {
		end = max(end, q.EndMS)
		l.CompletionTokens += q.CompletionTokens
		l.PromptTokens += q.PromptTokens
		l.CachedTokens += q.CachedTokens
		if q.Error != "" {
			l.Errors++
		}
		if q.Chunks > 0 {
			ttft = append(ttft, time.Duration(q.TTFTMS*float64(time.Millisecond)))
		}
		if q.TPOTMS > 0 {
			tpot = append(tpot, q.TPOTMS)
		}
		itl = append(itl, q.itl...)
	}
	l.WallS = end / 1000
	if l.WallS > 0 {
		l.DecodeTPS = float64(l.CompletionTokens) / l.WallS
		l.PrefillTPS = float64(l.PromptTokens-l.CachedTokens) / l.WallS
		l.RequestsPerS = float64(l.Requests-l.Errors) / l.WallS
	}
	l.TTFTP50MS, l.TTFTP99MS = ms(percentile(ttft, 0.5)), ms(percentile(ttft, 0.99))
	l.ITLP50MS, l.ITLP99MS = ms(percentile(itl, 0.5)), ms(percentile(itl, 0.99))
	l.TPOTP50MS, _, _ = medianRange(tpot)
	return l
}

// ChatURL returns the chat completions URL of an endpoint given as its
// base URL, its /v1 URL or that URL itself.
func ChatURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("harness: endpoint %q: want http://HOST[:PORT][/v1]", endpoint)
	}
	p := strings.TrimSuffix(u.Path, "/")
	switch {
	case strings.HasSuffix(p, "/chat/completions"):
	case strings.HasSuffix(p, "/v1"):
		p += "/chat/completions"
	default:
		p += "/v1/chat/completions"
	}
	u.Path, u.RawPath = p, ""
	return u.String(), nil
}

// EndpointModel returns the id of the first model an endpoint lists at
// /v1/models.
func EndpointModel(ctx context.Context, client *http.Client, endpoint, apiKey string) (string, error) {
	chat, err := ChatURL(endpoint)
	if err != nil {
		return "", err
	}
	models := strings.TrimSuffix(chat, "/chat/completions") + "/models"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, models, nil)
	if err != nil {
		return "", fmt.Errorf("harness: %w", err)
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("harness: list models: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("harness: GET %s: HTTP %d", models, resp.StatusCode)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&list); err != nil {
		return "", fmt.Errorf("harness: GET %s: %w", models, err)
	}
	if len(list.Data) == 0 || list.Data[0].ID == "" {
		return "", fmt.Errorf("harness: GET %s: no model listed", models)
	}
	return list.Data[0].ID, nil
}
