package server

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ds4-go/ds4/engine/expertcache"
)

// metrics are the server's counters, exported in the Prometheus text
// format by /metrics.
type metrics struct {
	queued    atomic.Int64 // requests waiting for the worker
	busy      atomic.Bool  // the worker is running a request
	rejected  atomic.Int64 // refused because the queue was full
	cancelled atomic.Int64 // given up because the client left

	conns        atomic.Int64 // open client connections
	connsRefused atomic.Int64 // connections refused past Config.MaxConnections

	promptTokens    atomic.Int64 // effective prompt tokens
	prefillTokens   atomic.Int64 // prompt tokens evaluated
	prefillNanos    atomic.Int64
	completionToks  atomic.Int64 // generated tokens
	decodeNanos     atomic.Int64
	cacheHits       atomic.Int64 // requests that reused live KV
	cacheMisses     atomic.Int64
	diskHits        atomic.Int64 // requests that loaded a disk checkpoint
	cachedTokens    atomic.Int64 // prompt tokens reused
	generationCount atomic.Int64

	mu       sync.Mutex
	requests map[requestKey]int64
	finishes map[string]int64
}

type requestKey struct {
	path   string
	status int
}

// request counts a finished HTTP request.
func (m *metrics) request(path string, a api, generate bool, status int) {
	if status == 0 {
		status = http.StatusOK
	}
	if !generate {
		switch {
		case path == "/healthz", path == "/metrics", path == "/v1/models", path == "/v1/messages/count_tokens", strings.HasPrefix(path, "/v1/models/"):
			if strings.HasPrefix(path, "/v1/models/") {
				path = "/v1/models/{id}"
			}
		default:
			path = "other"
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.requests == nil {
		m.requests = map[requestKey]int64{}
	}
	m.requests[requestKey{path, status}]++
}

// prefilled records a prompt sync.
func (m *metrics) prefilled(evaluated int, d time.Duration, reused int, source string) {
	if source == "disk-text" {
		m.diskHits.Add(1)
	}
	m.promptTokens.Add(int64(evaluated + reused))
	m.prefillTokens.Add(int64(evaluated))
	m.prefillNanos.Add(int64(d))
	m.cachedTokens.Add(int64(reused))
	if reused > 0 {
		m.cacheHits.Add(1)
	} else {
		m.cacheMisses.Add(1)
	}
}

// generated records a finished generation.
func (m *metrics) generated(tokens int, d time.Duration, finish string) {
	m.completionToks.Add(int64(tokens))
	m.decodeNanos.Add(int64(d))
	m.generationCount.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.finishes == nil {
		m.finishes = map[string]int64{}
	}
	m.finishes[finish]++
}

func rate(tokens, nanos int64) float64 {
	if nanos <= 0 {
		return 0
	}
	return float64(tokens) / (float64(nanos) / 1e9)
}

func (s *Server) serveMetrics(w http.ResponseWriter) {
	m := &s.stats
	var b strings.Builder
	metric := func(name, typ, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	metric("ds4_requests_total", "counter", "HTTP requests by path and status.")
	m.mu.Lock()
	keys := make([]requestKey, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].path != keys[j].path {
			return keys[i].path < keys[j].path
		}
		return keys[i].status < keys[j].status
	})
	for _, k := range keys {
		fmt.Fprintf(&b, "ds4_requests_total{path=%q,status=\"%d\"} %d\n", k.path, k.status, m.requests[k])
	}
	metric("ds4_generations_total", "counter", "Finished generations by finish reason.")
	var fins []string
	for f := range m.finishes {
		fins = append(fins, f)
	}
	sort.Strings(fins)
	for _, f := range fins {
		fmt.Fprintf(&b, "ds4_generations_total{finish=%q} %d\n", f, m.finishes[f])
	}
	m.mu.Unlock()
	busy := 0
	if m.busy.Load() {
		busy = 1
	}
	counters := []struct {
		name, typ, help string
		v               any
	}{
		{"ds4_tokens_in_total", "counter", "Prompt tokens of the requests run (reused and evaluated).", m.promptTokens.Load()},
		{"ds4_tokens_out_total", "counter", "Generated tokens.", m.completionToks.Load()},
		{"ds4_prefill_tokens_total", "counter", "Prompt tokens evaluated.", m.prefillTokens.Load()},
		{"ds4_prefill_seconds_total", "counter", "Time spent bringing the session to prompts.", float64(m.prefillNanos.Load()) / 1e9},
		{"ds4_decode_seconds_total", "counter", "Time spent in decode loops.", float64(m.decodeNanos.Load()) / 1e9},
		{"ds4_prefill_tokens_per_second", "gauge", "Average prefill speed.", rate(m.prefillTokens.Load(), m.prefillNanos.Load())},
		{"ds4_decode_tokens_per_second", "gauge", "Average decode speed.", rate(m.completionToks.Load(), m.decodeNanos.Load())},
		{"ds4_kv_cache_hits_total", "counter", "Requests that reused the live KV cache.", m.cacheHits.Load()},
		{"ds4_kv_cache_misses_total", "counter", "Requests prefilled from scratch.", m.cacheMisses.Load()},
		{"ds4_kv_cache_disk_hits_total", "counter", "Requests that loaded a disk KV checkpoint.", m.diskHits.Load()},
		{"ds4_kv_cache_reused_tokens_total", "counter", "Prompt tokens reused from the live KV cache.", m.cachedTokens.Load()},
		{"ds4_queue_depth", "gauge", "Requests waiting for the worker.", m.queued.Load()},
		{"ds4_queue_capacity", "gauge", "Bound of the request queue.", int64(cap(s.queue))},
		{"ds4_worker_busy", "gauge", "1 while the worker runs a request.", busy},
		{"ds4_requests_rejected_total", "counter", "Requests refused because the queue was full.", m.rejected.Load()},
		{"ds4_requests_cancelled_total", "counter", "Requests given up because the client left.", m.cancelled.Load()},
		{"ds4_connections_open", "gauge", "Open client connections.", m.conns.Load()},
		{"ds4_connections_max", "gauge", "Bound of the open client connections.", int64(s.cfg.MaxConnections)},
		{"ds4_connections_refused_total", "counter", "Connections refused because the bound was reached.", m.connsRefused.Load()},
		{"ds4_uptime_seconds", "gauge", "Seconds since the server started.", time.Since(s.start).Seconds()},
	}
	ids, blocks, bytes := s.tools.stats()
	for _, c := range counters {
		metric(c.name, c.typ, c.help)
		fmt.Fprintf(&b, "%s %v\n", c.name, c.v)
	}
	s.writeSlotMetrics(&b, metric)
	if s.cfg.Experts != nil {
		if st, ok := s.cfg.Experts(); ok {
			writeExpertMetrics(&b, st, m.prefillTokens.Load()+m.completionToks.Load())
		}
	}
	metric("ds4_tool_memory_ids", "gauge", "Tool-call ids in the exact replay memory.")
	fmt.Fprintf(&b, "ds4_tool_memory_ids %d\n", ids)
	metric("ds4_tool_memory_blocks", "gauge", "Distinct DSML blocks in the exact replay memory.")
	fmt.Fprintf(&b, "ds4_tool_memory_blocks %d\n", blocks)
	metric("ds4_tool_memory_bytes", "gauge", "Accounted bytes of the exact replay memory.")
	fmt.Fprintf(&b, "ds4_tool_memory_bytes %d\n", bytes)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write([]byte(b.String()))
}

// writeExpertMetrics writes the SSD streaming expert cache's counters to
// b; tokens is the tokens evaluated so far (prefilled and generated), the
// denominator of the bytes read per token.
func writeExpertMetrics(b *strings.Builder, st expertcache.Stats, tokens int64) {
	hit, perToken := st.HitRate(), 0.0
	if tokens > 0 {
		perToken = float64(st.BytesRead) / float64(tokens)
	}
	direct := 0
	if st.Direct {
		direct = 1
	}
	for _, c := range []struct {
		name, typ, help string
		v               any
	}{
		{"ds4_ssd_expert_hits_total", "counter", "Routed-expert requests served from the SSD streaming cache.", st.Hits},
		{"ds4_ssd_expert_misses_total", "counter", "Routed-expert requests read from the model file.", st.Misses},
		{"ds4_ssd_expert_hit_ratio", "gauge", "Share of routed-expert requests served from the cache.", hit},
		{"ds4_ssd_read_bytes_total", "counter", "Bytes read from the model file into the expert cache.", st.BytesRead},
		{"ds4_ssd_read_bytes_per_token", "gauge", "Bytes read into the expert cache per token evaluated (prefilled or generated).", perToken},
		{"ds4_ssd_cache_slots", "gauge", "Experts the cache holds.", st.Slots},
		{"ds4_ssd_cache_slot_bytes", "gauge", "Bytes of one cache slot (an expert's gate, up and down slices).", st.SlotBytes},
		{"ds4_ssd_direct_io", "gauge", "1 when misses are read with O_DIRECT, 0 for buffered reads.", direct},
	} {
		fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n%s %v\n", c.name, c.help, c.name, c.typ, c.name, c.v)
	}
	fmt.Fprintf(b, "# HELP ds4_ssd_read_seconds Latency of one expert's read on a miss.\n# TYPE ds4_ssd_read_seconds summary\n")
	fmt.Fprintf(b, "ds4_ssd_read_seconds{quantile=\"0.5\"} %v\n", st.ReadP50.Seconds())
	fmt.Fprintf(b, "ds4_ssd_read_seconds{quantile=\"0.99\"} %v\n", st.ReadP99.Seconds())
}

// writeSlotMetrics writes the slots' states and live tokens and the
// scheduler's batch sizes to b.
func (s *Server) writeSlotMetrics(b *strings.Builder, metric func(name, typ, help string)) {
	metric("ds4_slots", "gauge", "Slots: live sessions that run one request each at a time (--parallel).")
	fmt.Fprintf(b, "ds4_slots %d\n", len(s.slots))
	metric("ds4_slot_state", "gauge", "1 for each slot's state: idle, prefill (bringing its session to a prompt) or decode.")
	for _, sl := range s.slots {
		st := sl.state.Load()
		for i, name := range slotStateNames {
			v := 0
			if int32(i) == st {
				v = 1
			}
			fmt.Fprintf(b, "ds4_slot_state{slot=\"%d\",state=%q} %d\n", sl.id, name, v)
		}
	}
	metric("ds4_slot_live_tokens", "gauge", "Tokens each slot's live session holds.")
	for _, sl := range s.slots {
		fmt.Fprintf(b, "ds4_slot_live_tokens{slot=\"%d\"} %d\n", sl.id, sl.tokens.Load())
	}
	var last int64
	var chunks int64
	steps := make([]int64, len(s.slots)+1)
	if sc := s.sched; sc != nil {
		last, chunks = sc.lastBatch.Load(), sc.chunks.Load()
		for i := range sc.steps {
			steps[i] = sc.steps[i].Load()
		}
	}
	metric("ds4_batch_size", "gauge", "Decoding sequences in the last batched pass that had any.")
	fmt.Fprintf(b, "ds4_batch_size %d\n", last)
	metric("ds4_batch_steps_total", "counter", "Batched passes by the number of decoding sequences in them (with more than one slot).")
	for n := 1; n < len(steps); n++ {
		fmt.Fprintf(b, "ds4_batch_steps_total{size=\"%d\"} %d\n", n, steps[n])
	}
	metric("ds4_prefill_chunks_total", "counter", "Prefill chunks, or the parts of one a pass took, that the scheduler evaluated (with more than one slot).")
	fmt.Fprintf(b, "ds4_prefill_chunks_total %d\n", chunks)
}
