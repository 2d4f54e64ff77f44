package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/sample"
	"github.com/ds4-go/ds4/engine/tokenizer"
)

// EvalSystemPrompt is the system text of every ds4-eval question; it must
// match upstream byte for byte for comparable results.
const EvalSystemPrompt = "You are solving a hard benchmark question. Reason carefully. " +
	"The final answer must follow the requested format exactly."

// Answer-format instructions appended to the question (upstream's texts).
const (
	choiceInstruction = "\nSolve the question. At the end, write exactly one final line in this " +
		"format and do not write anything after it:\nAnswer: <letter>"
	linesInstruction = "\nAt the end, write exactly one final line in this format and do not " +
		"write anything after it:\nAnswer: <line number or comma-separated line numbers>"
	integerInstruction = "\nSolve the problem. At the end, write exactly one final line in this " +
		"format and do not write anything after it:\nAnswer: <integer>"
)

// MaxEvalContext is the largest context ds4-eval sizes a session to.
const MaxEvalContext = 1000000

// EvalQuestionPrompt returns the user text of a case: the question, its
// lettered choices and the answer-format instruction of its kind.
func EvalQuestionPrompt(c *EvalCase) string {
	var b strings.Builder
	b.WriteString(c.Question)
	b.WriteByte('\n')
	switch c.Kind {
	case AnswerChoice:
		b.WriteString("\nChoices:\n")
		for i, ch := range c.Choices {
			fmt.Fprintf(&b, "%c. %s\n", 'A'+i, ch)
		}
		b.WriteString(choiceInstruction)
	case AnswerLines:
		b.WriteString(linesInstruction)
	default:
		b.WriteString(integerInstruction)
	}
	return b.String()
}

// EncodeEvalPrompt tokenizes a case as upstream's single-turn chat
// encoding does: BOS, the system text and the question as plain text
// around the user and assistant markers, then "<think>" when thinking or
// "</think>" when not.
func EncodeEvalPrompt(tok *tokenizer.Tokenizer, c *EvalCase, think bool) []int {
	ids := []int{tok.Special(tokenizer.BOS)}
	ids = tok.AppendEncode(ids, EvalSystemPrompt, false)
	ids = append(ids, tok.Special(tokenizer.User))
	ids = tok.AppendEncode(ids, EvalQuestionPrompt(c), false)
	ids = append(ids, tok.Special(tokenizer.Assistant))
	if think {
		return append(ids, tok.Special(tokenizer.ThinkOpen))
	}
	return append(ids, tok.Special(tokenizer.ThinkEnd))
}

// EvalContext returns the context ds4-eval allocates for cases: the
// largest encoded prompt plus the generation budget tokens, with that
// prompt's length and 0-based index. It fails when the sum exceeds
// MaxEvalContext.
func EvalContext(prompts [][]int, tokens int) (ctx, maxPrompt, maxCase int, err error) {
	maxCase = -1
	for i, p := range prompts {
		if len(p) > maxPrompt {
			maxPrompt, maxCase = len(p), i
		}
	}
	ctx = maxPrompt + tokens
	if ctx > MaxEvalContext {
		return 0, maxPrompt, maxCase, fmt.Errorf("eval: largest prompt (%d tokens, case %d) + --tokens (%d) exceeds the %d token context cap",
			maxPrompt, maxCase+1, tokens, MaxEvalContext)
	}
	return ctx, maxPrompt, maxCase, nil
}

// CloseKind is how thinking ended in a generation.
type CloseKind uint8

// Ways thinking ends.
const (
	CloseNone    CloseKind = iota // thinking never closed (or was off)
	CloseNatural                  // the model wrote "</think>" itself
	CloseSoft                     // the soft limit forced the close token
	CloseHard                     // the hard limit forced the close tokens
)

// String returns the kind's name in the trace.
func (k CloseKind) String() string {
	switch k {
	case CloseNatural:
		return "natural"
	case CloseSoft:
		return "soft_forced"
	case CloseHard:
		return "hard_forced"
	}
	return "none"
}

// ThinkClose records the first close of thinking in a generation.
type ThinkClose struct {
	Kind      CloseKind
	Index     int // 1-based index of the generated token
	Remaining int // generation budget left before that token
	Rank      int // rank of the close token for a soft close, else 0
}

// GenerateOptions configure one generation with the thinking budget
// controller (docs/formats/harness.md#thinking-budget).
type GenerateOptions struct {
	Limit    int  // tokens to generate at most
	Thinking bool // the prompt opened thinking
	// Close is the token sequence forced to close thinking: upstream's is
	// the plain tokenization of "</think>" (three ordinary tokens).
	Close      []int
	HardBudget int // force Close when at most this many tokens are left
	SoftBudget int // with at most this many left, close if Close[0] ranks high
	SoftRank   int // "high" means within the top SoftRank logits
	EOS        int
	Sampler    *sample.Sampler
	Text       func(id int) []byte // the bytes of a token
	// OnToken, when set, sees each generated token's bytes and whether
	// thinking is still open after it.
	OnToken func(text []byte, thinking bool)
}

// Generation is the outcome of Generate.
type Generation struct {
	Output  []byte // the generated text, EOS excluded
	Tokens  int    // tokens generated
	Close   ThinkClose
	EOS     bool // the model ended the answer
	Stopped bool // the context was canceled
	// Pending is the last generated token, which the session does not
	// hold (engine.Generation.Pending), or -1.
	Pending int
}

// thinkEnd is the text whose appearance ends thinking.
const thinkEnd = "</think>"

// Generate samples up to o.Limit tokens in s with the engine's generate
// loop. While thinking is open it runs upstream's budget controller: a
// forced close in progress emits its next token; with at most HardBudget
// tokens left it forces Close (hard close); with at most SoftBudget left
// and a one-token Close ranked within the top SoftRank logits it emits
// that token (soft close, which never fires with upstream's three-token
// Close). Otherwise the sampler draws. EOS ends the generation without
// being evaluated, and so does the last token (Generation.Pending).
// Canceling ctx stops it between tokens.
func Generate(ctx context.Context, s *engine.Session, o GenerateOptions) (Generation, error) {
	return generate(ctx, s, o, nil, nil)
}

// generate is Generate whose controller sees logits(n), when set, in
// place of the session's logits before the n-th token, and whose tokens
// are evaluated by evaluate, when set, in place of Session.Decode.
func generate(ctx context.Context, s *engine.Session, o GenerateOptions, logits func(n int) []float32, evaluate func(int) error) (Generation, error) {
	g := Generation{Pending: -1}
	b := thinkBudget{o: &o, g: &g, thinking: o.Thinking && len(o.Close) > 0, force: -1}
	choose := b.choose
	if logits != nil {
		choose = func(_ []float32, n int) int { return b.choose(logits(n), n) }
	}
	eg, err := s.Generate(ctx, engine.GenerateOptions{MaxTokens: o.Limit, EOS: o.EOS, Choose: choose, Token: b.token, Evaluate: evaluate})
	g.Tokens, g.Pending = eg.Tokens, eg.Pending
	g.EOS, g.Stopped = eg.Reason == engine.StopEOS, eg.Reason == engine.StopCancelled
	if err != nil {
		return g, fmt.Errorf("eval: %w", err)
	}
	return g, nil
}

// thinkBudget is the budget controller of one generation: it chooses
// each token (engine.GenerateOptions.Choose) and follows the text for the
// close of thinking (Token).
type thinkBudget struct {
	o        *GenerateOptions
	g        *Generation
	thinking bool
	force    int // next index into o.Close while a forced close is under way
}

// choose returns the n-th token (0-based): a forced one while the
// controller closes thinking, else the sampler's.
func (b *thinkBudget) choose(logits []float32, n int) int {
	o := b.o
	if !b.thinking {
		return o.Sampler.Sample(logits)
	}
	remaining := o.Limit - n
	token, kind, rank := -1, CloseNone, 0
	switch {
	case b.force >= 0:
		token = o.Close[b.force]
		if b.force++; b.force == len(o.Close) {
			b.force = -1
		}
	case remaining <= o.HardBudget:
		token, kind = o.Close[0], CloseHard
		if len(o.Close) > 1 {
			b.force = 1
		}
	case remaining <= o.SoftBudget && len(o.Close) == 1:
		if rank = TokenRank(logits, o.Close[0], o.SoftRank); rank > 0 {
			token, kind = o.Close[0], CloseSoft
		}
	}
	if token < 0 {
		return o.Sampler.Sample(logits)
	}
	if kind != CloseNone && b.g.Close.Kind == CloseNone {
		b.g.Close = ThinkClose{Kind: kind, Index: n + 1, Remaining: remaining, Rank: rank}
	}
	return token
}

// token appends the n-th generated token's text (1-based) to the output
// and ends thinking when "</think>" appears in it.
func (b *thinkBudget) token(id, n int) bool {
	text := b.o.Text(id)
	from := max(0, len(b.g.Output)-len(thinkEnd)+1)
	b.g.Output = append(b.g.Output, text...)
	// Only a match ending in the new bytes can be new, so the search
	// starts len("</think>")-1 bytes before them: linear, not quadratic.
	if b.thinking && bytes.Contains(b.g.Output[from:], []byte(thinkEnd)) {
		b.thinking = false
		if b.g.Close.Kind == CloseNone {
			b.g.Close = ThinkClose{Kind: CloseNatural, Index: n, Remaining: b.o.Limit - n + 1}
		}
	}
	if b.o.OnToken != nil {
		b.o.OnToken(text, b.thinking)
	}
	return false
}

// TokenRank returns the 1-based rank of token id among the finite logits
// (higher first, ties to the lower id, the order of sample.TopLogprobs)
// when it is within the top k, else 0.
func TokenRank(logits []float32, id, k int) int {
	if id < 0 || id >= len(logits) || k <= 0 {
		return 0
	}
	v := logits[id]
	if !(v >= -math.MaxFloat32 && v <= math.MaxFloat32) {
		return 0
	}
	// One pass counting the tokens ranked above id, with an early exit
	// once k of them are found: no sort and no allocation. Nearly every
	// logit is below v, so a single comparison rejects it and the tie and
	// infinity checks run only for the few that are not.
	above := 0
	for j, w := range logits {
		if w < v {
			continue
		}
		if w > v && w <= math.MaxFloat32 || w == v && j < id {
			if above++; above >= k {
				return 0
			}
		}
	}
	return above + 1
}

// EvalStatus is the state of a case in a run.
type EvalStatus string

// Case states, as the report prints them.
const (
	StatusPending EvalStatus = "PENDING"
	StatusPassed  EvalStatus = "PASSED"
	StatusFailed  EvalStatus = "FAILED"
	StatusSkipped EvalStatus = "SKIPPED"
	StatusStopped EvalStatus = "STOPPED"
	StatusError   EvalStatus = "ERROR"
)

// EvalResult is the outcome of one case.
type EvalResult struct {
	Index        int // 0-based position in the question file
	Case         *EvalCase
	Status       EvalStatus
	Picked       string // extracted answer; "" when the case did not finish
	Prompt       string // the user text
	PromptTokens int
	Generated    int
	PrefillSec   float64
	GenSec       float64 // decoding time, the trace's elapsed_sec
	Output       string
	Close        ThinkClose
	EOS          bool
	Err          string // why the case was skipped or failed to run
}

// GenTPS returns the case's generation speed in tokens per second.
func (r *EvalResult) GenTPS() float64 { return rate(r.Generated, r.GenSec) }

// EvalConfig holds the settings of an evaluation run.
type EvalConfig struct {
	Tokens      int // generation budget per question
	Temperature float32
	TopP, MinP  float32
	Seed        uint64
	Think       bool
	SoftBudget  int
	HardBudget  int
	SoftRank    int
	// SpecialClose forces the special "</think>" token instead of
	// upstream's plain tokenization (a corrected mode, not upstream's).
	SpecialClose bool
}

// Validate checks the settings as upstream's command line does.
func (c *EvalConfig) Validate() error {
	switch {
	case c.Tokens <= 0 || c.SoftBudget <= 0 || c.HardBudget <= 0 || c.SoftRank <= 0:
		return errors.New("--tokens, the reply budgets and the close rank must be positive")
	case c.Tokens > MaxEvalContext:
		return fmt.Errorf("--tokens (%d) exceeds the %d token context cap", c.Tokens, MaxEvalContext)
	case c.HardBudget >= c.Tokens:
		return fmt.Errorf("--hard-limit-reply-budget (%d) must be smaller than --tokens (%d)", c.HardBudget, c.Tokens)
	case c.SoftBudget < c.HardBudget:
		return fmt.Errorf("--soft-limit-reply-budget (%d) must be >= --hard-limit-reply-budget (%d)", c.SoftBudget, c.HardBudget)
	}
	p := sample.Params{Temperature: c.Temperature, TopP: c.TopP, MinP: c.MinP}
	return p.Validate()
}

// Evaluator runs ds4-eval cases on one session sized for all of them; the
// sampler's random sequence runs on across cases, as upstream's does.
type Evaluator struct {
	Session *engine.Session
	Tok     *tokenizer.Tokenizer
	Config  EvalConfig
	Sampler *sample.Sampler
	// Prefill, when set, sees the prefill progress of each prompt: the
	// prompt tokens counted as done, updated after every layer
	// (engine.PrefillOptions.Progress), and the prompt's length.
	Prefill func(done, total int)
	// OnStart, when set, is called when a case starts running (after the
	// skip checks); OnToken sees its generated tokens.
	OnStart func(r *EvalResult)
	OnToken func(text []byte, thinking bool)
}

// CloseTokens returns the token sequence the controller forces to close
// thinking.
func (e *Evaluator) CloseTokens() []int {
	if e.Config.SpecialClose {
		return []int{e.Tok.Special(tokenizer.ThinkEnd)}
	}
	return e.Tok.Encode(thinkEnd)
}

// Run runs case i (of the question file) with its encoded prompt and
// grades the answer. A prefill or decode failure is returned along with
// the result (status ERROR); a canceled ctx gives status STOPPED.
func (e *Evaluator) Run(ctx context.Context, i int, c *EvalCase, prompt []int) (EvalResult, error) {
	r := EvalResult{Index: i, Case: c, Status: StatusSkipped, Prompt: EvalQuestionPrompt(c), PromptTokens: len(prompt)}
	n := e.Session.Context()
	limit := min(e.Config.Tokens, n-len(prompt))
	switch {
	case len(prompt) >= n:
		r.Err = "prompt does not fit context"
		return r, nil
	case limit < 1:
		r.Err = "prompt leaves no generation room"
		return r, nil
	}
	r.Status = StatusPending
	if e.OnStart != nil {
		e.OnStart(&r)
	}
	start := time.Now()
	if err := e.sync(ctx, prompt); err != nil {
		if ctx.Err() != nil {
			r.Status = StatusStopped
			return r, nil
		}
		r.Status, r.Err = StatusError, err.Error()
		return r, fmt.Errorf("eval: prefill %s: %w", c.Name(), err)
	}
	r.PrefillSec = time.Since(start).Seconds()
	start = time.Now()
	g, err := Generate(ctx, e.Session, GenerateOptions{
		Limit: limit, Thinking: e.Config.Think, Close: e.CloseTokens(),
		HardBudget: e.Config.HardBudget, SoftBudget: e.Config.SoftBudget, SoftRank: e.Config.SoftRank,
		EOS: e.Tok.Special(tokenizer.EOS), Sampler: e.Sampler, Text: e.Tok.TokenBytes, OnToken: e.OnToken,
	})
	r.GenSec = time.Since(start).Seconds()
	r.Output, r.Generated, r.Close, r.EOS = string(g.Output), g.Tokens, g.Close, g.EOS
	if err != nil {
		r.Status, r.Err = StatusError, err.Error()
		return r, fmt.Errorf("eval: %s: %w", c.Name(), err)
	}
	if g.Stopped {
		r.Status = StatusStopped
		return r, nil
	}
	r.Picked = ExtractAnswer(c.Kind, len(c.Choices), r.Output)
	r.Status = StatusFailed
	if Grade(c.Kind, c.Answer, r.Picked) {
		r.Status = StatusPassed
	}
	return r, nil
}

// sync makes the session hold exactly prompt, evaluating only what
// follows the tokens it already holds when they are a prefix of it.
func (e *Evaluator) sync(ctx context.Context, prompt []int) error {
	s := e.Session
	have := s.Tokens()
	if len(have) > len(prompt) || !slices.Equal(have, prompt[:len(have)]) {
		s.Reset()
	}
	var opt engine.PrefillOptions
	if e.Prefill != nil {
		opt.Progress = func(pos int) { e.Prefill(pos, len(prompt)) }
	}
	return s.PrefillChunks(ctx, prompt[s.Pos():], opt)
}
