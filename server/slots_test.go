package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"

	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/kvcache"
	"github.com/ds4-go/ds4/engine/tokenizer"
)

// The tests below drive servers with several slots (Config.Sessions,
// --parallel) over loopback HTTP: streams that join and leave the running
// batch, cancellation mid-prefill, slot choice by prefix, eviction to the
// disk KV cache, parked prompts, the queue, and greedy outputs equal to
// each stream's solo run.

// greedyParams is a legacy completion of prompt with greedy decoding that
// never ends early: EOS is banned, so the tiny model writes exactly
// maxTokens tokens.
func greedyParams(t testing.TB, prompt string, maxTokens int) openai.CompletionNewParams {
	eos := testTokenizer(t).Special(tokenizer.EOS)
	return openai.CompletionNewParams{
		Model:       "deepseek-v4-flash",
		Prompt:      openai.CompletionNewParamsPromptUnion{OfString: param.NewOpt(prompt)},
		MaxTokens:   openai.Int(int64(maxTokens)),
		Temperature: openai.Float(0),
		LogitBias:   map[string]int64{strconv.Itoa(eos): -100},
	}
}

// noThinking turns thinking off, whose sampling settings would override
// the greedy ones.
var noThinking = option.WithJSONSet("think", false)

// complete runs a greedy completion and returns its text and usage.
func complete(t testing.TB, ts *testServer, prompt string, maxTokens int) (string, openai.CompletionUsage) {
	t.Helper()
	c := openaiClient(ts)
	resp, err := c.Completions.New(context.Background(), greedyParams(t, prompt, maxTokens), noThinking)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Choices[0].Text, resp.Usage
}

// soloTexts returns the greedy completions of prompts run one at a time on
// a server with one slot.
func soloTexts(t *testing.T, ctx int, prompts []string, tokens []int) []string {
	t.Helper()
	ts := tinySlots(t, ctx, 1, nil)
	out := make([]string, len(prompts))
	for i, p := range prompts {
		out[i], _ = complete(t, ts, p, tokens[i])
	}
	return out
}

// TestSlotsJoinLeave streams a long completion and sends a short one
// while it runs: the short one joins the running batch (decode steps of
// two sequences), leaves it when done, and both texts equal their solo
// runs.
func TestSlotsJoinLeave(t *testing.T) {
	prompts := []string{"The long story of a river:", "Short"}
	tokens := []int{300, 12}
	solo := soloTexts(t, 2048, prompts, tokens)

	// The tiny model's steps are as short as a slot's work between them
	// (slower still under -race), in which the default grace can lapse
	// at every step; a long one makes the batch independent of timing.
	ts := tinySlots(t, 2048, 2, func(c *Config) { c.BatchGrace = 200 * time.Millisecond })
	c := openaiClient(ts)
	stream := c.Completions.NewStreaming(context.Background(), greedyParams(t, prompts[0], tokens[0]), noThinking)
	var long strings.Builder
	joined := false
	for stream.Next() {
		long.WriteString(stream.Current().Choices[0].Text)
		if !joined && long.Len() > 0 {
			joined = true
			short, _ := complete(t, ts, prompts[1], tokens[1])
			if short != solo[1] {
				t.Errorf("short stream %q, solo %q", short, solo[1])
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if long.String() != solo[0] {
		t.Errorf("long stream differs from its solo run:\n%q\n%q", long.String(), solo[0])
	}
	waitIdle(t, ts.Server)
	sc := ts.sched
	t.Logf("decode steps by size: 1: %d, 2: %d; prefill chunks %d", sc.steps[1].Load(), sc.steps[2].Load(), sc.chunks.Load())
	if sc.steps[2].Load() == 0 {
		t.Error("the short stream never joined the long one's decode steps")
	}
	if sc.lastBatch.Load() != 1 {
		t.Errorf("last decode step of %d sequences; the short stream should have left", sc.lastBatch.Load())
	}
}

// TestSlotsGreedyMatchesSolo runs four streams of different lengths at
// once on four slots, at different positions, and checks each text
// against the stream's solo run.
func TestSlotsGreedyMatchesSolo(t *testing.T) {
	prompts := []string{"One", "Two words here", "A somewhat longer prompt for the third stream,", "Four: " + strings.Repeat("tick tock ", 30)}
	tokens := []int{40, 25, 50, 33}
	solo := soloTexts(t, 1024, prompts, tokens)
	ts := tinySlots(t, 1024, 4, func(c *Config) { c.BatchGrace = 200 * time.Millisecond }) // see TestSlotsJoinLeave
	got := make([]string, len(prompts))
	var wg sync.WaitGroup
	for i := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = complete(t, ts, prompts[i], tokens[i])
		}()
	}
	wg.Wait()
	for i := range prompts {
		if got[i] != solo[i] {
			t.Errorf("stream %d differs from its solo run:\n%q\n%q", i, got[i], solo[i])
		}
	}
	var batched int64
	for n := 2; n < len(ts.sched.steps); n++ {
		batched += ts.sched.steps[n].Load()
	}
	if batched == 0 {
		t.Error("no decode step batched two or more streams")
	}
}

// scriptSlots starts a server whose slots are script sessions.
func scriptSlots(t *testing.T, mod func(*Config), sessions ...*scriptSession) *testServer {
	t.Helper()
	cfg := Config{Tokenizer: sessions[0].tok, PrefillChunk: 1 << 20}
	for _, s := range sessions {
		cfg.Sessions = append(cfg.Sessions, s)
	}
	if mod != nil {
		mod(&cfg)
	}
	return startServer(t, cfg)
}

// prefills returns the number of prefill calls s has seen.
func (s *scriptSession) prefills() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.prompts)
}

// TestSlotsCancelMidPrefill sends a long prompt, prefilled in slow chunks
// on one slot while another streams, and disconnects during its prefill:
// the prefill stops within a chunk, the slot is freed for the next
// request and the running stream finishes unaffected.
func TestSlotsCancelMidPrefill(t *testing.T) {
	// Every prefill call takes the next script: one per chunk.
	a := newScriptSession(t, 8192, slices.Repeat([]string{"tick tock"}, 50)...)
	a.loop, a.delay = true, 5*time.Millisecond
	b := newScriptSession(t, 8192)
	b.slowP = 40 * time.Millisecond
	ts := scriptSlots(t, func(c *Config) { c.PrefillChunk = 4 }, a, b)

	streamed := make(chan string)
	go func() {
		_, _, body := post(t, ts.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"stream"}],"max_tokens":120,"think":false}`)
		streamed <- body
	}()
	for a.decodes.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	left := make(chan error)
	go func() {
		c := openaiClient(ts)
		_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "deepseek-v4-flash",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(strings.Repeat("a long prompt ", 40))},
		})
		left <- err
	}()
	for b.prefills() < 2 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-left; err == nil {
		t.Fatal("the cancelled request succeeded")
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.state(ts) != slotIdle || ts.busyCount() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the cancelled request's slot was not freed")
		}
		time.Sleep(time.Millisecond)
	}
	n := b.prefills()
	if n > 4 {
		t.Errorf("%d prefill chunks ran; the prefill should stop within a chunk of the disconnect", n)
	}
	// The freed slot serves the next request while the stream runs on.
	status, _, body := post(t, ts.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"next"}],"think":false}`)
	if status != 200 || !strings.HasSuffix(b.prompt(-1), "next<｜Assistant｜></think>") {
		t.Errorf("next request: %d %s, on the freed slot %q", status, body, b.prompt(-1))
	}
	body = <-streamed
	if !strings.Contains(body, `"finish_reason":"length"`) || !strings.Contains(body, `"completion_tokens":120`) {
		t.Errorf("the running stream was disturbed: %s", body)
	}
	if ts.stats.cancelled.Load() != 1 {
		t.Errorf("%d cancellations counted", ts.stats.cancelled.Load())
	}
}

// state returns the state of the slot whose session is s.
func (s *scriptSession) state(ts *testServer) int32 {
	for _, sl := range ts.slots {
		if sl.sess == Session(s) {
			return sl.state.Load()
		}
	}
	return -1
}

// busyCount returns the number of busy slots.
func (s *Server) busyCount() int {
	s.smu.Lock()
	defer s.smu.Unlock()
	return s.busySlots
}

// TestSlotsQueueFull fills both slots and the queue: the next request
// gets 429, and the queued one runs once a slot is free.
func TestSlotsQueueFull(t *testing.T) {
	var sessions []*scriptSession
	for range 2 {
		s := newScriptSession(t, 8192, "x")
		s.loop, s.delay = true, 2*time.Millisecond
		sessions = append(sessions, s)
	}
	ts := scriptSlots(t, func(c *Config) { c.QueueSize = 1 }, sessions...)
	var wg sync.WaitGroup
	statuses := make([]int, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i], _, _ = post(t, ts.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"busy `+strconv.Itoa(i)+`"}],"max_tokens":200,"think":false}`)
		}()
		deadline := time.Now().Add(5 * time.Second)
		for ts.busyCount()+int(ts.stats.queued.Load()) < i+1 {
			if time.Now().After(deadline) {
				t.Fatalf("request %d neither running nor queued", i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	status, _, body := post(t, ts.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"one too many"}],"think":false}`)
	if status != 429 || !strings.Contains(body, "queue_full") {
		t.Errorf("with both slots busy and the queue full: %d %s", status, body)
	}
	wg.Wait()
	for i, st := range statuses {
		if st != 200 {
			t.Errorf("request %d: status %d", i, st)
		}
	}
}

// chatCached sends a greedy chat request and returns the reply and the
// usage's prompt and cached tokens.
func chatCached(t *testing.T, ts *testServer, msgs []openai.ChatCompletionMessageParamUnion) (reply string, prompt, cached int64) {
	t.Helper()
	c := openaiClient(ts)
	resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:       "deepseek-v4-flash",
		Messages:    msgs,
		MaxTokens:   openai.Int(4),
		Temperature: openai.Float(0),
	}, noThinking)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Choices[0].Message.Content, resp.Usage.PromptTokens, resp.Usage.PromptTokensDetails.CachedTokens
}

// TestSlotsReuseByPrefix runs two conversations alternately on two
// slots: each follow-up goes to the slot that holds its conversation and
// reuses it, where one slot holds only the last one.
func TestSlotsReuseByPrefix(t *testing.T) {
	for _, tc := range []struct {
		slots     int
		wantReuse []bool // by conversation
	}{{1, []bool{false, true}}, {2, []bool{true, true}}} {
		t.Run(fmt.Sprintf("slots=%d", tc.slots), func(t *testing.T) {
			ts := tinySlots(t, 2048, tc.slots, nil)
			convs := [][]openai.ChatCompletionMessageParamUnion{
				{openai.SystemMessage("You are an expert on the history of Rome."), openai.UserMessage("Tell me more.")},
				{openai.SystemMessage("You are an expert on the geology of Iceland."), openai.UserMessage("Tell me more.")},
			}
			first := make([]int64, len(convs))
			for i := range convs {
				reply, prompt, _ := chatCached(t, ts, convs[i])
				first[i] = prompt
				convs[i] = append(convs[i], openai.AssistantMessage(reply), openai.UserMessage("And then?"))
			}
			// The second turns come in the other order, so the least
			// recently used slot is never the right one.
			for i := len(convs) - 1; i >= 0; i-- {
				_, prompt, cached := chatCached(t, ts, convs[i])
				if reused := cached >= first[i]; reused != tc.wantReuse[i] {
					t.Errorf("conversation %d: %d of %d prompt tokens cached (first turn %d)", i, cached, prompt, first[i])
				}
			}
		})
	}
}

// TestSlotsRepeatedRequestCached sends the same request twice: with a
// free slot the second finds the prompt parked there and reports all of
// it cached; with one slot the live session has moved past the prompt.
func TestSlotsRepeatedRequestCached(t *testing.T) {
	for _, tc := range []struct {
		slots int
		want  func(prompt int64) int64
	}{
		{1, func(int64) int64 { return 0 }},
		{2, func(p int64) int64 { return p }},
		{4, func(p int64) int64 { return p }},
	} {
		t.Run(fmt.Sprintf("slots=%d", tc.slots), func(t *testing.T) {
			ts := tinySlots(t, 2048, tc.slots, nil)
			msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("What is a slot?")}
			reply1, _, _ := chatCached(t, ts, msgs)
			reply2, prompt, cached := chatCached(t, ts, msgs)
			if cached != tc.want(prompt) {
				t.Errorf("repeated request: %d of %d prompt tokens cached, want %d", cached, prompt, tc.want(prompt))
			}
			if reply2 != reply1 {
				t.Errorf("greedy replies differ: %q, %q", reply1, reply2)
			}
		})
	}
}

// TestSlotsEvictToDisk runs three conversations on two slots with a disk
// KV cache that makes no cold or continued saves: the third replaces the
// least recently used slot, the first conversation's, which is saved to
// disk first, and the first conversation's next turn is loaded from that
// checkpoint, reply included.
func TestSlotsEvictToDisk(t *testing.T) {
	tok := testTokenizer(t)
	policy := kvcache.Policy{MinTokens: 8}
	store, err := kvcache.Open(kvcache.Options{Dir: t.TempDir(), QuantBits: 2, Policy: policy, Detokenize: tok.Decode, Budget: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	sessions := tinySessions(t, 1024, 2)
	var mgrs []*kvcache.Manager
	var mu sync.Mutex
	ts := startServer(t, Config{
		Sessions:  []Session{sessions[0], sessions[1]},
		Tokenizer: tok,
		KVStore:   store,
		KVCaches: func(slot int, sess Session, ev engine.Evaluator) KVCache {
			m := kvcache.NewManager(sessions[slot], kvcache.ManagerOptions{Cache: store, Tokenizer: tok, Policy: policy, Chunk: 64, Evaluator: ev})
			mu.Lock()
			mgrs = append(mgrs, m)
			mu.Unlock()
			return m
		},
	})
	var convs [][]openai.ChatCompletionMessageParamUnion
	for _, topic := range []string{"the history of Rome", "the geology of Iceland", "the birds of Patagonia"} {
		msgs := []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage(strings.Repeat("You are an expert on "+topic+". ", 4)), openai.UserMessage("Tell me more.")}
		reply, _, cached := chatCached(t, ts, msgs)
		if cached != 0 {
			t.Errorf("%s reused %d tokens", topic, cached)
		}
		convs = append(convs, append(msgs, openai.AssistantMessage(reply), openai.UserMessage("And then?")))
	}
	evicted := int64(0)
	for _, m := range mgrs {
		evicted += m.Stats().Saves["evict"]
	}
	// The first conversation's prompt was also parked in the second slot,
	// which the second conversation replaced (saving the parked prompt).
	if evicted != 2 {
		t.Errorf("%d evict saves, want 2", evicted)
	}
	_, prompt, cached := chatCached(t, ts, convs[0])
	if cached < prompt-8 {
		t.Errorf("the evicted conversation's next turn reused %d of %d prompt tokens", cached, prompt)
	}
	if ts.stats.diskHits.Load() != 1 {
		t.Errorf("%d disk hits", ts.stats.diskHits.Load())
	}
}

// TestSlotsMetrics checks the slots' and the scheduler's lines in
// /metrics.
func TestSlotsMetrics(t *testing.T) {
	ts := tinySlots(t, 1024, 2, nil)
	complete(t, ts, "Count:", 5)
	waitIdle(t, ts.Server)
	_, body := get(t, ts.url+"/metrics")
	for _, want := range []string{
		"ds4_slots 2\n",
		`ds4_slot_state{slot="0",state="idle"} 1` + "\n",
		`ds4_slot_state{slot="1",state="decode"} 0` + "\n",
		`ds4_batch_size 1` + "\n",
		`ds4_batch_steps_total{size="2"} 0` + "\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	for _, re := range []string{`ds4_slot_live_tokens\{slot="0"\} [1-9]`, `ds4_batch_steps_total\{size="1"\} [1-9]`, `ds4_prefill_chunks_total [1-9]`} {
		if !regexp.MustCompile(re).MatchString(body) {
			t.Errorf("/metrics lacks %s", re)
		}
	}
}

// TestSDKParallelSlots runs the OpenAI and Anthropic SDK tests again
// against servers with four slots.
func TestSDKParallelSlots(t *testing.T) {
	if *testSlots != 1 {
		t.Skip("already running with several slots")
	}
	if testing.Short() {
		t.Skip("runs the SDK tests again")
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^(TestOpenAI|TestAnthropic)", "-test.v", "-slots", "4", "-test.count", "1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("SDK tests with -slots 4: %v\n%s", err, out)
	}
	passed := strings.Count(string(out), "--- PASS: Test")
	t.Logf("%d SDK tests passed with 4 slots", passed)
	if passed < 10 {
		t.Errorf("only %d SDK tests passed with 4 slots:\n%s", passed, out)
	}
}

// TestSlotsToolContinuation answers an Anthropic tool call after another
// conversation ran in between: with two slots the tool result continues
// the slot that made the call; with one the live turn is gone (400).
func TestSlotsToolContinuation(t *testing.T) {
	for _, tc := range []struct {
		slots  int
		status int
	}{{1, 400}, {2, 200}} {
		t.Run(fmt.Sprintf("slots=%d", tc.slots), func(t *testing.T) {
			a := newScriptSession(t, 8192, "I should call the tool.</think>"+weatherScript)
			sessions := []*scriptSession{a}
			if tc.slots == 2 {
				b := newScriptSession(t, 8192, "</think>Other.")
				sessions = append(sessions, b)
				a.push("Sunny.</think>It is sunny.")
			} else {
				a.push("</think>Other.", "Sunny.</think>It is sunny.")
			}
			ts := scriptSlots(t, nil, sessions...)
			c := anthropicClient(ts)
			ctx := context.Background()
			params := anthropic.MessageNewParams{
				Model:     "deepseek-v4-flash",
				MaxTokens: 200,
				Messages:  []anthropic.MessageParam{userText("Weather in Rome?")},
				Tools:     []anthropic.ToolUnionParam{weatherToolParam()},
			}
			msg, err := c.Messages.New(ctx, params)
			if err != nil || msg.StopReason != anthropic.StopReasonToolUse {
				t.Fatalf("tool call: %v %s", err, msg.RawJSON())
			}
			other, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: "deepseek-v4-flash", MaxTokens: 50,
				Messages: []anthropic.MessageParam{userText("Something else")}})
			if err != nil || len(other.Content) == 0 || other.Content[len(other.Content)-1].Text != "Other." {
				t.Fatalf("other conversation: %v %s", err, other.RawJSON())
			}
			use := msg.Content[1]
			params.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "21 C", false))}
			msg2, err := c.Messages.New(ctx, params)
			var apiErr *anthropic.Error
			switch {
			case tc.status == 200 && err != nil:
				t.Fatalf("tool result: %v", err)
			case tc.status == 200:
				if len(msg2.Content) != 2 || msg2.Content[1].Text != "It is sunny." || msg2.Usage.CacheReadInputTokens == 0 {
					t.Errorf("tool result answered %s", msg2.RawJSON())
				}
			case !errors.As(err, &apiErr) || apiErr.StatusCode != tc.status:
				t.Errorf("tool result: %v, want status %d", err, tc.status)
			}
		})
	}
}

// eventLog records evaluations in the order the scheduler ran them.
type eventLog struct {
	mu sync.Mutex
	b  []byte
}

func (l *eventLog) add(c byte) {
	l.mu.Lock()
	l.b = append(l.b, c)
	l.mu.Unlock()
}

func (l *eventLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}

// recordingSession is a script session that logs its prefill calls and
// decodes as the given bytes; its logits take slowLogits to read (the
// slot's own work between two tokens).
type recordingSession struct {
	*scriptSession
	log             *eventLog
	prefill, decode byte
	slowLogits      time.Duration
}

func (r recordingSession) Logits() []float32 {
	time.Sleep(r.slowLogits)
	return r.scriptSession.Logits()
}

func (r recordingSession) Prefill(tokens []int) error {
	r.log.add(r.prefill)
	return r.scriptSession.Prefill(tokens)
}

func (r recordingSession) Decode(token int) error {
	r.log.add(r.decode)
	return r.scriptSession.Decode(token)
}

// TestSlotsPrefillInterleaves prefills a long prompt in chunks on one
// slot while another streams: the stream gets a decode step between every
// two chunks, so it never stalls for more than one, even though its next
// token comes later than the next chunk (the stream's slot works 3 ms
// between tokens, the grace period is longer).
func TestSlotsPrefillInterleaves(t *testing.T) {
	a := newScriptSession(t, 8192, slices.Repeat([]string{"tick"}, 20)...)
	a.loop = true // streams until cancelled
	b := newScriptSession(t, 8192, slices.Repeat([]string{"done"}, 100)...)
	b.slowP = 2 * time.Millisecond
	var events eventLog
	ra, rb := recordingSession{a, &events, 'A', 'd', 3 * time.Millisecond}, recordingSession{b, &events, 'p', 'D', 0}
	ts := startServer(t, Config{Tokenizer: a.tok, PrefillChunk: 4, Sessions: []Session{ra, rb}, BatchGrace: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	streamDone := make(chan struct{})
	go func() {
		defer close(streamDone)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.url+"/v1/chat/completions",
			strings.NewReader(`{"messages":[{"role":"user","content":"stream"}],"max_tokens":8000,"think":false}`))
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	for a.decodes.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	status, _, body := post(t, ts.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"`+strings.Repeat("a long prompt ", 30)+`"}],"max_tokens":3,"think":false}`)
	if status != 200 {
		t.Fatalf("long prompt: %d %s", status, body)
	}
	cancel()
	<-streamDone
	log := events.String()
	first, last := strings.IndexByte(log, 'p'), strings.LastIndexByte(log, 'p')
	seg := strings.Map(func(r rune) rune {
		if r == 'p' || r == 'd' {
			return r
		}
		return -1
	}, log[first:last+1])
	chunks := strings.Count(seg, "p")
	t.Logf("%d prefill chunks, %d decode steps of the stream between the first and the last", chunks, strings.Count(seg, "d"))
	if chunks < 10 || strings.Contains(seg, "pp") {
		t.Errorf("the stream stalled for two chunks or more: %s", seg)
	}
}

// TestSlotsTraceNamesSlot checks that with several slots the trace names
// the slot each request ran on.
func TestSlotsTraceNamesSlot(t *testing.T) {
	var trace strings.Builder
	ts := tinySlots(t, 1024, 2, func(c *Config) { c.Trace = &trace })
	complete(t, ts, "Count:", 2)
	waitIdle(t, ts.Server)
	if !regexp.MustCompile(`(?m)^kind=completions .* slot=0$`).MatchString(trace.String()) {
		t.Errorf("trace does not name the slot:\n%s", trace.String())
	}
}

// TestSlotsShutdown shuts a two-slot server down while both slots
// stream: both generations stop and each slot's session is saved to the
// disk KV cache.
func TestSlotsShutdown(t *testing.T) {
	tok := testTokenizer(t)
	policy := kvcache.Policy{MinTokens: 8}
	store, err := kvcache.Open(kvcache.Options{Dir: t.TempDir(), QuantBits: 2, Policy: policy, Detokenize: tok.Decode, Budget: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	sessions := tinySessions(t, 2048, 2)
	mgrs := make([]*kvcache.Manager, 2)
	ts := startServer(t, Config{
		Sessions:  []Session{sessions[0], sessions[1]},
		Tokenizer: tok,
		KVCaches: func(slot int, sess Session, ev engine.Evaluator) KVCache {
			mgrs[slot] = kvcache.NewManager(sessions[slot], kvcache.ManagerOptions{Cache: store, Tokenizer: tok, Policy: policy, Evaluator: ev})
			return mgrs[slot]
		},
	})
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := openaiClient(ts)
			c.Completions.New(context.Background(), greedyParams(t, "Stream "+strconv.Itoa(i), 1500), noThinking)
		}()
	}
	deadline := time.Now().Add(20 * time.Second)
	for ts.sched.steps[2].Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the two streams never decoded together")
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, m := range mgrs {
		if n := m.Stats().Saves["shutdown"]; n != 1 {
			t.Errorf("slot %d: %d shutdown saves", i, n)
		}
	}
}
