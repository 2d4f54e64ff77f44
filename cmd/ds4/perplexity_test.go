package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/tokenizer"
)

const pplText = "../../engine/tokenizer/testdata/promessi_sposi_excerpt.txt"

// TestPerplexityFile scores the tiny model on a text and checks the line
// against an independent computation: one prefill of the scored span with
// every position's logits, log-softmax in float64 here.
func TestPerplexityFile(t *testing.T) {
	m, err := engine.OpenTiny()
	require.NoError(t, err)
	tok, err := tokenizer.Default()
	require.NoError(t, err)
	text, err := os.ReadFile(pplText)
	require.NoError(t, err)
	ids := tok.Encode(string(text))
	for _, tc := range []struct {
		args   []string
		scored int
	}{
		{[]string{"-n", "12"}, 12},
		{[]string{"--ctx", "40"}, 8}, // ctx − 32
	} {
		code, out, errOut := runCmd("", append([]string{"--perplexity-file", pplText}, tc.args...)...)
		require.Equal(t, 0, code, errOut)

		be := cpu.New(0)
		s, err := engine.NewSession(m, be, engine.Options{Context: 64})
		require.NoError(t, err)
		n := perplexityPrefix + tc.scored - 1 // the last scored token is not evaluated
		all := make([]float32, n*m.Params.Vocab)
		require.NoError(t, s.PrefillAll(ids[:n], all))
		be.Close()
		var nll float64
		for j := range tc.scored {
			row := all[(perplexityPrefix-1+j)*m.Params.Vocab:][:m.Params.Vocab]
			nll -= logSoftmax(row, ids[perplexityPrefix+j])
		}

		var tokens, scored int
		var gotNLL, avg, ppl float64
		_, err = fmt.Sscanf(out, "tokens=%d scored=%d nll=%f avg_nll=%f ppl=%f\n", &tokens, &scored, &gotNLL, &avg, &ppl)
		require.NoError(t, err, out)
		require.Regexp(t, `^tokens=\d+ scored=\d+ nll=\d+\.\d{9} avg_nll=\d+\.\d{9} ppl=\d+\.\d{9}\n$`, out)
		require.Equal(t, len(ids), tokens)
		require.Equal(t, tc.scored, scored)
		require.InDelta(t, nll, gotNLL, 1e-5*float64(scored))
		require.InDelta(t, gotNLL/float64(scored), avg, 1e-9)
		require.InDelta(t, math.Exp(avg), ppl, 1e-6*ppl)
	}

	short := filepath.Join(t.TempDir(), "short.txt")
	require.NoError(t, os.WriteFile(short, []byte("only a few words"), 0o644))
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--perplexity-file", short}, 1, "needs more than 32 tokens"},
		{[]string{"--perplexity-file", pplText, "--ctx", "32"}, 2, "--ctx 32: must be more than 32 with --perplexity-file"},
		{[]string{"--perplexity-file", pplText, "-p", "hi"}, 2, "does not use -p/--prompt-file"},
		{[]string{"--perplexity-file", filepath.Join(t.TempDir(), "missing.txt")}, 2, "missing.txt: no such file"},
	} {
		code, _, errOut := runCmd("", tc.args...)
		require.Equal(t, tc.code, code, errOut)
		require.Contains(t, errOut, tc.want)
	}
}

// logSoftmax returns ln softmax(row)[id] in float64.
func logSoftmax(row []float32, id int) float64 {
	mx := math.Inf(-1)
	for _, v := range row {
		mx = math.Max(mx, float64(v))
	}
	var sum float64
	for _, v := range row {
		sum += math.Exp(float64(v) - mx)
	}
	return float64(row[id]) - mx - math.Log(sum)
}
