package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/prompt"
	"github.com/ds4-go/ds4/engine/sample"
	"github.com/ds4-go/ds4/engine/tokenizer"
)

const replHelp = `Commands:
  /help          show this help
  /think         think before answering (high effort)
  /think-max     think at maximum effort (needs a context of at least 393216)
  /nothink       answer without thinking
  /ctx N         set the context size to N tokens (the cache is rebuilt)
  /read FILE     send the contents of FILE as the next message
  /quit, /exit   leave (Ctrl+D too)
Ctrl+C stops the answer being generated.
`

// replHooks connect the chat to its interrupt source; tests replace them
// to inject interrupts at chosen tokens.
type replHooks struct {
	// interrupts returns a channel that reports Ctrl+C and a function
	// that stops the reporting.
	interrupts func() (<-chan os.Signal, func())
	// beforeToken, when set, is called before each token is sampled with
	// the number of tokens generated so far in the turn.
	beforeToken func(n int)
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
	sampler *sample.Sampler
	stdout  io.Writer
	stderr  io.Writer
	intr    <-chan os.Signal

	beforeToken func(n int) // test hook, see replHooks

	mode       prompt.Think // requested thinking mode
	maxPrefix  []int        // tokens of prompt.ThinkMaxPrefix
	hasPrefix  bool         // transcript holds maxPrefix after BOS
	transcript []int

	prefillTokens, genTokens int
	prefillTime, genTime     time.Duration
}

// runREPL runs the interactive chat on stdin and stdout until EOF or /quit.
func runREPL(g *genFlags, stdin io.Reader, stdout, stderr io.Writer, h replHooks) error {
	m, tok, err := g.load(stderr)
	if err != nil {
		return err
	}
	r := &repl{g: g, m: m, tok: tok, sampler: g.sampler(), stdout: stdout, stderr: stderr, beforeToken: h.beforeToken}
	r.be = cpu.New(g.threads)
	defer r.be.Close()
	if r.s, err = engine.NewSession(m, r.be, g.options(g.ctx)); err != nil {
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

	intr, stop := h.interrupts()
	defer stop()
	r.intr = intr

	readLine := lineReader(stdin, stdout)
	fmt.Fprint(stdout, replHelp)
	defer r.stats()
	for {
		line, err := readLine()
		if errors.Is(err, errLineInterrupted) {
			continue
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading input: %w", err)
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "/") {
			r.turn(line)
			continue
		}
		if quit := r.command(line); quit {
			return nil
		}
	}
}

// command runs a slash command and reports whether the REPL should end.
func (r *repl) command(line string) bool {
	cmd, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
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
		fmt.Fprintln(r.stdout, "Thinking mode: off.")
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
		s, err := engine.NewSession(r.m, r.be, r.g.options(n))
		if err != nil {
			fmt.Fprintf(r.stderr, "ds4: /ctx: %v\n", err)
			return false
		}
		r.s, r.g.ctx = s, n
		r.applyPrefix()
		fmt.Fprintf(r.stdout, "Context: %d tokens.\n", n)
	case cmd == "/read" && arg != "":
		b, err := os.ReadFile(arg)
		if err != nil {
			fmt.Fprintf(r.stderr, "ds4: /read: %v\n", err)
			return false
		}
		r.turn(string(b))
	default:
		fmt.Fprintf(r.stderr, "ds4: unknown command: %s\n", line)
		fmt.Fprintln(r.stderr, "Type /help for the commands.")
	}
	return false
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

// turn runs one chat turn: it appends the user message to the transcript,
// evaluates what the session has not seen yet and streams the answer.
func (r *repl) turn(text string) {
	// Forget a Ctrl+C pressed at the prompt; one pressed during the
	// prefill stops the answer before its first token.
	for len(r.intr) > 0 {
		<-r.intr
	}
	mark := len(r.transcript)
	think := r.think()
	r.transcript = append(r.transcript, r.tok.Special(tokenizer.User))
	r.transcript = r.tok.AppendEncode(r.transcript, text, false)
	r.transcript = append(r.transcript, r.tok.Special(tokenizer.Assistant))
	if think.Enabled() {
		r.transcript = append(r.transcript, r.tok.Special(tokenizer.ThinkOpen))
	} else {
		r.transcript = append(r.transcript, r.tok.Special(tokenizer.ThinkEnd))
	}
	if err := r.sync(); err != nil {
		r.transcript = r.transcript[:mark]
		r.s.Reset()
		fmt.Fprintf(r.stderr, "ds4: %v\n", err)
		return
	}

	out := newPrinter(r.stdout, r.tok, think.Enabled())
	eos := r.tok.Special(tokenizer.EOS)
	limit := min(r.g.tokens, r.s.Context()-r.s.Pos()-1)
	start := time.Now()
	n, interrupted := 0, false
	for ; n < limit; n++ {
		if r.beforeToken != nil {
			r.beforeToken(n)
		}
		select {
		case <-r.intr:
			interrupted = true
		default:
		}
		if interrupted {
			break
		}
		next := r.sampler.Sample(r.s.Logits())
		if next == eos {
			break
		}
		out.token(next)
		r.transcript = append(r.transcript, next)
		if err := r.s.Decode(next); err != nil {
			fmt.Fprintf(r.stderr, "ds4: %v\n", err)
			break
		}
	}
	r.genTime += time.Since(start)
	r.genTokens += n
	out.finish()
	if interrupted && n == 0 {
		r.transcript = r.transcript[:mark]
		r.s.Reset()
		fmt.Fprintln(r.stderr, "ds4: interrupted")
		return
	}
	if interrupted {
		fmt.Fprintln(r.stderr, "ds4: interrupted; keeping the partial answer")
	}
	fmt.Fprintf(r.stderr, "ds4: generated %d tokens\n", n)
	// EOS closes the answer; it is evaluated with the next turn.
	r.transcript = append(r.transcript, eos)
}

// sync brings the session up to the transcript, reusing the evaluated
// tokens when they are a prefix of it and starting over otherwise.
func (r *repl) sync() error {
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
	start := time.Now()
	if err := r.s.Prefill(suffix); err != nil {
		return fmt.Errorf("prefill: %w", err)
	}
	r.prefillTime += time.Since(start)
	r.prefillTokens += len(suffix)
	return nil
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

// lineReader returns a function reading one input line, with line editing
// and in-memory history when stdin and stdout are terminals.
func lineReader(stdin io.Reader, stdout io.Writer) func() (string, error) {
	in, ok1 := stdin.(*os.File)
	out, ok2 := stdout.(*os.File)
	if !ok1 || !ok2 || !term.IsTerminal(int(in.Fd())) || !term.IsTerminal(int(out.Fd())) {
		sc := bufio.NewScanner(stdin)
		sc.Buffer(nil, 16<<20)
		return func() (string, error) {
			if sc.Scan() {
				return sc.Text(), nil
			}
			if err := sc.Err(); err != nil {
				return "", err
			}
			return "", io.EOF
		}
	}
	fd := int(in.Fd())
	cr := &ctrlCReader{r: in}
	t := term.NewTerminal(struct {
		io.Reader
		io.Writer
	}{cr, out}, "ds4> ")
	read := func() (string, error) {
		// Raw mode only while editing, so that Ctrl+C during generation
		// arrives as SIGINT.
		old, err := term.MakeRaw(fd)
		if err != nil {
			return "", fmt.Errorf("terminal: %w", err)
		}
		defer term.Restore(fd, old)
		if w, h, err := term.GetSize(fd); err == nil && w > 0 && h > 0 {
			t.SetSize(w, h)
		}
		cr.sawCtrlC = false
		line, err := t.ReadLine()
		if err == io.EOF && cr.sawCtrlC {
			return "", errLineInterrupted
		}
		return line, err
	}
	return read
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
