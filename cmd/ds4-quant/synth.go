package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/convert/synth"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/internal/cli"
	"github.com/ds4-go/ds4/internal/progress"
)

func runSynth(args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("synth", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	preset := fs.String("preset", "tiny", "model shape: tiny or flash")
	out := fs.StringP("out", "o", "", "output GGUF path (required)")
	recipe := fs.String("recipe", "q2", "routed expert types: q2 (IQ2_XXS gate/up, Q2_K down) or q4 (Q4_K)")
	seed := fs.Uint64("seed", 1, "random seed")
	workers := fs.Int("workers", 0, "generator goroutines (0: one per CPU)")
	layers := fs.Int("layers", 0, "number of layers (0: the preset's), the released ratio schedule")
	// Dimension overrides: 0 keeps the preset's value.
	dims := []struct {
		name, help string
		dst        func(*layout.Params) *int
	}{
		{"embd", "embedding_length", func(p *layout.Params) *int { return &p.Embd }},
		{"vocab", "vocab_size", func(p *layout.Params) *int { return &p.Vocab }},
		{"heads", "attention.head_count", func(p *layout.Params) *int { return &p.Heads }},
		{"head-dim", "attention.key_length and value_length", func(p *layout.Params) *int { return &p.HeadDim }},
		{"rope-dim", "rope.dimension_count", func(p *layout.Params) *int { return &p.RopeDim }},
		{"q-lora", "attention.q_lora_rank", func(p *layout.Params) *int { return &p.QLoraRank }},
		{"o-lora", "attention.output_lora_rank", func(p *layout.Params) *int { return &p.OLoraRank }},
		{"o-groups", "attention.output_group_count", func(p *layout.Params) *int { return &p.OGroups }},
		{"experts", "expert_count", func(p *layout.Params) *int { return &p.Experts }},
		{"experts-used", "expert_used_count", func(p *layout.Params) *int { return &p.ExpertsUsed }},
		{"expert-ff", "expert_feed_forward_length", func(p *layout.Params) *int { return &p.ExpertFF }},
		{"hash-layers", "hash_layer_count", func(p *layout.Params) *int { return &p.HashLayers }},
		{"window", "attention.sliding_window", func(p *layout.Params) *int { return &p.Window }},
		{"indexer-heads", "attention.indexer.head_count", func(p *layout.Params) *int { return &p.IndexerHeads }},
		{"indexer-dim", "attention.indexer.key_length", func(p *layout.Params) *int { return &p.IndexerDim }},
		{"indexer-top-k", "attention.indexer.top_k", func(p *layout.Params) *int { return &p.IndexerTopK }},
		{"hc", "hyper_connection.count", func(p *layout.Params) *int { return &p.HC }},
		{"ctx", "context_length", func(p *layout.Params) *int { return &p.ContextLength }},
	}
	vals := make([]int, len(dims))
	for i, d := range dims {
		fs.IntVar(&vals[i], d.name, 0, "override "+d.help)
	}
	ratios := fs.IntSlice("ratios", nil, "per-layer compression ratios (overrides the schedule; one per layer)")
	if err := cli.Parse(fs, args); err != nil {
		return cli.Usage(err)
	}
	if *out == "" || fs.NArg() != 0 {
		return cli.Usage(fmt.Errorf("need --out FILE and no positional arguments"))
	}
	if *workers < 0 {
		return cli.Usage(cli.FlagError(fs, "workers", "must be at least 0 (0: one per CPU)"))
	}
	if err := cli.OutputFile("out", *out); err != nil {
		return cli.Usage(err)
	}
	var p layout.Params
	switch *preset {
	case "tiny":
		p = layout.Tiny()
	case "flash":
		p = layout.Flash()
	default:
		return cli.Usage(cli.FlagError(fs, "preset", "must be tiny or flash"))
	}
	if *layers < 0 {
		return cli.Usage(cli.FlagError(fs, "layers", "must be at least 0 (0: the preset's)"))
	}
	if *layers > 0 {
		p.SetLayers(*layers)
		if *preset == "flash" {
			p.Name = fmt.Sprintf("DeepSeek-V4-Flash-%dL-slice", *layers)
		}
	}
	for i, d := range dims {
		if fs.Changed(d.name) {
			*d.dst(&p) = vals[i]
		}
	}
	if fs.Changed("head-dim") {
		p.ValueDim = p.HeadDim
	}
	if fs.Changed("ratios") {
		p.CompressRatios = *ratios
	}
	r, err := layout.ParseRecipe(*recipe)
	if err != nil {
		return cli.Usage(err)
	}
	if err := p.Validate(); err != nil {
		return cli.Usage(err)
	}
	if err := p.CheckRecipe(r); err != nil {
		return cli.Usage(err)
	}
	var total int64
	for _, t := range p.Tensors(r) {
		n, _ := t.Type.RowBytes(int(t.Dims[0]))
		total += int64(n) * int64(rowCount(t.Dims))
	}
	bar := progress.New(stderr, "synth", total, "B")
	start := time.Now()
	infos, err := synth.WriteFile(*out, synth.Options{Params: p, Recipe: r, Seed: *seed, Workers: *workers, Progress: bar.Add})
	if err != nil {
		return err
	}
	bar.Finish()
	st, err := os.Stat(*out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %s, %d layers, recipe %s, %d tensors, %d bytes in %.1fs\n",
		*out, p.Name, p.Layers, r.Name, len(infos), st.Size(), time.Since(start).Seconds())
	return nil
}

func rowCount(dims []uint64) uint64 {
	n := uint64(1)
	for _, d := range dims[1:] {
		n *= d
	}
	return n
}
