package harness

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/ds4-go/ds4/engine/sample"
	"github.com/ds4-go/ds4/engine/tokenizer"
)

// EncodeEvalPrompts encodes the prompt of every case (EncodeEvalPrompt)
// and checks that its tokens are within a vocabulary of vocab tokens.
func EncodeEvalPrompts(tok *tokenizer.Tokenizer, cases []EvalCase, think bool, vocab int) ([][]int, error) {
	prompts := make([][]int, len(cases))
	for i := range cases {
		prompts[i] = EncodeEvalPrompt(tok, &cases[i], think)
		for _, id := range prompts[i] {
			if id >= vocab {
				return nil, fmt.Errorf("case %s: prompt token %d is outside the model's vocabulary (%d)", cases[i].Name(), id, vocab)
			}
		}
	}
	return prompts, nil
}

// NewEvalSampler returns the sampler of a run with c's settings. A zero
// c.Seed is replaced by one drawn from the clock and the process id, and
// c.Seed is set to the seed used, for the trace and the results.
func NewEvalSampler(c *EvalConfig) *sample.Sampler {
	p := sample.Defaults()
	p.Temperature, p.TopP, p.MinP, p.Seed = c.Temperature, c.TopP, c.MinP, c.Seed
	if p.Seed == 0 {
		p.Seed = uint64(time.Now().UnixNano()) ^ uint64(os.Getpid())<<32
	}
	s := sample.New(p)
	c.Seed = s.Params().Seed
	return s
}

// RunAll runs the cases in order with their encoded prompts until one
// fails to run or ctx is done. The results hold every case, PENDING
// where it did not run; runtime is the time spent in Run. done, when set,
// sees each result as its case ends; an error from it stops the run. The
// error returned is Run's or done's.
func (e *Evaluator) RunAll(ctx context.Context, cases []EvalCase, prompts [][]int, done func(*EvalResult) error) (results []EvalResult, runtime time.Duration, err error) {
	results = make([]EvalResult, len(cases))
	for i := range cases {
		results[i] = EvalResult{Index: i, Case: &cases[i], Status: StatusPending, PromptTokens: len(prompts[i])}
	}
	for i := range cases {
		if ctx.Err() != nil {
			break
		}
		t0 := time.Now()
		r, err := e.Run(ctx, i, &cases[i], prompts[i])
		runtime += time.Since(t0)
		results[i] = r
		if done != nil {
			if derr := done(&results[i]); derr != nil {
				return results, runtime, derr
			}
		}
		if err != nil {
			return results, runtime, err
		}
	}
	return results, runtime, nil
}
