package main

import (
	"fmt"
	"io"

	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/harness"
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

// prefill evaluates ids on s, a session of a model of layers layers, in
// steps of prefillStep tokens, drawing a progress bar on stderr when there
// is more than one step. stop, when not nil, is asked between steps;
// prefill returns true when it said to stop, leaving the session with the
// tokens evaluated so far.
func prefill(s *engine.Session, layers int, ids []int, stderr io.Writer, stop func() bool) (bool, error) {
	if len(ids) <= prefillStep {
		return prefillSteps(s, layers, ids, nil, stop)
	}
	bar := progress.New(stderr, "ds4: prefill", int64(len(ids)), "")
	defer bar.Finish()
	return prefillSteps(s, layers, ids, bar.Add, stop)
}

// prefillSteps is prefill reporting its progress to add, when not nil,
// layer by layer: a step of the full model takes about a minute on a
// small CPU, too long for a bar that moves once per step.
func prefillSteps(s *engine.Session, layers int, ids []int, add func(int64), stop func() bool) (bool, error) {
	for start := 0; start < len(ids); start += prefillStep {
		if start > 0 && stop != nil && stop() {
			return true, nil
		}
		step := ids[start:min(len(ids), start+prefillStep)]
		// After layer l of the step, l/layers of its tokens count as done.
		done, layer := 0, 0
		if add != nil {
			s.SetLayerHook(func() {
				layer++
				n := len(step) * min(layer, layers) / layers
				add(int64(n - done))
				done = n
			})
		}
		err := s.Prefill(step)
		s.SetLayerHook(nil)
		if err != nil {
			return false, fmt.Errorf("prefill: %w", err)
		}
		if add != nil && done < len(step) {
			add(int64(len(step) - done))
		}
	}
	return false, nil
}

// logContextMemory reports the session buffers a context of ctx tokens
// needs, in upstream's startup line.
func logContextMemory(stderr io.Writer, p layout.Params, ctx int) {
	b, raw, comp := harness.ContextMemory(p, ctx)
	fmt.Fprintf(stderr, "ds4: context buffers %.2f MiB (ctx=%d, backend=cpu, prefill_chunk=%d, raw_kv_rows=%d, compressed_kv_rows=%d)\n",
		float64(b)/(1<<20), ctx, prefillStep, raw, comp)
}
