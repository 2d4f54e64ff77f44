package vectors

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/sample"
	"github.com/ds4-go/ds4/engine/tokenizer"
)

const officialDir = "testdata/official"

func TestParseOfficialVec(t *testing.T) {
	cases, err := ReadVecFile(filepath.Join(officialDir, "official.vec"))
	require.NoError(t, err)
	require.Len(t, cases, 5)
	c := cases[0]
	require.Equal(t, "short_italian_fact", c.ID)
	require.Equal(t, 16384, c.Ctx)
	require.Equal(t, "tests/test-vectors/prompts/short_italian_fact.txt", c.PromptPath)
	require.Len(t, c.Steps, 4)
	require.Equal(t, []byte("Ada"), c.Steps[0].Selected)
	require.Equal(t, []VecTop{{Bytes: []byte("Ada"), Logprob: 0}}, c.Steps[0].Top)
	require.Equal(t, []byte(" Lov"), c.Steps[1].Selected)
	require.Len(t, cases[2].Steps, 1)
	require.Equal(t, []byte("16"), cases[2].Steps[0].Selected)
	ctx := map[string]int{}
	for _, c := range cases {
		ctx[c.ID] = c.Ctx
	}
	require.Equal(t, map[string]int{"short_italian_fact": 16384, "short_code_completion": 4096,
		"short_reasoning_plain": 4096, "long_memory_archive": 16384, "long_code_audit": 16384}, ctx)
}

// TestRegenerateOfficialVec rebuilds the compact fixture from the manifest
// and the official JSON records with the fetcher's rules and compares
// bytes, and checks the manifest against the records and prompt files.
func TestRegenerateOfficialVec(t *testing.T) {
	got, err := RegenerateVec(officialDir, "tests/test-vectors")
	require.NoError(t, err)
	want, err := os.ReadFile(filepath.Join(officialDir, "official.vec"))
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))

	m, err := ReadManifest(officialDir)
	require.NoError(t, err)
	require.Equal(t, 20, m.TopLogprobs)
	require.Len(t, m.Prompts, 5)
	cases, err := ParseVec(bytes.NewReader(got))
	require.NoError(t, err)
	for i, e := range m.Prompts {
		o, err := ReadOfficial(filepath.Join(officialDir, e.OfficialFile))
		require.NoError(t, err)
		require.Equal(t, e.ID, o.ID)
		require.Len(t, o.Steps, e.Steps)
		require.Equal(t, e.ID, cases[i].ID)
		require.Len(t, cases[i].Steps, e.Steps)
		prompt, err := os.ReadFile(filepath.Join(officialDir, e.PromptFile))
		require.NoError(t, err)
		require.Equal(t, e.PromptChars, utf8.RuneCount(prompt), e.ID)
		require.Equal(t, o.Prompt, string(prompt))
		// The resolver finds upstream's repository-relative path here.
		p, err := ResolvePrompt(officialDir, cases[i].PromptPath)
		require.NoError(t, err)
		require.Equal(t, filepath.Join(officialDir, e.PromptFile), p)
	}
}

// TestOfficialPromptTokens checks the model-free part of the vectors: the
// chat encoding has the API's prompt_tokens and every expected token is
// one vocabulary entry (docs/formats/harness.md#official-json).
func TestOfficialPromptTokens(t *testing.T) {
	tok, err := tokenizer.Default()
	require.NoError(t, err)
	m, err := ReadManifest(officialDir)
	require.NoError(t, err)
	for _, e := range m.Prompts {
		o, err := ReadOfficial(filepath.Join(officialDir, e.OfficialFile))
		require.NoError(t, err)
		require.Len(t, ChatTokens(tok, o.Prompt), o.Usage.PromptTokens, e.ID)
		for i, s := range o.Steps {
			require.Equal(t, s.Token.Raw(), tok.TokenBytes(officialIDs[e.ID][i]), "%s step %d", e.ID, i)
		}
	}
}

// officialIDs are the vocabulary ids of the official greedy tokens
// (docs/formats/harness.md#official-json).
var officialIDs = map[string][]int{
	"short_italian_fact":    {108149, 47121, 317, 805},
	"short_code_completion": {9854, 69, 201, 3916},
	"short_reasoning_plain": {926},
	"long_memory_archive":   {10220, 37149, 8773, 52405},
	"long_code_audit":       {671, 1473, 2239, 4181},
}

func TestParseVecErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"step 0 41 1\n", "expected a case line"},
		{"case a 16 2 p.txt\nstep 0 41 0\nend\n", "step 1 missing"},
		{"case a 16 1 p.txt\nstep 0 41 1\ntop 41 0\n", "missing end"},
		{"case a 16 1 p.txt\nstep 0 41 1\ntop 41 0\ntop 42 0\nend\n", "more top lines"},
		{"case a 16 1 p.txt\nstep 1 41 0\nend\n", "bad step line"},
		{"case a 16 1 p.txt\nstep 0 4 0\nend\n", "token hex"},
		{"case a 16 1 p.txt\nstep 0 zz 0\nend\n", "token hex"},
		{"case a 16 1 p.txt\nstep 0 41 33\nend\n", "top count 33"},
		{"case a 16 17 p.txt\n", "17 steps"},
		{"case a 16 1 p.txt\nstep 0 41 1\ntop 41 x\nend\n", "bad logprob"},
		{"case a 16 1 p.txt\nfoo\nend\n", "unexpected line"},
		{"case a 16 1 p.txt\ntop 41 0\nend\n", "bad top line"},
		{"case a 16 1 p.txt\nstep 0 " + strings.Repeat("41", 129) + " 0\nend\n", "token hex"},
	} {
		_, err := ParseVec(strings.NewReader(tc.in))
		require.ErrorContains(t, err, tc.want, tc.in)
	}
	// Whitespace, comments, upper-case hex and a step reset are accepted.
	cases, err := ParseVec(strings.NewReader("# c\n\n  case a 8 1 p.txt  \nstep 0 4A 1\ntop 4a -0.5\nstep 0 4B 1\ntop 4b -1e-05\nend"))
	require.NoError(t, err)
	require.Equal(t, []VecCase{{ID: "a", Ctx: 8, PromptPath: "p.txt", Steps: []VecStep{{Selected: []byte("K"), Top: []VecTop{{[]byte("K"), -1e-5}}}}}}, cases)
	var b strings.Builder
	require.NoError(t, WriteVec(&b, cases))
	require.Contains(t, b.String(), "case a 8 1 p.txt\nstep 0 4b 1\ntop 4b -1e-05\nend\n")
}

func TestAcceptanceRule(t *testing.T) {
	want := VecStep{Selected: []byte("Ada"), Top: []VecTop{{[]byte("Ada"), 0}, {[]byte("La"), -2}}}
	tok := func(s string, lp float64) TopToken { return TopToken{ID: -1, Bytes: []byte(s), Logprob: lp} }
	pass := Step{Selected: tok("Ada", -0.1), Top: []TopToken{tok("Ada", -0.1), tok("Una", -1), tok("La", -5.9)}}
	require.Empty(t, CheckStep(0, want, pass, AcceptTolerance))

	// Selected bytes differ.
	fs := CheckStep(1, want, Step{Selected: tok("Ad", -0.1), Top: pass.Top}, AcceptTolerance)
	require.Len(t, fs, 1)
	require.Equal(t, "step 1: selected token mismatch: local \"Ad\", official \"Ada\"", fs[0].String())
	// An official token outside the local top-20.
	var top []TopToken
	for range 20 {
		top = append(top, tok("x", -9))
	}
	top = append([]TopToken{tok("Ada", 0)}, top...) // "La" is 22nd
	fs = CheckStep(0, want, Step{Selected: tok("Ada", 0), Top: append(top, tok("La", -2))}, AcceptTolerance)
	require.Len(t, fs, 1)
	require.Contains(t, fs[0].Msg, "\"La\" missing locally")
	// Too far: |-6.01 - (-2)| > 4.
	fs = CheckStep(0, want, Step{Selected: tok("Ada", 0), Top: []TopToken{tok("Ada", 0), tok("La", -6.01)}}, AcceptTolerance)
	require.Len(t, fs, 1)
	require.Contains(t, fs[0].Msg, "logprob delta too high")
	// Case level: a missing step is a failure.
	c := VecCase{ID: "c", Steps: []VecStep{want, want}}
	r := CheckCase(c, []Step{pass}, AcceptTolerance)
	require.False(t, r.Passed())
	require.Equal(t, "FAIL", r.Status())
	require.Contains(t, r.Failures[0].Msg, "step missing")
	r = CheckCase(c, []Step{pass, pass}, AcceptTolerance)
	require.True(t, r.Passed())
}

// stepSource replays fixed steps.
type stepSource map[string][]Step

func (s stepSource) Continue(_ context.Context, c VecCase, prompt string, steps, k int) ([]Step, error) {
	return s[c.ID], nil
}

// TestRunOfficialSynthetic runs the official fixture against a source that
// answers the official tokens (pass) and one that answers others (fail).
func TestRunOfficialSynthetic(t *testing.T) {
	cases, err := ReadVecFile(filepath.Join(officialDir, "official.vec"))
	require.NoError(t, err)
	good, bad := stepSource{}, stepSource{}
	for _, c := range cases {
		for _, s := range c.Steps {
			st := Step{Selected: TopToken{ID: -1, Bytes: s.Selected, Logprob: -0.5}}
			st.Top = []TopToken{st.Selected}
			good[c.ID] = append(good[c.ID], st)
			wrong := Step{Selected: TopToken{ID: -1, Bytes: []byte("?"), Logprob: -0.1}}
			wrong.Top = []TopToken{wrong.Selected, {ID: -1, Bytes: s.Selected, Logprob: -4.6}}
			bad[c.ID] = append(bad[c.ID], wrong)
		}
	}
	res := RunCases(context.Background(), good, cases, RunOptions{Dir: officialDir})
	require.Len(t, res, 5)
	for _, r := range res {
		if r.ID == "long_memory_archive" {
			require.Equal(t, "skipped", r.Status())
			continue
		}
		require.True(t, r.Passed(), "%s: %v %v", r.ID, r.Err, r.Failures)
	}
	res = RunCases(context.Background(), bad, cases, RunOptions{Dir: officialDir, All: true, Only: []string{"short_code_completion"}})
	require.Len(t, res, 1)
	require.Len(t, res[0].Failures, 8) // 4 steps × (selected mismatch + delta 4.6)
	res = RunCases(context.Background(), good, cases, RunOptions{Dir: t.TempDir(), Only: []string{"short_code_completion"}})
	require.ErrorContains(t, res[0].Err, "not found")
}

// TestEngineSourceTiny runs the engine runner on the tiny model with a
// case made from its own greedy output (passes) and perturbed copies
// (fail), covering the local path end to end.
func TestEngineSourceTiny(t *testing.T) {
	m, err := engine.OpenTiny()
	require.NoError(t, err)
	tok, err := tokenizer.Default()
	require.NoError(t, err)
	be := cpu.New(2)
	defer be.Close()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.txt"), []byte("Chi era Ada Lovelace?"), 0o644))
	var saved [][]float32
	src := &EngineSource{Model: m, Backend: be, Tokenizer: tok, Logits: func(c VecCase, i int, l []float32) { saved = append(saved, l) }}
	c := VecCase{ID: "tiny", Ctx: 64, PromptPath: "p.txt", Steps: make([]VecStep, 3)}
	got, err := src.Continue(context.Background(), c, "Chi era Ada Lovelace?", 3, AcceptTopK)
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.Len(t, saved, 3)
	for i, s := range got {
		require.Len(t, s.Top, AcceptTopK)
		require.Equal(t, s.Selected.ID, s.Top[0].ID)
		require.Equal(t, tok.TokenBytes(s.Top[0].ID), s.Top[0].Bytes)
		c.Steps[i] = VecStep{Selected: s.Selected.Bytes}
		for _, a := range s.Top[:3] {
			c.Steps[i].Top = append(c.Steps[i].Top, VecTop{Bytes: a.Bytes, Logprob: a.Logprob + 1})
		}
	}
	// The steps are a hand-written greedy loop's, logits included.
	h, err := engine.NewSession(m, be, engine.Options{Context: 64})
	require.NoError(t, err)
	require.NoError(t, h.Prefill(ChatTokens(tok, "Chi era Ada Lovelace?")))
	for i, s := range got {
		require.Equal(t, h.Logits(), saved[i], "step %d", i)
		id := sample.Argmax(h.Logits())
		require.Equal(t, id, s.Selected.ID, "step %d", i)
		require.Equal(t, float64(sample.Logprob(h.Logits(), id)), s.Selected.Logprob)
		require.NoError(t, h.Decode(id))
	}
	// A canceled context stops the steps.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = src.Continue(ctx, c, "Chi era Ada Lovelace?", 3, AcceptTopK)
	require.ErrorIs(t, err, context.Canceled)

	res := RunCases(context.Background(), src, []VecCase{c}, RunOptions{Dir: dir})
	require.True(t, res[0].Passed(), "%v %v", res[0].Err, res[0].Failures)
	// Official logprobs 5 nats off fail; so does another selected token.
	c.Steps[1].Top[2].Logprob -= 6
	c.Steps[2].Selected = []byte("\x00not a token")
	res = RunCases(context.Background(), src, []VecCase{c}, RunOptions{Dir: dir})
	require.Len(t, res[0].Failures, 2)
	require.Contains(t, res[0].Failures[0].String(), "step 1: logprob delta too high")
	require.Contains(t, res[0].Failures[1].String(), "step 2: selected token mismatch")
	// A context too small for the prompt is an error.
	c.Ctx = 8
	res = RunCases(context.Background(), src, []VecCase{c}, RunOptions{Dir: dir})
	require.ErrorContains(t, res[0].Err, "do not fit")
}

// TestOfficialVectorsRealModel is upstream's --logprob-vectors group: it
// runs only when DS4_MODEL names a DeepSeek V4 Flash GGUF.
func TestOfficialVectorsRealModel(t *testing.T) {
	path := os.Getenv("DS4_MODEL")
	if path == "" {
		t.Skip("DS4_MODEL is not set: set DS4_MODEL to a DeepSeek V4 Flash GGUF to run the official logprob vectors")
	}
	m, err := engine.Open(path)
	require.NoError(t, err)
	defer m.File.Close()
	tok, err := tokenizer.Default()
	require.NoError(t, err)
	be := cpu.New(0)
	defer be.Close()
	cases, err := ReadVecFile(filepath.Join(officialDir, "official.vec"))
	require.NoError(t, err)
	src := &EngineSource{Model: m, Backend: be, Tokenizer: tok}
	for _, r := range RunCases(context.Background(), src, cases, RunOptions{Dir: officialDir, Progress: func(c VecCase) { t.Logf("vector %s", c.ID) }}) {
		if r.Skipped != "" {
			t.Logf("vector %s skipped (%s)", r.ID, r.Skipped)
			continue
		}
		require.NoError(t, r.Err, r.ID)
		require.Empty(t, r.Failures, r.ID)
	}
}
