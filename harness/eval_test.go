package harness

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/sample"
	"github.com/ds4-go/ds4/engine/tokenizer"
)

func TestEvalQuestionPrompt(t *testing.T) {
	mc := EvalCase{Question: "Which is larger?", Choices: []string{"1", "2"}, Kind: AnswerChoice}
	require.Equal(t, "Which is larger?\n\nChoices:\nA. 1\nB. 2\n\nSolve the question. At the end, write exactly one final line "+
		"in this format and do not write anything after it:\nAnswer: <letter>", EvalQuestionPrompt(&mc))
	in := EvalCase{Question: "How many?", Kind: AnswerInteger}
	require.Equal(t, "How many?\n\nSolve the problem. At the end, write exactly one final line in this format and do not "+
		"write anything after it:\nAnswer: <integer>", EvalQuestionPrompt(&in))
	ln := EvalCase{Question: "Code:\n1: x", Kind: AnswerLines}
	require.Equal(t, "Code:\n1: x\n\nAt the end, write exactly one final line in this format and do not write anything "+
		"after it:\nAnswer: <line number or comma-separated line numbers>", EvalQuestionPrompt(&ln))
	require.Equal(t, "You are solving a hard benchmark question. Reason carefully. The final answer must follow the "+
		"requested format exactly.", EvalSystemPrompt)
}

func TestEncodeEvalPrompt(t *testing.T) {
	tok, err := tokenizer.Default()
	require.NoError(t, err)
	c := EvalCase{Question: "What is 6 × 7?", Kind: AnswerInteger}
	for _, think := range []bool{true, false} {
		ids := EncodeEvalPrompt(tok, &c, think)
		// The same prompt rendered as text and tokenized with special
		// recognition: an independent path to the same ids.
		open := tokenizer.ThinkOpen
		if !think {
			open = tokenizer.ThinkEnd
		}
		text := tokenizer.BOS + EvalSystemPrompt + tokenizer.User + EvalQuestionPrompt(&c) + tokenizer.Assistant + open
		require.Equal(t, tok.EncodeSpecial(text), ids)
		require.Equal(t, text, string(tok.Decode(ids)))
	}
	// Upstream's close of thinking is plain text: three ordinary tokens
	// (docs/formats/harness.md#upstream-quirks).
	e := Evaluator{Tok: tok}
	require.Equal(t, []int{1718, 37947, 32}, e.CloseTokens())
	e.Config.SpecialClose = true
	require.Equal(t, []int{tok.Special(tokenizer.ThinkEnd)}, e.CloseTokens())

	ctx, maxPrompt, maxCase, err := EvalContext([][]int{make([]int, 7), make([]int, 12), make([]int, 3)}, 100)
	require.NoError(t, err)
	require.Equal(t, []int{112, 12, 1}, []int{ctx, maxPrompt, maxCase})
	_, _, _, err = EvalContext([][]int{make([]int, 7)}, MaxEvalContext-6)
	require.ErrorContains(t, err, "largest prompt (7 tokens, case 1) + --tokens (999994) exceeds the 1000000 token context cap")
}

// scripted is a logit script: before the n-th generated token (0-based)
// top(n) scores 10, the tokens of second score 9, 8, …, and every other
// token of the vocabulary scores 0.
type scripted struct {
	vocab  int
	top    func(n int) int
	second []int
	logits []float32
}

func (s *scripted) at(n int) []float32 {
	if s.logits == nil {
		s.logits = make([]float32, s.vocab)
	}
	clear(s.logits)
	for i, id := range s.second {
		s.logits[id] = 9 - float32(i)
	}
	s.logits[s.top(n)] = 10
	return s.logits
}

// Token ids of the scripted vocabulary.
const (
	tA = iota
	tEOS
	tX
	tSpace
	tSpecialClose
	tLT
	tThink
	tGT
	tVocab
)

var scriptedText = [tVocab]string{"a", "", "x", " ", "</think>", "</", "think", ">"}

// TestGenerate runs the budget controller in the engine's generate loop
// on the tiny model, with scripted logits in place of the model's so that
// each case reaches the branch it names.
func TestGenerate(t *testing.T) {
	m, err := engine.OpenTiny()
	require.NoError(t, err)
	be := cpu.New(2)
	defer be.Close()
	prompt := []int{tA, tX, tSpace}
	session := func() *engine.Session {
		s, err := engine.NewSession(m, be, engine.Options{Context: 16})
		require.NoError(t, err)
		require.NoError(t, s.Prefill(prompt))
		return s
	}
	text := func(id int) []byte { return []byte(scriptedText[id]) }
	plainClose := []int{tLT, tThink, tGT}
	always := func(id int) func(int) int { return func(int) int { return id } }
	for _, tc := range []struct {
		name     string
		think    bool
		close    []int
		top      func(int) int
		second   []int
		limit    int
		want     string
		tokens   int
		closed   ThinkClose
		thinking int // tokens generated with thinking still open after them
		eos      bool
	}{
		{name: "hard close, three tokens: the soft limit cannot fire", think: true, close: plainClose,
			top: always(tX), second: []int{tLT}, limit: 10,
			want: "xxxxxxx</think>", tokens: 10, closed: ThinkClose{CloseHard, 8, 3, 0}, thinking: 9},
		{name: "soft close: the close token ranks second", think: true, close: []int{tSpecialClose},
			top: always(tX), second: []int{tSpecialClose}, limit: 10,
			want: "xxxxx</think>xxxx", tokens: 10, closed: ThinkClose{CloseSoft, 6, 5, 2}, thinking: 5},
		{name: "soft close: the close token ranks third", think: true, close: []int{tSpecialClose},
			top: always(tX), second: []int{tA, tSpecialClose}, limit: 10,
			want: "xxxxx</think>xxxx", tokens: 10, closed: ThinkClose{CloseSoft, 6, 5, 3}, thinking: 5},
		{name: "no soft close: the close token ranks fourth", think: true, close: []int{tSpecialClose},
			top: always(tX), second: []int{tA, tSpace, tSpecialClose}, limit: 10,
			want: "xxxxxxx</think>xx", tokens: 10, closed: ThinkClose{CloseHard, 8, 3, 0}, thinking: 7},
		{name: "natural close", think: true, close: plainClose,
			top: func(i int) int { return []int{tX, tLT, tThink, tGT, tX, tX, tX, tX, tX, tX}[i] }, limit: 10,
			want: "x</think>xxxxxx", tokens: 10, closed: ThinkClose{CloseNatural, 4, 7, 0}, thinking: 3},
		{name: "a half-written close does not stop the hard close", think: true, close: plainClose,
			top: func(i int) int { return []int{tX, tX, tX, tX, tX, tX, tLT, tThink, tGT, tX}[i] }, limit: 10,
			want: "xxxxxx</</think>", tokens: 10, closed: ThinkClose{CloseHard, 8, 3, 0}, thinking: 9},
		{name: "EOS ends the generation", think: true, close: plainClose,
			top: func(i int) int { return []int{tX, tX, tEOS}[i] }, limit: 10,
			want: "xx", tokens: 2, thinking: 2, eos: true},
		{name: "no thinking, no controller", think: false, close: plainClose,
			top: always(tX), second: []int{tSpecialClose}, limit: 6, want: "xxxxxx", tokens: 6},
		{name: "budget under the hard limit from the start", think: true, close: plainClose,
			top: always(tX), limit: 2, want: "</think", tokens: 2, closed: ThinkClose{CloseHard, 1, 2, 0}, thinking: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &scripted{vocab: tVocab, top: tc.top, second: tc.second}
			s := session()
			var evaluated []int
			thinking := 0
			g, err := generate(context.Background(), s, GenerateOptions{
				Limit: tc.limit, Thinking: tc.think, Close: tc.close, HardBudget: 3, SoftBudget: 5, SoftRank: 3,
				EOS: tEOS, Sampler: sample.New(sample.Params{Temperature: 0, TopP: 1, Seed: 1}), Text: text,
				OnToken: func(text []byte, th bool) {
					if th {
						thinking++
					}
				},
			}, d.at, func(id int) error { evaluated = append(evaluated, id); return s.Decode(id) })
			require.NoError(t, err)
			require.Equal(t, tc.want, string(g.Output))
			require.Equal(t, tc.tokens, g.Tokens)
			require.Equal(t, tc.closed, g.Close)
			require.Equal(t, tc.thinking, thinking)
			require.Equal(t, tc.eos, g.EOS)
			require.False(t, g.Stopped)
			// Every generated token but the last is evaluated; EOS never is.
			require.Equal(t, append(slices.Clone(prompt), evaluated...), s.Tokens())
			generated := evaluated
			if tc.eos {
				require.Equal(t, -1, g.Pending)
			} else {
				generated = append(generated, g.Pending)
			}
			require.Len(t, generated, tc.tokens)
			var out []byte
			for _, id := range generated {
				out = append(out, text(id)...)
			}
			require.Equal(t, tc.want, string(out))
		})
	}

	opts := GenerateOptions{Limit: 5, EOS: tEOS, Sampler: sample.New(sample.Params{Seed: 1}), Text: text}
	s := session()
	x := &scripted{vocab: tVocab, top: func(int) int { return tX }}
	g, err := generate(context.Background(), s, opts, x.at, func(id int) error {
		if s.Pos() == len(prompt)+2 {
			return errors.New("device lost")
		}
		return s.Decode(id)
	})
	require.ErrorContains(t, err, "eval: engine: evaluating generated token 3: device lost")
	require.Equal(t, 3, g.Tokens, "the token that failed counts")
	require.Equal(t, "xxx", string(g.Output))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g, err = Generate(ctx, session(), opts)
	require.NoError(t, err)
	require.True(t, g.Stopped)
	require.Zero(t, g.Tokens)
}

func TestTokenRank(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for _, tc := range []struct {
		logits    []float32
		id, k, to int
	}{
		{[]float32{1, 3, 2}, 2, 3, 2},
		{[]float32{1, 3, 2}, 0, 3, 3},
		{[]float32{1, 3, 2}, 0, 2, 0},
		{[]float32{1, 3, 2}, 1, 1, 1},
		{[]float32{2, 2, 2}, 1, 3, 2}, // ties go to the lower id
		{[]float32{2, 2, 2}, 0, 1, 1},
		{[]float32{inf, nan, 1, 0}, 3, 2, 2}, // non-finite logits rank nowhere
		{[]float32{inf, nan, 1, 0}, 0, 4, 0},
		{[]float32{inf, nan, 1, 0}, 1, 4, 0},
		{[]float32{1, 2}, 2, 3, 0},
		{[]float32{1, 2}, -1, 3, 0},
		{[]float32{1, 2}, 0, 0, 0},
	} {
		require.Equal(t, tc.to, TokenRank(tc.logits, tc.id, tc.k), "%v id %d k %d", tc.logits, tc.id, tc.k)
	}
	// Against the full sorted list of sample.TopLogprobs.
	r := rand.New(rand.NewPCG(1, 2))
	logits := make([]float32, 500)
	for trial := range 20 {
		for i := range logits {
			logits[i] = float32(r.IntN(40)) / 4 // many ties
		}
		top := sample.TopLogprobs(logits, len(logits), nil)
		for rank, tl := range top {
			require.Equal(t, rank+1, TokenRank(logits, tl.ID, len(logits)), "trial %d", trial)
			want := rank + 1
			if want > 10 {
				want = 0
			}
			require.Equal(t, want, TokenRank(logits, tl.ID, 10))
		}
	}
}

// TestEvaluatorTiny runs cases on the built-in tiny model: the budget
// controller, the prompt sync and the grading of real generations.
func TestEvaluatorTiny(t *testing.T) {
	m, tok, be := tinyRig(t, 2)
	c := EvalCase{Source: "T", ID: "mc", Question: "Pick one.", Choices: []string{"yes", "no", "maybe"}, Answer: "B", Kind: AnswerChoice}
	prompt := EncodeEvalPrompt(tok, &c, true)
	s, err := engine.NewSession(m, be, engine.Options{Context: len(prompt) + 6})
	require.NoError(t, err)
	newEval := func(cfg EvalConfig) *Evaluator {
		return &Evaluator{Session: s, Tok: tok, Config: cfg, Sampler: sample.New(sample.Params{Temperature: 0, TopP: 1, Seed: 1})}
	}
	check := func(r EvalResult) {
		t.Helper()
		require.Equal(t, ExtractAnswer(c.Kind, len(c.Choices), r.Output), r.Picked)
		require.Equal(t, Grade(c.Kind, c.Answer, r.Picked), r.Status == StatusPassed)
		require.Contains(t, []EvalStatus{StatusPassed, StatusFailed}, r.Status)
		require.Equal(t, len(prompt), r.PromptTokens)
		// The session holds every generated token but the last, unless
		// the model ended with EOS.
		held := len(prompt) + r.Generated - 1
		if r.EOS {
			held++
		}
		require.Equal(t, held, s.Pos())
		require.True(t, strings.HasPrefix(r.Output, string(tok.Decode(s.Tokens()[len(prompt):]))))
	}

	// Upstream's plain close: forced with 3 of 6 tokens left.
	e := newEval(EvalConfig{Tokens: 6, Think: true, SoftBudget: 4, HardBudget: 3, SoftRank: 3})
	var started, prefilled int
	e.OnStart = func(r *EvalResult) { started++ }
	e.Prefill = func(done, total int) { prefilled = done; require.Equal(t, len(prompt), total) }
	r, err := e.Run(context.Background(), 0, &c, prompt)
	require.NoError(t, err)
	check(r)
	require.Equal(t, 1, started)
	require.Equal(t, len(prompt), prefilled)
	require.Equal(t, 6, r.Generated)
	require.Equal(t, ThinkClose{CloseHard, 4, 3, 0}, r.Close, r.Output)
	require.Contains(t, r.Output, "</think>")
	first := r.Output

	// The same run again starts over (the session holds the last
	// generation) and, greedy, gives the same text.
	r, err = newEval(e.Config).Run(context.Background(), 0, &c, prompt)
	require.NoError(t, err)
	require.Equal(t, first, r.Output)

	// The corrected mode forces the special token, so the soft limit can
	// fire: with every rank accepted it closes at 4 tokens left.
	e = newEval(EvalConfig{Tokens: 6, Think: true, SoftBudget: 4, HardBudget: 2, SoftRank: m.Params.Vocab, SpecialClose: true})
	r, err = e.Run(context.Background(), 0, &c, prompt)
	require.NoError(t, err)
	check(r)
	require.Equal(t, CloseSoft, r.Close.Kind)
	require.Equal(t, 3, r.Close.Index)
	require.Equal(t, 4, r.Close.Remaining)
	require.Equal(t, tok.Special(tokenizer.ThinkEnd), s.Tokens()[len(prompt)+2])
	// Its rank, recomputed from a prefill of the same tokens.
	replay, err := engine.NewSession(m, be, engine.Options{Context: len(prompt) + 6})
	require.NoError(t, err)
	require.NoError(t, replay.Prefill(s.Tokens()[:len(prompt)+2]))
	top := sample.TopLogprobs(replay.Logits(), m.Params.Vocab, nil)
	rank := 0
	for i, tl := range top {
		if tl.ID == tok.Special(tokenizer.ThinkEnd) {
			rank = i + 1
		}
	}
	require.Equal(t, rank, r.Close.Rank)

	// Without thinking nothing is forced.
	noThink := EncodeEvalPrompt(tok, &c, false)
	e = newEval(EvalConfig{Tokens: 6, Think: false, SoftBudget: 4, HardBudget: 2, SoftRank: m.Params.Vocab, SpecialClose: true})
	r, err = e.Run(context.Background(), 0, &c, noThink)
	require.NoError(t, err)
	check(r)
	require.Equal(t, CloseNone, r.Close.Kind)
	require.Equal(t, 6, r.Generated)

	// A prompt longer than the context is skipped.
	long := append(append([]int(nil), prompt...), prompt...)
	r, err = e.Run(context.Background(), 3, &c, long)
	require.NoError(t, err)
	require.Equal(t, StatusSkipped, r.Status)
	require.Equal(t, "prompt does not fit context", r.Err)
	require.Equal(t, 3, r.Index)

	// Cancellation stops the case.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, err = e.Run(ctx, 0, &c, noThink)
	require.NoError(t, err)
	require.Equal(t, StatusStopped, r.Status)
	require.Equal(t, "", r.Picked)
}

func TestEvalConfigValidate(t *testing.T) {
	ok := EvalConfig{Tokens: 16000, TopP: 1, MinP: 0.05, SoftBudget: 1024, HardBudget: 512, SoftRank: 3}
	require.NoError(t, ok.Validate())
	for _, tc := range []struct {
		edit func(*EvalConfig)
		want string
	}{
		{func(c *EvalConfig) { c.Tokens = 0 }, "must be positive"},
		{func(c *EvalConfig) { c.SoftRank = 0 }, "must be positive"},
		{func(c *EvalConfig) { c.Tokens = MaxEvalContext + 1 }, "exceeds the 1000000 token context cap"},
		{func(c *EvalConfig) { c.Tokens = 512 }, "--hard-limit-reply-budget (512) must be smaller than --tokens (512)"},
		{func(c *EvalConfig) { c.SoftBudget = 100 }, "--soft-limit-reply-budget (100) must be >= --hard-limit-reply-budget (512)"},
		{func(c *EvalConfig) { c.Temperature = 101 }, "invalid temperature"},
		{func(c *EvalConfig) { c.TopP = 2 }, "invalid top_p"},
		{func(c *EvalConfig) { c.MinP = -1 }, "invalid min_p"},
	} {
		c := ok
		tc.edit(&c)
		require.ErrorContains(t, c.Validate(), tc.want)
	}
}

// BenchmarkTokenRank measures the soft limit's rank check over a
// vocabulary-sized logit vector; BenchmarkTokenRankBaseline is the plain
// argmax scan of the same vector, the floor of any pass over it.
func BenchmarkTokenRank(b *testing.B) {
	logits := benchLogits()
	b.ReportAllocs()
	for b.Loop() {
		TokenRank(logits, 1234, 3)
	}
}

func BenchmarkTokenRankBaseline(b *testing.B) {
	logits := benchLogits()
	b.ReportAllocs()
	for b.Loop() {
		sample.Argmax(logits)
	}
}

// benchLogits returns a vocabulary of logits where token 1234 ranks 2nd,
// so the rank check scans it all.
func benchLogits() []float32 {
	r := rand.New(rand.NewPCG(3, 4))
	logits := make([]float32, 129280)
	for i := range logits {
		logits[i] = float32(r.NormFloat64())
	}
	logits[1234], logits[99] = 20, 21
	return logits
}
