package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/sample"
	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/harness"
	"github.com/ds4-go/ds4/internal/cli"
	"github.com/ds4-go/ds4/plots"
	"github.com/ds4-go/ds4/steering"
	"github.com/ds4-go/ds4/vectors"
)

// SweepRow is one generation of a steering sweep, a row of the Parquet
// table "steering".
type SweepRow struct {
	Direction    string  `parquet:"direction"`
	PromptIndex  int64   `parquet:"prompt_index"`
	Prompt       string  `parquet:"prompt"`
	PromptTokens int64   `parquet:"prompt_tokens"`
	FFNScale     float64 `parquet:"ffn_scale"`
	AttnScale    float64 `parquet:"attn_scale"`
	Thinking     bool    `parquet:"thinking"`
	MaxTokens    int64   `parquet:"max_tokens"`
	Output       string  `parquet:"output"`
	OutputTokens int64   `parquet:"output_tokens"`
	StoppedEOS   bool    `parquet:"stopped_eos"`
	FirstKL      float64 `parquet:"first_token_kl"`
}

// sweepFlags are the options of ds4-steer sweep.
type sweepFlags struct {
	model, direction, prompts, scales, parquetDir, svg, hash string
	tokens, ctx, threads                                     int
	attnScale                                                float64
	nothink                                                  bool
}

// parseScales parses a comma-separated list of scales in [−100, 100].
func parseScales(s string) ([]float64, error) {
	var out []float64
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil, fmt.Errorf("--scales: %q is not a number", f)
		}
		if err := checkScale("--scales", v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// checkScale reports whether v lies in [−MaxScale, MaxScale].
func checkScale(name string, v float64) error {
	if math.IsNaN(v) || v < -steering.MaxScale || v > steering.MaxScale {
		return fmt.Errorf("%s %v outside [-%d, %d]", name, v, steering.MaxScale, steering.MaxScale)
	}
	return nil
}

func runSweep(args []string, stdout, stderr io.Writer) error {
	var f sweepFlags
	fs := pflag.NewFlagSet("ds4-steer sweep", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVarP(&f.model, "model", "m", "", "GGUF model (default ./"+defaultModel+", else the built-in tiny model)")
	fs.StringVar(&f.direction, "direction", "", "steering direction .f32 (required)")
	fs.StringVar(&f.prompts, "prompts", "", "neutral prompts, one per line (required)")
	fs.StringVar(&f.scales, "scales", "-2,-1,-0.5,0,0.5,1,2", "comma-separated FFN scales in [-100, 100]")
	fs.IntVarP(&f.tokens, "tokens", "n", 160, "maximum output tokens per generation")
	fs.IntVar(&f.ctx, "ctx", 4096, "context size in tokens")
	fs.Float64Var(&f.attnScale, "attn-scale", 0, "attention-output scale in [-100, 100] for every run")
	fs.BoolVar(&f.nothink, "nothink", false, "end the prompt with </think> instead of <think>")
	fs.IntVarP(&f.threads, "threads", "t", 0, "CPU worker threads (0: one per CPU)")
	fs.StringVar(&f.parquetDir, "parquet", "", "write the rows as Parquet under DIR (hive-style partitions)")
	fs.StringVar(&f.svg, "svg", "", "draw mean effect against scale to FILE (.svg, or .png)")
	fs.StringVar(&f.hash, "hash", string(harness.HashQuick), "model fingerprint in the Parquet metadata: sha256, quick or none")
	if err := parse(fs, args); err != nil {
		return err
	}
	scales, err := parseScales(f.scales)
	switch {
	case err != nil:
		return usageError{err}
	case f.direction == "" || f.prompts == "":
		return usageError{errors.New("--direction and --prompts are required")}
	case f.tokens <= 0:
		return usageError{cli.FlagError(fs, "tokens", "must be at least 1")}
	}
	if err := checkCommon(fs, f.model, f.ctx, f.threads); err != nil {
		return usageError{err}
	}
	if err := checkScale("--attn-scale", f.attnScale); err != nil {
		return usageError{err}
	}
	switch harness.HashMode(f.hash) {
	case harness.HashFull, harness.HashQuick, harness.HashNone:
	default:
		return usageError{cli.FlagError(fs, "hash", "must be sha256, quick or none")}
	}
	for _, in := range []struct{ name, path string }{{"direction", f.direction}, {"prompts", f.prompts}} {
		if err := cli.InputFile(in.name, in.path); err != nil {
			return usageError{err}
		}
	}
	if err := cli.OutputFile("svg", f.svg); err != nil {
		return usageError{err}
	}
	prompts, err := steering.ReadPrompts(f.prompts)
	if err != nil {
		return err
	}
	m, modelPath, err := openModel(f.model, stderr)
	if err != nil {
		return err
	}
	dir, err := steering.Read(f.direction, m.Params.Layers, m.Params.Embd)
	if err != nil {
		return err
	}
	tok, err := tokenizer.Default()
	if err != nil {
		return err
	}
	be := cpu.New(f.threads)
	defer be.Close()
	meta, err := harness.CollectMeta(harness.MetaOptions{
		Tool: "ds4-steer sweep", ModelPath: modelPath, Model: m, Backend: "cpu", Threads: be.Workers(),
		Hash: harness.HashMode(f.hash), Args: append([]string{"ds4-steer", "sweep"}, args...), Progress: stderr,
	})
	if err != nil {
		return err
	}
	g := generator{m: m, be: be, tok: tok, ctx: f.ctx, max: f.tokens}
	var rows []SweepRow
	rule := func(c byte) string { return strings.Repeat(string(c), 80) }
	for pi, prompt := range prompts {
		fmt.Fprintf(stdout, "%s\nPROMPT: %s\n", rule('='), prompt)
		ids := render(tok, defaultSystem, prompt, !f.nothink)
		if err := checkVocab(m, ids); err != nil {
			return err
		}
		ref, err := g.run(ids, nil)
		if err != nil {
			return fmt.Errorf("prompt %d unsteered: %w", pi+1, err)
		}
		for _, sc := range scales {
			fmt.Fprintf(stdout, "%s\nFFN scale: %g\n", rule('-'), sc)
			var st *engine.Steering
			if sc != 0 || f.attnScale != 0 {
				st = &engine.Steering{Dir: dir.V, FFN: float32(sc), Attn: float32(f.attnScale)}
			}
			res := ref
			if st != nil {
				if res, err = g.run(ids, st); err != nil {
					return fmt.Errorf("prompt %d scale %g: %w", pi+1, sc, err)
				}
			}
			kl := vectors.KL(ref.first, res.first)
			fmt.Fprintf(stdout, "%s\n[%d tokens, first-token KL %.6g]\n", res.text, len(res.out), kl)
			rows = append(rows, SweepRow{
				Direction: f.direction, PromptIndex: int64(pi), Prompt: prompt, PromptTokens: int64(len(ids)),
				FFNScale: sc, AttnScale: f.attnScale, Thinking: !f.nothink, MaxTokens: int64(f.tokens),
				Output: res.text, OutputTokens: int64(len(res.out)), StoppedEOS: res.eos, FirstKL: kl,
			})
		}
	}
	if f.parquetDir != "" {
		path, err := harness.WriteRun(f.parquetDir, "steering", meta, rows)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "ds4-steer: wrote %s\n", path)
	}
	if f.svg != "" {
		ch, err := plots.SteeringSweep(meanEffects(rows), plots.SteeringOptions{
			Title: fmt.Sprintf("Steering sweep: %d prompts, %s", len(prompts), m.Params.Name),
		})
		if err != nil {
			return err
		}
		if err := ch.Save(f.svg); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "ds4-steer: wrote %s\n", f.svg)
	}
	return nil
}

// meanEffects averages the output length and first-token KL of the rows
// per FFN scale, in ascending scale order.
func meanEffects(rows []SweepRow) []plots.SteeringPoint {
	var pts []plots.SteeringPoint
	var counts []float64
	for _, r := range rows {
		i := slices.IndexFunc(pts, func(p plots.SteeringPoint) bool { return p.Scale == r.FFNScale })
		if i < 0 {
			i = len(pts)
			pts = append(pts, plots.SteeringPoint{Scale: r.FFNScale})
			counts = append(counts, 0)
		}
		pts[i].Tokens += float64(r.OutputTokens)
		pts[i].KL += r.FirstKL
		counts[i]++
	}
	for i := range pts {
		pts[i].Tokens /= counts[i]
		pts[i].KL /= counts[i]
	}
	slices.SortFunc(pts, func(a, b plots.SteeringPoint) int {
		switch {
		case a.Scale < b.Scale:
			return -1
		case a.Scale > b.Scale:
			return 1
		}
		return 0
	})
	return pts
}

// generator runs greedy generations of one model.
type generator struct {
	m        *engine.Model
	be       *cpu.Backend
	tok      *tokenizer.Tokenizer
	ctx, max int
}

// result is one greedy generation.
type result struct {
	first []float32 // logits of the first next-token distribution
	out   []int     // generated tokens, without the end of sentence
	text  string
	eos   bool // stopped at the end-of-sentence token
}

// run prefills ids in a fresh session with steering st and generates up to
// g.max tokens greedily (temperature 0), stopping at the end of sentence
// or a full context.
func (g *generator) run(ids []int, st *engine.Steering) (result, error) {
	var r result
	if len(ids) >= g.ctx {
		return r, fmt.Errorf("prompt of %d tokens leaves no room in --ctx %d", len(ids), g.ctx)
	}
	s, err := engine.NewSession(g.m, g.be, engine.Options{Context: g.ctx, Steering: st})
	if err != nil {
		return r, err
	}
	if err := s.Prefill(ids); err != nil {
		return r, err
	}
	r.first = slices.Clone(s.Logits())
	eos := g.tok.Special(tokenizer.EOS)
	for len(r.out) < g.max {
		next := sample.Argmax(s.Logits())
		if next == eos {
			r.eos = true
			break
		}
		r.out = append(r.out, next)
		if len(r.out) == g.max || s.Pos() >= g.ctx {
			break
		}
		if err := s.Decode(next); err != nil {
			return r, err
		}
	}
	r.text = string(g.tok.Decode(r.out))
	return r, nil
}
