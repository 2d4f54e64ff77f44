package main

import (
	"context"
	"fmt"
	"io"

	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/internal/progress"
)

// prefillStep is the number of tokens handed to the session at a time
// between progress reports and interrupt checks. It equals the engine's
// own prefill chunk, so the steps cost no speed (a smaller step would
// route fewer tokens to each expert and lose the four-token kernels), and
// the engine's prefill gives the same result however the tokens are
// split, so a step costs only one extra output head (the logits of its
// last token), small beside a chunk of tokens through every layer.
const prefillStep = engine.PrefillChunk

// prefill evaluates ids on s in steps of prefillStep tokens, drawing a
// progress bar on stderr when there is more than one step. after, when not
// nil, is called after each step with the session's position. When ctx is
// done between steps, prefill returns an error wrapping its cause and the
// session holds the steps evaluated so far.
func prefill(ctx context.Context, s *engine.Session, ids []int, stderr io.Writer, after func(pos int)) error {
	if len(ids) <= prefillStep {
		return prefillSteps(ctx, s, ids, nil, after)
	}
	bar := progress.New(stderr, "ds4: prefill", int64(len(ids)), "")
	defer bar.Finish()
	return prefillSteps(ctx, s, ids, bar.Add, after)
}

// prefillSteps is prefill reporting its progress to add, when not nil,
// layer by layer: a step of the full model takes about a minute on a
// small CPU, too long for a bar that moves once per step.
func prefillSteps(ctx context.Context, s *engine.Session, ids []int, add func(int64), after func(pos int)) error {
	done := s.Pos()
	report := func(pos int) {
		if add != nil && pos > done {
			add(int64(pos - done))
			done = pos
		}
	}
	opt := engine.PrefillOptions{Chunk: prefillStep, AfterChunk: func(pos int) error {
		report(pos)
		if after != nil {
			after(pos)
		}
		return nil
	}}
	if add != nil {
		opt.Progress = report
	}
	if err := s.PrefillChunks(ctx, ids, opt); err != nil {
		return fmt.Errorf("prefill: %w", err)
	}
	return nil
}

// logContextMemory reports the session buffers a context of ctx tokens
// needs, in upstream's startup line.
func logContextMemory(stderr io.Writer, p layout.Params, ctx int) {
	b, raw, comp := engine.ContextMemory(p, ctx)
	fmt.Fprintf(stderr, "ds4: context buffers %.2f MiB (ctx=%d, backend=cpu, prefill_chunk=%d, raw_kv_rows=%d, compressed_kv_rows=%d)\n",
		float64(b)/(1<<20), ctx, prefillStep, raw, comp)
}
