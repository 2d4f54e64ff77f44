package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/internal/cli"
	"github.com/ds4-go/ds4/steering"
)

// buildFlags are the options of ds4-steer build.
type buildFlags struct {
	model, good, bad, out, component, system string
	ctx, threads                             int
	think, pairNormalize, noOrthogonalize    bool
}

func runBuild(args []string, stdout, stderr io.Writer) error {
	var f buildFlags
	fs := pflag.NewFlagSet("ds4-steer build", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVarP(&f.model, "model", "m", "", "GGUF model (default ./"+defaultModel+", else the built-in tiny model)")
	fs.StringVar(&f.good, "good", "", "target prompts, one per line (required)")
	fs.StringVar(&f.bad, "bad", "", "contrast prompts, one per line (required)")
	fs.StringVar(&f.out, "out", "dir-steering/out/direction.json", "output path; <stem>.f32 and <stem>.json are written")
	fs.StringVar(&f.component, "component", "ffn_out", "captured sublayer output: ffn_out or attn_out")
	fs.BoolVar(&f.think, "think", false, "capture after <think> instead of </think>")
	fs.BoolVar(&f.pairNormalize, "pair-normalize", false, "average the normalized per-pair differences")
	fs.BoolVar(&f.noOrthogonalize, "no-orthogonalize", false, "keep the component along the contrast mean")
	fs.StringVar(&f.system, "system", defaultSystem, "system prompt (empty omits it)")
	fs.IntVar(&f.ctx, "ctx", 512, "context size in tokens")
	fs.IntVarP(&f.threads, "threads", "t", 0, "CPU worker threads (0: one per CPU)")
	if err := parse(fs, args); err != nil {
		return err
	}
	switch {
	case f.good == "" || f.bad == "":
		return usageError{errors.New("--good and --bad are required")}
	case f.component != "ffn_out" && f.component != "attn_out":
		return usageError{cli.FlagError(fs, "component", "must be ffn_out or attn_out")}
	}
	if err := checkCommon(fs, f.model, f.ctx, f.threads); err != nil {
		return usageError{err}
	}
	for _, in := range []struct{ name, path string }{{"good", f.good}, {"bad", f.bad}} {
		if err := cli.InputFile(in.name, in.path); err != nil {
			return usageError{err}
		}
	}
	if st, err := os.Stat(f.out); err == nil && st.IsDir() {
		return usageError{cli.FlagError(fs, "out", "is a directory, not a file")}
	}
	good, err := steering.ReadPrompts(f.good)
	if err != nil {
		return err
	}
	bad, err := steering.ReadPrompts(f.bad)
	if err != nil {
		return err
	}
	n := min(len(good), len(bad))
	m, modelPath, err := openModel(f.model, stderr)
	if err != nil {
		return err
	}
	tok, err := tokenizer.Default()
	if err != nil {
		return err
	}
	be := cpu.New(f.threads)
	defer be.Close()
	capt := &engine.Capture{Attn: f.component == "attn_out"}
	s, err := engine.NewSession(m, be, engine.Options{Context: f.ctx, Capture: capt})
	if err != nil {
		return err
	}
	p := m.Params
	// activation prefills prompt and returns a copy of the captured rows,
	// indexed [layer][embd].
	activation := func(prompt string) ([][]float32, error) {
		ids := render(tok, f.system, prompt, f.think)
		if err := checkVocab(m, ids); err != nil {
			return nil, err
		}
		if len(ids) > f.ctx {
			return nil, fmt.Errorf("prompt of %d tokens exceeds --ctx %d: %q", len(ids), f.ctx, prompt)
		}
		s.Reset()
		if err := s.Prefill(ids); err != nil {
			return nil, fmt.Errorf("prefill %q: %w", prompt, err)
		}
		rows := slices.Clone(capt.Rows)
		out := make([][]float32, p.Layers)
		for l := range out {
			out[l] = rows[l*p.Embd : (l+1)*p.Embd]
		}
		return out, nil
	}
	goodAct, badAct := make([][][]float32, n), make([][][]float32, n)
	for i := range n {
		fmt.Fprintf(stderr, "pair %d/%d\n", i+1, n)
		if goodAct[i], err = activation(good[i]); err != nil {
			return err
		}
		if badAct[i], err = activation(bad[i]); err != nil {
			return err
		}
	}
	d, err := steering.Build(goodAct, badAct, steering.BuildOptions{PairNormalize: f.pairNormalize, Orthogonalize: !f.noOrthogonalize})
	if err != nil {
		return err
	}
	if modelPath == "" {
		modelPath = "builtin:tiny"
	}
	meta := steering.Meta{
		Component: f.component, Thinking: f.think, PairNormalize: f.pairNormalize,
		OrthogonalizeControlMean: !f.noOrthogonalize, GoodFile: f.good, BadFile: f.bad, Model: modelPath,
	}
	if err := os.MkdirAll(filepath.Dir(f.out), 0o755); err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	if err := steering.Write(f.out, d, meta); err != nil {
		return err
	}
	stem := strings.TrimSuffix(f.out, filepath.Ext(f.out))
	fmt.Fprintf(stdout, "wrote %s\nwrote %s\n", stem+".json", stem+".f32")
	return nil
}
