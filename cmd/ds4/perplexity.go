package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/harness"
	"github.com/ds4-go/ds4/internal/cli"
	"github.com/ds4-go/ds4/internal/progress"
)

// perplexityPrefix is the number of tokens evaluated before scoring
// starts, as upstream's fixed prefix.
const perplexityPrefix = 32

// validatePerplexity checks the flags of --perplexity-file, when given,
// before anything is loaded.
func validatePerplexity(fs *pflag.FlagSet, g *genFlags, path string) error {
	switch {
	case path == "":
		return nil
	case fs.Changed("prompt") || g.promptFile != "":
		return errors.New("--perplexity-file does not use -p/--prompt-file")
	case g.ctx <= perplexityPrefix:
		return cli.FlagError(fs, "ctx", "must be more than %d with --perplexity-file (the fixed prefix)", perplexityPrefix)
	}
	return cli.InputFile("perplexity-file", path)
}

// runPerplexity is upstream's --perplexity-file (docs/cli.md#perplexity): the
// file is tokenized as plain text, its first 32 tokens are prefilled and
// the following ones, at most -n and ctx − 32 of them, are scored
// teacher-forced; one line of totals goes to stdout.
// The flags are checked (validatePerplexity) beforehand.
func runPerplexity(g *genFlags, path string, stdout, stderr io.Writer) error {
	text, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	m, tok, err := g.load(stderr)
	if err != nil {
		return err
	}
	ids := tok.Encode(string(text))
	if len(ids) <= perplexityPrefix {
		return fmt.Errorf("--perplexity-file needs more than %d tokens (%s has %d)", perplexityPrefix, path, len(ids))
	}
	for _, id := range ids {
		if id >= m.Params.Vocab {
			return fmt.Errorf("token %d of %s is outside the model's vocabulary (%d)", id, path, m.Params.Vocab)
		}
	}
	scored := min(len(ids)-perplexityPrefix, g.tokens, g.ctx-perplexityPrefix)
	if scored <= 0 {
		return fmt.Errorf("context %d is too small for perplexity scoring", g.ctx)
	}
	be := cpu.New(g.threads)
	defer be.Close()
	logContextMemory(stderr, m.Params, g.ctx)
	s, err := engine.NewSession(m, be, g.options(g.ctx))
	if err != nil {
		return err
	}
	if err := prefill(context.Background(), s, ids[:perplexityPrefix], stderr, nil); err != nil {
		return err
	}
	bar := progress.New(stderr, "ds4: perplexity", int64(scored), " tok")
	sc, err := harness.ScoreTargets(countingForcer{s, bar}, ids[perplexityPrefix:perplexityPrefix+scored])
	if err != nil {
		return err
	}
	bar.Add(1) // the last token is scored without being evaluated
	bar.Finish()
	avg := sc.NLL / float64(scored)
	fmt.Fprintf(stdout, "tokens=%d scored=%d nll=%.9f avg_nll=%.9f ppl=%.9f\n", len(ids), scored, sc.NLL, avg, math.Exp(avg))
	return nil
}

// countingForcer is a session that counts the tokens it evaluates on a
// progress bar.
type countingForcer struct {
	*engine.Session
	bar *progress.Bar
}

// Decode evaluates token and counts it.
func (c countingForcer) Decode(token int) error {
	if err := c.Session.Decode(token); err != nil {
		return err
	}
	c.bar.Add(1)
	return nil
}
