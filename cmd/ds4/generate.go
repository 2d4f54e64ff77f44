package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/prompt"
	"github.com/ds4-go/ds4/engine/sample"
	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/internal/cli"
	"github.com/ds4-go/ds4/steering"
)

// defaultModel is the GGUF ds4 looks for when -m is not given.
const defaultModel = engine.DefaultModel

type genFlags struct {
	prompt, promptFile, system, model string
	tokens, ctx, threads              int
	temp, topP, minP                  float32
	seed                              uint64
	think, thinkMax, nothink, warm    bool
	dumpLogprobs                      string
	logprobsTopK                      int
	trace                             string
	steerFile                         string
	steerFFN, steerAttn               float64
	steer                             *engine.Steering // loaded with the model
	ssd                               *cli.Streaming
}

func runGenerate(args []string, stdin io.Reader, stdout, stderr io.Writer, h replHooks) error {
	var g genFlags
	fs := pflag.NewFlagSet("ds4", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVarP(&g.prompt, "prompt", "p", "", "one-shot prompt")
	fs.StringVar(&g.promptFile, "prompt-file", "", "read the prompt from FILE")
	fs.StringVar(&g.system, "system", prompt.CompletionSystem, `system text ("" disables it); also -sys`)
	fs.StringVarP(&g.model, "model", "m", "", cli.ModelUsage)
	fs.IntVarP(&g.tokens, "tokens", "n", 50000, "maximum tokens to generate")
	fs.IntVarP(&g.ctx, "ctx", "c", 32768, "context size in tokens")
	fs.IntVarP(&g.threads, "threads", "t", 0, "worker threads (0: one per CPU)")
	fs.Float32Var(&g.temp, "temp", 1, "temperature, 0..100; 0 is greedy")
	fs.Float32Var(&g.topP, "top-p", 1, "nucleus sampling mass, 0..1")
	fs.Float32Var(&g.minP, "min-p", 0.05, "minimum probability relative to the top token, 0..1")
	fs.Uint64Var(&g.seed, "seed", 0, "random seed (0: from the clock)")
	fs.BoolVar(&g.think, "think", false, "think before answering (the default)")
	fs.BoolVar(&g.thinkMax, "think-max", false, "think at maximum effort (needs --ctx ≥ 393216)")
	fs.BoolVar(&g.nothink, "nothink", false, "answer without thinking")
	fs.BoolVar(&g.warm, "warm-weights", false, "read every page of the weights at startup: a slower start, no page faults in the first prompt")
	fs.StringVar(&g.dumpLogprobs, "dump-logprobs", "", "write a greedy continuation with top-k logprobs to FILE as JSON, and exit")
	fs.IntVar(&g.logprobsTopK, "logprobs-top-k", 20, "alternatives per step in --dump-logprobs (at most 128)")
	fs.StringVar(&g.trace, "trace", "", "write a timestamped trace of the prompt and generated tokens to FILE (mode 0600)")
	fs.StringVar(&g.steerFile, "dir-steering-file", "", "directional steering vector FILE (.f32)")
	fs.Float64Var(&g.steerFFN, "dir-steering-ffn", 0, "steering scale at the FFN output in [-100, 100] (1 when only a file is given)")
	fs.Float64Var(&g.steerAttn, "dir-steering-attn", 0, "steering scale at the attention output in [-100, 100]")
	fs.StringVar(&g.system, "sys", prompt.CompletionSystem, "upstream's spelling of --system")
	fs.MarkHidden("sys")
	im := addImatrixFlags(fs)
	perplexity := fs.String("perplexity-file", "", "score FILE's plain text teacher-forced after a 32-token prefix and print its NLL and perplexity")
	g.ssd = cli.AddStreaming(fs)
	cli.AddUpstream(fs, upstreamFlags()...)
	if err := cli.Parse(fs, args); err != nil {
		return cli.Usage(err)
	}
	if err := cli.CheckUpstream(fs, stderr, "ds4", upstreamFlags()...); err != nil {
		return cli.Usage(err)
	}
	if err := g.validate(fs); err != nil {
		return cli.Usage(err)
	}
	if err := im.validate(fs, &g); err != nil {
		return cli.Usage(err)
	}
	if err := validatePerplexity(fs, &g, *perplexity); err != nil {
		return cli.Usage(err)
	}
	if im.requested() {
		return runImatrix(&g, im, stderr)
	}
	if *perplexity != "" {
		return runPerplexity(&g, *perplexity, stdout, stderr)
	}
	if !fs.Changed("prompt") && g.promptFile == "" {
		return runREPL(&g, stdin, stdout, stderr, h)
	}
	text := g.prompt
	if g.promptFile != "" {
		b, err := os.ReadFile(g.promptFile)
		if err != nil {
			return fmt.Errorf("--prompt-file: %w", err)
		}
		text = string(b)
	}
	if text == "" {
		if g.promptFile != "" {
			return cli.Usage(fmt.Errorf("--prompt-file %s: the prompt is empty", g.promptFile))
		}
		return cli.Usage(errors.New(`-p "": the prompt is empty`))
	}

	return runOneShot(&g, text, stdout, stderr, h)
}

// runOneShot answers one prompt: it prefills the rendered chat and streams
// the answer to stdout, or writes --dump-logprobs.
func runOneShot(g *genFlags, text string, stdout, stderr io.Writer, h replHooks) (err error) {
	m, tok, err := g.load(stderr)
	if err != nil {
		return err
	}
	think := g.thinkMode(stderr)
	ids := buildPrompt(tok, text, g.system, think)
	for _, id := range ids {
		if id >= m.Params.Vocab {
			return fmt.Errorf("prompt token %d is outside the model's vocabulary (%d)", id, m.Params.Vocab)
		}
	}
	be := cpu.New(g.threads)
	defer be.Close()
	logContextMemory(stderr, m.Params, g.ctx)
	opt := g.options(g.ctx)
	opt.Experts = h.experts
	s, err := engine.NewSession(m, be, opt)
	if err != nil {
		return err
	}
	if len(ids) >= g.ctx {
		return fmt.Errorf("prompt of %d tokens does not fit in the %d-token context", len(ids), g.ctx)
	}
	tr, err := openTrace(g.trace, tok)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := tr.close(); err == nil {
			err = cerr
		}
	}()
	tr.event("start ctx=%d model=%q name=%q think=%s", g.ctx, g.model, m.Params.Name, think)
	tr.text("user", text)
	tr.event("prefill turn=1 transcript=%d cached=0 suffix=%d think=%s", len(ids), len(ids), think)
	tr.tokens("prefill_suffix", 0, ids)
	fmt.Fprintf(stderr, "ds4: processing %d input tokens\n", len(ids))
	start := time.Now()
	if err := prefill(context.Background(), s, ids, stderr, nil); err != nil {
		return err
	}
	prefillTime := time.Since(start)
	if g.dumpLogprobs != "" {
		if err := dumpLogprobs(g.dumpLogprobs, s, tok, len(ids), g.tokens, g.logprobsTopK); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "ds4: wrote %s\n", g.dumpLogprobs)
		return nil
	}
	out := newPrinter(stdout, tok, think != prompt.ThinkOff)
	gen, err := s.Generate(context.Background(), engine.GenerateOptions{
		MaxTokens: min(g.tokens, g.ctx-s.Pos()-1),
		EOS:       tok.Special(tokenizer.EOS),
		Sampler:   g.sampler(),
		Token: func(next, _ int) bool {
			out.token(next)
			tr.token(s.Pos(), next)
			return false
		},
	})
	if err != nil {
		return err
	}
	out.finish()
	stop := "limit"
	if gen.Reason == engine.StopEOS {
		stop = "eos"
	}
	tr.event("end turn=1 generated=%d stop=%s", gen.Tokens, stop)
	ssd := ""
	if st, ok := cli.ExpertStats(m); ok {
		ssd = "; " + cli.StreamSummary(st, len(ids)+gen.Tokens)
	}
	fmt.Fprintf(stderr, "ds4: prefill: %.2f t/s, generation: %.2f t/s%s\n", float64(len(ids))/prefillTime.Seconds(), float64(gen.Tokens)/gen.Elapsed.Seconds(), ssd)
	return nil
}

// thinkMode returns the thinking mode the flags ask for, warning on stderr
// when --think-max is given with too small a context.
func (g *genFlags) thinkMode(stderr io.Writer) prompt.Think {
	switch {
	case g.nothink:
		return prompt.ThinkOff
	case g.thinkMax:
		think := prompt.ThinkForContext(prompt.ThinkMax, g.ctx)
		if think != prompt.ThinkMax {
			fmt.Fprintf(stderr, "ds4: --think-max needs --ctx ≥ %d; thinking at high effort\n", prompt.MaxThinkContext)
		}
		return think
	}
	return prompt.ThinkHigh
}

// sampler returns a sampler configured by the flags, seeded from the clock
// when no --seed is given.
func (g *genFlags) sampler() *sample.Sampler {
	params := sample.Defaults()
	params.Temperature, params.TopP, params.MinP, params.Seed = g.temp, g.topP, g.minP, g.seed
	if params.Seed == 0 {
		params.Seed = uint64(time.Now().UnixNano())
	}
	return sample.New(params)
}

// validate checks the flags of generation, naming the flag and the value
// at fault, before anything is loaded.
func (g *genFlags) validate(fs *pflag.FlagSet) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if fs.Changed("prompt") && g.promptFile != "" {
		return errors.New("-p and --prompt-file: specify only one prompt source")
	}
	n := 0
	for _, b := range []bool{g.think, g.thinkMax, g.nothink} {
		if b {
			n++
		}
	}
	if n > 1 {
		return errors.New("--think, --think-max and --nothink exclude each other")
	}
	if g.tokens <= 0 {
		return cli.FlagError(fs, "tokens", "must be at least 1")
	}
	// A model's own context, which may be smaller, openModel checks.
	if err := cli.Context(fs, "ctx", g.ctx); err != nil {
		return err
	}
	if err := g.ssd.Check(); err != nil {
		return err
	}
	switch {
	case g.threads < 0:
		return cli.Threads(fs, g.threads)
	case !(g.temp >= 0 && g.temp <= sample.MaxTemperature):
		return cli.FlagError(fs, "temp", "must be in [0, %d]", sample.MaxTemperature)
	case !(g.topP >= 0 && g.topP <= 1):
		return cli.FlagError(fs, "top-p", "must be in [0, 1]")
	case !(g.minP >= 0 && g.minP <= 1):
		return cli.FlagError(fs, "min-p", "must be in [0, 1]")
	case g.dumpLogprobs != "" && !fs.Changed("prompt") && g.promptFile == "":
		return fmt.Errorf("--dump-logprobs %s: needs a prompt (-p or --prompt-file)", g.dumpLogprobs)
	}
	ffn, attn, err := steering.Scales(g.steerFile, g.steerFFN, g.steerAttn, fs.Changed("dir-steering-ffn"), fs.Changed("dir-steering-attn"))
	if err != nil {
		return err
	}
	g.steerFFN, g.steerAttn = float64(ffn), float64(attn)
	if ffn != 0 || attn != 0 {
		if err := cli.InputFile("dir-steering-file", g.steerFile); err != nil {
			return err
		}
	}
	for _, c := range []struct{ name, path string }{{"model", g.model}, {"prompt-file", g.promptFile}} {
		if err := cli.InputFile(c.name, c.path); err != nil {
			return err
		}
	}
	for _, c := range []struct{ name, path string }{{"trace", g.trace}, {"dump-logprobs", g.dumpLogprobs}} {
		if err := cli.OutputFile(c.name, c.path); err != nil {
			return err
		}
	}
	return nil
}

// options returns the session options for a context of ctx tokens.
func (g *genFlags) options(ctx int) engine.Options {
	return engine.Options{Context: ctx, Steering: g.steer}
}

// load opens the model (with its steering direction, if one is requested)
// and the tokenizer.
func (g *genFlags) load(stderr io.Writer) (*engine.Model, *tokenizer.Tokenizer, error) {
	m, err := g.openModel(stderr)
	if err != nil {
		return nil, nil, err
	}
	if g.steer, err = steering.Load(g.steerFile, float32(g.steerFFN), float32(g.steerAttn), m.Params.Layers, m.Params.Embd); err != nil {
		return nil, nil, err
	}
	tok, err := tokenizer.Default()
	if err != nil {
		return nil, nil, err
	}
	return m, tok, nil
}

// openModel opens the model of -m (see engine.OpenDefault), saying so when
// it falls back to the built-in tiny model, and warms its weights for
// --warm-weights.
func (g *genFlags) openModel(stderr io.Writer) (*engine.Model, error) {
	m, opened, err := cli.OpenModel(g.model, false, "ds4", stderr)
	if err != nil {
		return nil, err
	}
	if max := m.Params.ContextLength; max > 0 && g.ctx > max {
		name := opened
		if name == "" {
			name = "the built-in tiny model"
		}
		return nil, cli.Usage(fmt.Errorf("--ctx %d: must be at most %d, the context length of %s", g.ctx, max, name))
	}
	if _, err := g.ssd.StartStreaming(m, opened, cli.StreamSetup{Context: g.ctx}, "ds4", stderr); err != nil {
		return nil, err
	}
	if g.warm {
		m.WarmWeights(stderr, "ds4")
	}
	return m, nil
}

// buildPrompt renders a one-shot chat as upstream's CLI does: BOS, the
// think-max prefix, the system text, the user turn and the generation
// prefix, with user and system text tokenized as plain text. A prompt that
// already starts with BOS is taken as a rendered transcript.
func buildPrompt(tok *tokenizer.Tokenizer, text, system string, think prompt.Think) []int {
	if strings.HasPrefix(text, prompt.BOS) {
		return tok.EncodeSpecial(text)
	}
	ids := []int{tok.Special(tokenizer.BOS)}
	if think == prompt.ThinkMax {
		ids = tok.AppendEncode(ids, prompt.ThinkMaxPrefix, false)
	}
	if system != "" {
		ids = tok.AppendEncode(ids, system, false)
	}
	ids = append(ids, tok.Special(tokenizer.User))
	ids = tok.AppendEncode(ids, text, false)
	ids = append(ids, tok.Special(tokenizer.Assistant))
	if think != prompt.ThinkOff {
		return append(ids, tok.Special(tokenizer.ThinkOpen))
	}
	return append(ids, tok.Special(tokenizer.ThinkEnd))
}

// printer streams generated tokens as text; thinking is shown in grey on a
// terminal and the think tags themselves are not printed.
type printer struct {
	w        io.Writer
	tok      *tokenizer.Tokenizer
	dec      *tokenizer.StreamDecoder
	tty      bool
	thinking bool
	atStart  bool
}

func newPrinter(w io.Writer, tok *tokenizer.Tokenizer, thinking bool) *printer {
	p := &printer{w: w, tok: tok, dec: tok.NewStreamDecoder(), thinking: thinking, atStart: true}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty = true
	}
	if thinking && p.tty {
		fmt.Fprint(w, "\x1b[90m")
	}
	return p
}

func (p *printer) write(s string) {
	if s == "" {
		return
	}
	fmt.Fprint(p.w, s)
	p.atStart = strings.HasSuffix(s, "\n")
}

func (p *printer) token(id int) {
	switch id {
	case p.tok.Special(tokenizer.ThinkOpen):
		return
	case p.tok.Special(tokenizer.ThinkEnd):
		p.write(p.dec.Flush())
		if p.thinking && p.tty {
			fmt.Fprint(p.w, "\x1b[0m")
		}
		if p.thinking && !p.atStart {
			p.write("\n")
		}
		p.thinking = false
		return
	}
	p.write(p.dec.Push(id))
}

func (p *printer) finish() {
	p.write(p.dec.Flush())
	if p.thinking && p.tty {
		fmt.Fprint(p.w, "\x1b[0m")
	}
	if !p.atStart {
		fmt.Fprintln(p.w)
	}
}
