package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/harness"
	"github.com/ds4-go/ds4/internal/cli"
)

// imatrixFlags are the flags of imatrix collection (docs/formats/harness.md#collection).
type imatrixFlags struct {
	dataset, out          string
	maxPrompts, maxTokens int
}

// addImatrixFlags registers the imatrix flags on fs.
func addImatrixFlags(fs *pflag.FlagSet) *imatrixFlags {
	im := &imatrixFlags{}
	fs.StringVar(&im.dataset, "imatrix-dataset", "", "collect a routed-expert importance matrix over the prompts of FILE (needs --imatrix-out)")
	fs.StringVar(&im.out, "imatrix-out", "", "write the importance matrix to FILE (llama.cpp legacy .dat)")
	fs.IntVar(&im.maxPrompts, "imatrix-max-prompts", 0, "collect at most N prompts (0: all)")
	fs.IntVar(&im.maxTokens, "imatrix-max-tokens", 0, "collect at most N tokens (0: unlimited)")
	return im
}

// requested reports whether imatrix collection was asked for.
func (im *imatrixFlags) requested() bool { return im.dataset != "" || im.out != "" }

// validate checks the imatrix flags before anything is loaded.
func (im *imatrixFlags) validate(fs *pflag.FlagSet, g *genFlags) error {
	if !im.requested() {
		return nil
	}
	switch {
	case im.dataset == "" || im.out == "":
		return errors.New("--imatrix-dataset and --imatrix-out must be given together")
	case fs.Changed("prompt") || g.promptFile != "":
		return errors.New("--imatrix-dataset takes no prompt (-p or --prompt-file)")
	case im.maxPrompts < 0:
		return cli.FlagError(fs, "imatrix-max-prompts", "must be at least 0 (0: all)")
	case im.maxTokens < 0:
		return cli.FlagError(fs, "imatrix-max-tokens", "must be at least 0 (0: unlimited)")
	}
	if err := cli.InputFile("imatrix-dataset", im.dataset); err != nil {
		return err
	}
	return cli.OutputFile("imatrix-out", im.out)
}

// runImatrix collects an importance matrix over the dataset's prompts with
// the model, context and threads of g, and writes it.
// The flags are checked (validate) beforehand.
func runImatrix(g *genFlags, im *imatrixFlags, stderr io.Writer) error {
	b, err := os.ReadFile(im.dataset)
	if err != nil {
		return fmt.Errorf("imatrix dataset: %w", err)
	}
	texts := harness.SplitImatrixDataset(string(b))
	if len(texts) == 0 {
		return fmt.Errorf("--imatrix-dataset %s: has no prompts", im.dataset)
	}
	m, err := g.openModel(stderr)
	if err != nil {
		return err
	}
	tok, err := tokenizer.Default()
	if err != nil {
		return err
	}
	// Tokenize only what the limits let through: a full dataset is
	// millions of tokens.
	var prompts [][]int
	budget := im.maxTokens
	for _, text := range texts {
		if im.maxPrompts > 0 && len(prompts) == im.maxPrompts || im.maxTokens > 0 && budget <= 0 {
			break
		}
		ids := tok.EncodeSpecial(text)
		budget -= min(len(ids), g.ctx)
		prompts = append(prompts, ids)
	}
	be := cpu.New(g.threads)
	defer be.Close()
	fmt.Fprintf(stderr, "ds4: collecting routed-MoE imatrix from %s (%d prompts in the dataset)\n", im.dataset, len(texts))
	mat, st, err := harness.CollectImatrix(m, be, prompts, harness.ImatrixOptions{
		Context:    g.ctx,
		MaxPrompts: im.maxPrompts,
		MaxTokens:  im.maxTokens,
		Dataset:    im.dataset,
		Log:        stderr,
	})
	if err != nil {
		return err
	}
	if err := mat.WriteFile(im.out); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "ds4: wrote imatrix %s from %d prompts, %d tokens, %d routed expert observations\n", im.out, st.Prompts, st.Tokens, st.Observations)
	return nil
}
