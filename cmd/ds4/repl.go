package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"golang.org/x/term"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/prompt"
	"github.com/ds4-go/ds4/engine/sample"
	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/internal/cli"
)

const replHelp = `Commands:
  /help          show this help
  /think         think before answering (high effort)
  /think-max     think at maximum effort (needs a context of at least 393216)
  /nothink       answer without thinking
  /ctx N         set the context size to N tokens (the cache is rebuilt)
  /read FILE     send the contents of FILE as the next message
  /quit, /exit   leave (Ctrl+D too)
  """            on a line of its own, starts a multi-line message; a second
                 """ line sends it (on a terminal, pasted lines stay one
                 message too: paste, then press Enter)
Ctrl+C stops the answer being generated, or clears the line being typed.
`

// blockQuote, alone on a line, opens and closes a multi-line message.
const blockQuote = `"""`

// replHooks connect the chat to its interrupt source; tests replace them
// to inject interrupts at chosen tokens.
type replHooks struct {
	// interrupts returns a channel that reports Ctrl+C and a function
	// that stops the reporting.
	interrupts func() (<-chan os.Signal, func())
	// beforeToken, when set, is called before each token is sampled with
	// the number of tokens generated so far in the turn.
	beforeToken func(n int)
	// experts, when set, observes every routed-expert evaluation of the
	// sessions, so that tests can count the tokens the engine evaluated.
	experts engine.ExpertObserver
}

// defaultHooks report the process's SIGINT.
func defaultHooks() replHooks {
	return replHooks{interrupts: func() (<-chan os.Signal, func()) {
		c := make(chan os.Signal, 1)
		signal.Notify(c, os.Interrupt)
		return c, func() { signal.Stop(c) }
	}}
}

// repl is the state of an interactive chat.
type repl struct {
	g       *genFlags
	m       *engine.Model
	be      *cpu.Backend
	tok     *tokenizer.Tokenizer
	s       *engine.Session
	cp      engine.Checkpoint // the session before the current turn's prefill
	sampler *sample.Sampler
	stdout  io.Writer
	stderr  io.Writer
	intr    <-chan os.Signal
	trace   *tracer
	hooks   replHooks

	mode       prompt.Think // requested thinking mode
	maxPrefix  []int        // tokens of prompt.ThinkMaxPrefix
	hasPrefix  bool         // transcript holds maxPrefix after BOS
	transcript []int
	turns      int

	prefillTokens, genTokens int
	prefillTime, genTime     time.Duration
}

// runREPL runs the interactive chat on stdin and stdout until EOF or /quit.
func runREPL(g *genFlags, stdin io.Reader, stdout, stderr io.Writer, h replHooks) (err error) {
	m, tok, err := g.load(stderr)
	if err != nil {
		return err
	}
	r := &repl{g: g, m: m, tok: tok, sampler: g.sampler(), stdout: stdout, stderr: stderr, hooks: h}
	if r.trace, err = openTrace(g.trace, tok); err != nil {
		return err
	}
	defer func() {
		if cerr := r.trace.close(); err == nil {
			err = cerr
		}
	}()
	r.be = cpu.New(g.threads)
	defer r.be.Close()
	logContextMemory(stderr, m.Params, g.ctx)
	if r.s, err = engine.NewSession(m, r.be, r.options(g.ctx)); err != nil {
		return fmt.Errorf("creating the session: %w", err)
	}
	r.mode = prompt.ThinkHigh
	switch {
	case g.nothink:
		r.mode = prompt.ThinkOff
	case g.thinkMax:
		r.mode = prompt.ThinkMax
		g.thinkMode(stderr) // warns below the Think Max context
	}
	r.maxPrefix = tok.AppendEncode(nil, prompt.ThinkMaxPrefix, false)
	r.transcript = []int{tok.Special(tokenizer.BOS)}
	if g.system != "" {
		r.transcript = tok.AppendEncode(r.transcript, g.system, false)
	}
	r.applyPrefix()
	r.trace.event("start ctx=%d model=%q name=%q think=%s", g.ctx, g.model, m.Params.Name, r.think())

	intr, stop := h.interrupts()
	defer stop()
	r.intr = intr

	hist := newHistory(historyPath(), stderr)
	if err := hist.load(); err != nil {
		// Saving over a file that could not be read would lose it.
		fmt.Fprintf(stderr, "ds4: %v; not saving the history\n", err)
		hist.path = ""
	}
	in := newLineInput(stdin, stdout, hist)
	fmt.Fprint(stdout, replHelp)
	defer r.stats()
	for {
		text, multi, err := in.message()
		if errors.Is(err, errLineInterrupted) {
			continue
		}
		if err == io.EOF {
			return nil
		}
		if errors.Is(err, errOpenBlock) {
			fmt.Fprintf(stderr, "ds4: %v\n", err)
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading input: %w", err)
		}
		if multi || !strings.HasPrefix(text, "/") {
			r.turn(text)
			continue
		}
		if quit := r.command(text); quit {
			return nil
		}
	}
}

// options returns the session options for a context of ctx tokens.
func (r *repl) options(ctx int) engine.Options {
	opt := r.g.options(ctx)
	opt.Experts = r.hooks.experts
	return opt
}

// command runs a slash command and reports whether the REPL should end.
func (r *repl) command(line string) bool {
	cmd, arg := line, ""
	if i := strings.IndexFunc(line, unicode.IsSpace); i >= 0 {
		cmd, arg = line[:i], strings.TrimSpace(line[i:])
	}
	switch {
	case line == "/quit", line == "/exit":
		return true
	case line == "/help":
		fmt.Fprint(r.stdout, replHelp)
	case line == "/think":
		r.mode = prompt.ThinkHigh
		r.applyPrefix()
		fmt.Fprintln(r.stdout, "Thinking mode: high.")
	case line == "/nothink":
		r.mode = prompt.ThinkOff
		r.applyPrefix()
		fmt.Fprintln(r.stdout, "Thinking mode: none.")
	case line == "/think-max":
		r.mode = prompt.ThinkMax
		r.applyPrefix()
		if r.hasPrefix {
			fmt.Fprintln(r.stdout, "Thinking mode: max.")
		} else {
			fmt.Fprintf(r.stdout, "Thinking mode: high (ctx below %d).\n", prompt.MaxThinkContext)
		}
	case cmd == "/ctx":
		n, err := strconv.Atoi(arg)
		if err != nil || n <= 0 {
			fmt.Fprintln(r.stderr, "ds4: /ctx needs a positive integer")
			return false
		}
		if err := r.checkContext(n); err != nil {
			fmt.Fprintf(r.stderr, "ds4: %v\n", err)
			return false
		}
		logContextMemory(r.stderr, r.m.Params, n)
		s, err := engine.NewSession(r.m, r.be, r.options(n))
		if err != nil {
			fmt.Fprintf(r.stderr, "ds4: /ctx: %v\n", err)
			return false
		}
		r.s, r.g.ctx = s, n
		r.cp = engine.Checkpoint{} // it would keep the old session alive
		r.applyPrefix()
		if r.mode == prompt.ThinkMax && !r.hasPrefix {
			fmt.Fprintf(r.stderr, "ds4: warning: /ctx needs --ctx >= %d for Think Max; ctx=%d uses normal thinking instead\n", prompt.MaxThinkContext, n)
		}
		fmt.Fprintf(r.stdout, "Context: %d tokens.\n", n)
	case cmd == "/read":
		if arg == "" {
			fmt.Fprintln(r.stderr, "ds4: /read needs a file path")
			return false
		}
		b, err := os.ReadFile(arg)
		if err != nil {
			fmt.Fprintf(r.stderr, "ds4: /read: %v\n", err)
			return false
		}
		r.turn(string(b))
	default:
		fmt.Fprintf(r.stderr, "ds4: unknown command: %s\n", line)
		fmt.Fprintln(r.stderr, "ds4: type /help for commands")
	}
	return false
}

// checkContext refuses a /ctx value the model cannot hold, before its
// buffers are estimated or allocated.
func (r *repl) checkContext(n int) error {
	switch max := r.m.Params.ContextLength; {
	case n < cli.MinContext:
		return fmt.Errorf("/ctx %d: must be at least %d (one prompt token and one generated token)", n, cli.MinContext)
	case max > 0 && n > max:
		return fmt.Errorf("/ctx %d: must be at most %d, the model's context length", n, max)
	}
	return nil
}

// think returns the thinking mode in effect with the current context.
func (r *repl) think() prompt.Think {
	return prompt.ThinkForContext(r.mode, r.g.ctx)
}

// applyPrefix inserts or removes the Think Max prefix after BOS so that the
// transcript matches the mode in effect; a change invalidates the session.
func (r *repl) applyPrefix() {
	want := r.think() == prompt.ThinkMax
	if want == r.hasPrefix {
		return
	}
	if want {
		r.transcript = slices.Insert(r.transcript, 1, r.maxPrefix...)
	} else {
		r.transcript = slices.Delete(r.transcript, 1, 1+len(r.maxPrefix))
	}
	r.hasPrefix = want
	r.s.Reset()
}

// interrupted reports, without waiting, whether Ctrl+C was pressed.
func (r *repl) interrupted() bool {
	select {
	case <-r.intr:
		return true
	default:
		return false
	}
}

// turn runs one chat turn: it appends the user message to the transcript,
// evaluates what the session has not seen yet and streams the answer.
func (r *repl) turn(text string) {
	// Forget a Ctrl+C pressed at the prompt; one pressed during the
	// prefill stops the answer before its first token.
	for len(r.intr) > 0 {
		<-r.intr
	}
	r.turns++
	mark := len(r.transcript)
	think := r.think()
	r.trace.text("user", text)
	r.transcript = append(r.transcript, r.tok.Special(tokenizer.User))
	r.transcript = r.tok.AppendEncode(r.transcript, text, false)
	r.transcript = append(r.transcript, r.tok.Special(tokenizer.Assistant))
	if think.Enabled() {
		r.transcript = append(r.transcript, r.tok.Special(tokenizer.ThinkOpen))
	} else {
		r.transcript = append(r.transcript, r.tok.Special(tokenizer.ThinkEnd))
	}
	// Ctrl+C, looked for between prefill steps and between tokens,
	// cancels the turn's context.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	poll := func() {
		if r.interrupted() {
			cancel()
		}
	}
	if err := r.sync(ctx, think, poll); err != nil {
		r.transcript = r.transcript[:mark]
		fmt.Fprintf(r.stderr, "ds4: %v\n", err)
		r.trace.event("end turn=%d generated=0 stop=error", r.turns)
		return
	}

	out := newPrinter(r.stdout, r.tok, think.Enabled())
	start := time.Now()
	n, stop := r.answer(ctx, out, poll)
	r.genTime += time.Since(start)
	r.genTokens += n
	out.finish()
	r.trace.event("end turn=%d generated=%d stop=%s", r.turns, n, stop)
	if stop == "interrupt" && n == 0 {
		r.transcript = r.transcript[:mark]
		r.rewind()
		fmt.Fprintln(r.stderr, "ds4: interrupted")
		return
	}
	if stop == "interrupt" {
		fmt.Fprintln(r.stderr, "ds4: interrupted; keeping the partial answer")
	}
	fmt.Fprintf(r.stderr, "ds4: generated %d tokens\n", n)
	// EOS closes the answer; it is evaluated with the next turn.
	r.transcript = append(r.transcript, r.tok.Special(tokenizer.EOS))
}

// answer generates the answer to the transcript, printing it to out and
// appending it to the transcript, every token evaluated; poll is called
// before each token is chosen. It returns the number of tokens generated
// and why it stopped: "eos", "limit", "interrupt" (ctx was done) or
// "error".
func (r *repl) answer(ctx context.Context, out *printer, poll func()) (int, string) {
	next := func(n int) {
		if r.hooks.beforeToken != nil {
			r.hooks.beforeToken(n)
		}
		poll()
	}
	next(0)
	n := 0
	var err error
	g, _ := r.s.Generate(ctx, engine.GenerateOptions{
		MaxTokens: min(r.g.tokens, r.s.Context()-r.s.Pos()-1),
		EOS:       r.tok.Special(tokenizer.EOS),
		Sampler:   r.sampler,
		Token: func(tok, k int) bool {
			out.token(tok)
			r.trace.token(len(r.transcript), tok)
			r.transcript = append(r.transcript, tok)
			n = k
			return false
		},
		Evaluate: func(tok int) error {
			if err = r.s.Decode(tok); err != nil {
				return err
			}
			next(n)
			return nil
		},
	})
	if err == nil && g.Pending >= 0 {
		// The chat evaluates its whole answer: the next turn then
		// prefills only EOS and the new message.
		err = r.s.Decode(g.Pending)
	}
	switch {
	case err != nil:
		fmt.Fprintf(r.stderr, "ds4: %v\n", err)
		return n - 1, "error"
	case g.Reason == engine.StopCancelled, n == 0 && ctx.Err() != nil:
		return n, "interrupt"
	case g.Reason == engine.StopEOS:
		return n, "eos"
	}
	return n, "limit"
}

// sync brings the session up to the transcript, reusing the evaluated
// tokens when they are a prefix of it and starting over otherwise; after
// each prefill step it calls after. A prefill that ctx stopped leaves the
// session where it stopped and returns nil (rewind takes the session back
// to where it was). Errors leave the session as it was.
func (r *repl) sync(ctx context.Context, think prompt.Think, after func()) error {
	if len(r.transcript) >= r.s.Context() {
		return fmt.Errorf("the conversation (%d tokens) does not fit in the %d-token context", len(r.transcript), r.s.Context())
	}
	for _, id := range r.transcript {
		if id >= r.m.Params.Vocab {
			return fmt.Errorf("token %d is outside the model's vocabulary (%d)", id, r.m.Params.Vocab)
		}
	}
	have := r.s.Tokens()
	if len(have) >= len(r.transcript) || !slices.Equal(have, r.transcript[:len(have)]) {
		r.s.Reset()
	}
	reused := r.s.Pos()
	suffix := r.transcript[reused:]
	fmt.Fprintf(r.stderr, "ds4: prefill %d tokens (reused %d)\n", len(suffix), reused)
	r.trace.event("prefill turn=%d transcript=%d cached=%d suffix=%d think=%s", r.turns, len(r.transcript), reused, len(suffix), think)
	r.trace.tokens("prefill_suffix", reused, suffix)
	r.s.Checkpoint(&r.cp)
	start := time.Now()
	err := prefill(ctx, r.s, suffix, r.stderr, func(int) { after() })
	r.prefillTime += time.Since(start)
	r.prefillTokens += r.s.Pos() - reused
	if err != nil && ctx.Err() == nil {
		r.rewind()
		return err
	}
	return nil
}

// rewind takes the session back to where it was before the current
// turn's prefill, so that a turn forgotten after it started costs the
// next turn nothing.
func (r *repl) rewind() {
	if err := r.s.Rewind(&r.cp); err != nil {
		// sync always records the checkpoint first; were it missing,
		// an empty session would still be correct, only slower.
		r.s.Reset()
	}
}

// stats prints the prefill and generation speeds of the whole chat.
func (r *repl) stats() {
	rate := func(n int, d time.Duration) float64 {
		if d <= 0 {
			return 0
		}
		return float64(n) / d.Seconds()
	}
	fmt.Fprintf(r.stderr, "ds4: prefill: %.2f t/s, generation: %.2f t/s\n", rate(r.prefillTokens, r.prefillTime), rate(r.genTokens, r.genTime))
}

// errLineInterrupted reports Ctrl+C typed at the prompt.
var errLineInterrupted = errors.New("interrupted")

// errOpenBlock reports input that ended inside a """ block.
var errOpenBlock = errors.New(`the input ended inside a """ block; its text was not sent`)

// lineInput reads the chat's input: lines edited on a terminal (with the
// history recalled by the arrow keys, and bracketed paste so that pasted
// lines stay together), plain lines otherwise. It adds every message to
// the history.
type lineInput struct {
	hist *history
	scan *bufio.Scanner // the input when it is not a terminal

	fd  int // the terminal's descriptor
	rw  io.ReadWriter
	cr  *ctrlCReader
	out io.Writer
	t   *term.Terminal
}

// newLineInput reads stdin, editing the lines on a terminal when both
// stdin and stdout are one.
func newLineInput(stdin io.Reader, stdout io.Writer, hist *history) *lineInput {
	in, ok1 := stdin.(*os.File)
	out, ok2 := stdout.(*os.File)
	if !ok1 || !ok2 || !term.IsTerminal(int(in.Fd())) || !term.IsTerminal(int(out.Fd())) {
		sc := bufio.NewScanner(stdin)
		sc.Buffer(nil, 16<<20)
		return &lineInput{hist: hist, scan: sc}
	}
	cr := &ctrlCReader{r: in}
	l := &lineInput{hist: hist, fd: int(in.Fd()), cr: cr, out: out, rw: struct {
		io.Reader
		io.Writer
	}{cr, out}}
	l.newTerminal()
	return l
}

// newTerminal starts a line editor with an empty line on the history.
func (l *lineInput) newTerminal() {
	l.t = term.NewTerminal(l.rw, "")
	l.t.History = editorHistory{l.hist}
}

// line reads one line, showing prompt on a terminal. pasted reports a
// line that came whole from a bracketed paste, which goes on after it.
func (l *lineInput) line(prompt string) (line string, pasted bool, err error) {
	if l.scan != nil {
		if l.scan.Scan() {
			return l.scan.Text(), false, nil
		}
		if err := l.scan.Err(); err != nil {
			return "", false, err
		}
		return "", false, io.EOF
	}
	// Raw mode only while editing, so that Ctrl+C during generation
	// arrives as SIGINT.
	old, err := term.MakeRaw(l.fd)
	if err != nil {
		return "", false, fmt.Errorf("terminal: %w", err)
	}
	defer term.Restore(l.fd, old)
	l.t.SetBracketedPasteMode(true)
	defer l.t.SetBracketedPasteMode(false)
	if w, h, err := term.GetSize(l.fd); err == nil && w > 0 && h > 0 {
		l.t.SetSize(w, h)
	}
	l.t.SetPrompt(prompt)
	l.cr.sawCtrlC = false
	line, err = l.t.ReadLine()
	switch {
	case err == term.ErrPasteIndicator:
		return line, true, nil
	case err == io.EOF && l.cr.sawCtrlC:
		// term.Terminal keeps the abandoned text; a fresh editor clears it.
		fmt.Fprint(l.out, "^C\r\n")
		l.newTerminal()
		return "", false, errLineInterrupted
	}
	return line, false, err
}

// message reads the next message: a trimmed line, the lines of a """
// block, or the lines of a paste up to the line that the user ends with
// Enter, joined by newlines and trimmed (multi reports the latter two,
// which are never commands). Empty messages are skipped.
func (l *lineInput) message() (text string, multi bool, err error) {
	for {
		line, pasted, err := l.line("ds4> ")
		if err != nil {
			return "", false, err
		}
		var lines []string
		switch {
		case pasted:
			lines = append(lines, line)
			for pasted {
				if line, pasted, err = l.line("... "); err != nil {
					return "", false, err
				}
				lines = append(lines, line)
			}
			l.hist.Add(strings.Join(lines, "\n"))
		case strings.TrimSpace(line) == blockQuote:
			l.hist.Add(line)
			for {
				line, _, err := l.line("... ")
				if err == io.EOF {
					return "", false, errOpenBlock
				}
				if err != nil {
					return "", false, err
				}
				l.hist.Add(line)
				if strings.TrimSpace(line) == blockQuote {
					break
				}
				lines = append(lines, line)
			}
		default:
			l.hist.Add(line)
			if line = strings.TrimSpace(line); line != "" {
				return line, false, nil
			}
			continue
		}
		if text := strings.TrimSpace(strings.Join(lines, "\n")); text != "" {
			return text, true, nil
		}
	}
}

// ctrlCReader notes whether Ctrl+C went through it, since term.Terminal
// reports both Ctrl+C and Ctrl+D as io.EOF.
type ctrlCReader struct {
	r        io.Reader
	sawCtrlC bool
}

func (c *ctrlCReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if slices.Contains(p[:n], 3) {
		c.sawCtrlC = true
	}
	return n, err
}
