package engine

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine/layout"
)

// batchPrompts are the prompt lengths of the sequences of the batch
// tests: empty, inside the 16-row window, past it, past the indexer's
// 8 compressed rows (position 36 on), and just before the ratio-16 and
// ratio-128 windows close, so the batched steps cross those boundaries.
var batchPrompts = []int{0, 3, 13, 30, 37, 62, 125, 140}

// batchSteps is the number of batched steps each test runs.
const batchSteps = 4

// seqTokens returns sequence i's prompt and step tokens, distinct per
// sequence.
func seqTokens(i, vocab int) []int {
	toks := make([]int, batchPrompts[i]+batchSteps)
	for j := range toks {
		toks[j] = (j*7919 + 13 + 101*i) % vocab
	}
	return toks
}

// seqOptions are sequence i's session options: most default, one with
// the reference numerics, one steered, one capturing and one observing
// its experts, so that per-row options are exercised.
func seqOptions(p layout.Params, i int) Options {
	opt := Options{Context: 256}
	switch i {
	case 2:
		opt.Numerics = NumericsOfficial
	case 3:
		opt.Capture = &Capture{Attn: true}
	case 5:
		opt.Steering = &Steering{Dir: unitDirs(p, 3), FFN: 0.5, Attn: -0.25}
	case 6:
		opt.Experts = &expertLog{layers: make([][][3]uint64, p.Layers)}
	}
	return opt
}

// stepResult is what a decode step leaves in a session: its logits, its
// capture rows and its expert evaluations (each nil without one).
type stepResult struct {
	logits  []uint32
	capture []uint32
	experts [][][3]uint64
}

// takeResult returns the results of the step s just ran and clears its
// expert log.
func takeResult(s *Session) stepResult {
	r := stepResult{logits: bitsOf32(s.Logits())}
	if c := s.opt.Capture; c != nil {
		r.capture = bitsOf32(c.Rows)
	}
	if l, ok := s.opt.Experts.(*expertLog); ok {
		r.experts = l.layers
		l.layers = make([][][3]uint64, len(l.layers))
	}
	return r
}

// soloRefs decodes every sequence alone on m and returns, per sequence,
// the results of each step.
func soloRefs(t testing.TB, m *Model, be backends.Backend) [][]stepResult {
	t.Helper()
	refs := make([][]stepResult, len(batchPrompts))
	for i, n := range batchPrompts {
		s, err := NewSession(m, be, seqOptions(m.Params, i))
		require.NoError(t, err)
		toks := seqTokens(i, m.Params.Vocab)
		require.NoError(t, s.Prefill(toks[:n]))
		takeResult(s)
		for _, tok := range toks[n:] {
			require.NoError(t, s.Decode(tok))
			refs[i] = append(refs[i], takeResult(s))
		}
	}
	return refs
}

// batchSessions returns a session per sequence on m, each with its prompt
// evaluated, and snapshots of them to restore.
func batchSessions(t testing.TB, m *Model, be backends.Backend) ([]*Session, []*Snapshot) {
	t.Helper()
	var ss []*Session
	var snaps []*Snapshot
	for i, n := range batchPrompts {
		s, err := NewSession(m, be, seqOptions(m.Params, i))
		require.NoError(t, err)
		require.NoError(t, s.Prefill(seqTokens(i, m.Params.Vocab)[:n]))
		ss, snaps = append(ss, s), append(snaps, s.Snapshot())
	}
	return ss, snaps
}

// checkBatches runs, for N = 1…8, batchSteps DecodeBatch steps over N of
// the sequences (a different subset and order for each N) on m and
// requires every session's tokens and step results after every step to be
// those of decoding it alone (refs).
func checkBatches(t *testing.T, m *Model, be backends.Backend, refs [][]stepResult) {
	t.Helper()
	ss, snaps := batchSessions(t, m, be)
	v := m.Params.Vocab
	for n := 1; n <= len(ss); n++ {
		idx := make([]int, n)
		batch := make([]*Session, n)
		for k := range n {
			idx[k] = (n + 3*k) % len(ss)
			if n%2 == 0 {
				idx[k] = (n + k) % len(ss)
			}
			batch[k] = ss[idx[k]]
			require.NoError(t, batch[k].Restore(snaps[idx[k]]))
			takeResult(batch[k])
		}
		require.Len(t, batch, len(uniq(idx)), "N=%d: sequences %v", n, idx)
		toks := make([]int, n)
		for step := range batchSteps {
			for k, i := range idx {
				toks[k] = seqTokens(i, v)[batchPrompts[i]+step]
			}
			require.NoError(t, DecodeBatch(batch, toks), "N=%d step %d", n, step)
			for k, i := range idx {
				s := batch[k]
				require.Equal(t, seqTokens(i, v)[:batchPrompts[i]+step+1], s.Tokens(), "N=%d step %d sequence %d", n, step, i)
				require.Equal(t, refs[i][step], takeResult(s), "N=%d step %d sequence %d (prompt %d)", n, step, i, batchPrompts[i])
			}
		}
	}
}

func uniq(v []int) []int { return slices.Compact(slices.Sorted(slices.Values(v))) }

// TestDecodeBatchMatchesDecode checks that DecodeBatch over N = 1…8
// sessions at different positions (some past the window, the compression
// boundaries and the indexer's threshold; one with other numerics, one
// steered, one capturing, one observing its experts) gives each session
// the logits, capture and expert evaluations of decoding it alone bit for
// bit, on the tiny model and on q2 and q4 models with hash layers and
// ratio-4, -16 and -128 layers.
func TestDecodeBatchMatchesDecode(t *testing.T) {
	ratios := func(p *layout.Params) { p.CompressRatios = []int{0, 0, 4, 16, 4, 128} }
	for _, c := range []struct {
		name  string
		model func(t *testing.T) *Model
	}{
		{"tiny", func(t *testing.T) *Model {
			m, err := OpenTiny()
			require.NoError(t, err)
			return m
		}},
		{"q2", func(t *testing.T) *Model { return tinyModel(t, layout.RecipeQ2, ratios) }},
		{"q4", func(t *testing.T) *Model { return tinyModel(t, layout.RecipeQ4, ratios) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := c.model(t)
			require.Positive(t, m.Params.HashLayers)
			be := cpu.New(2)
			defer be.Close()
			checkBatches(t, m, be, soloRefs(t, m, be))
		})
	}
}

// pieces splits sequence i's tokens (seqTokens) into the parts a mixed
// batch evaluates, step by step: lengths from 1 (a decode row) to 17 that
// vary with the sequence and the step.
func pieces(i, vocab int) [][]int {
	toks := seqTokens(i, vocab)
	var out [][]int
	for step := 0; len(toks) > 0; step++ {
		n := min(len(toks), 1+(5*i+7*step)%17)
		if (i+step)%3 == 0 {
			n = 1
		}
		out, toks = append(out, toks[:n]), toks[n:]
	}
	return out
}

// TestEvalBatchMatchesPrefill checks that EvalBatch steps in which some
// sessions prefill several tokens and others one, at different positions
// and with per-session options, leave every session the tokens, logits,
// capture and expert evaluations of evaluating its parts alone, bit for
// bit; sessions leave the batch as their tokens run out.
func TestEvalBatchMatchesPrefill(t *testing.T) {
	ratios := func(p *layout.Params) { p.CompressRatios = []int{0, 0, 4, 16, 4, 128} }
	m := tinyModel(t, layout.RecipeQ2, ratios)
	be := cpu.New(2)
	defer be.Close()
	v := m.Params.Vocab
	var refs [][]stepResult
	var parts [][][]int
	var ss []*Session
	for i := range batchPrompts {
		solo, err := NewSession(m, be, seqOptions(m.Params, i))
		require.NoError(t, err)
		parts = append(parts, pieces(i, v))
		var r []stepResult
		for _, part := range parts[i] {
			require.NoError(t, solo.Prefill(part))
			r = append(r, takeResult(solo))
		}
		refs = append(refs, r)
		s, err := NewSession(m, be, seqOptions(m.Params, i))
		require.NoError(t, err)
		ss = append(ss, s)
	}
	mixed := false
	for step := 0; ; step++ {
		var batch []*Session
		var toks [][]int
		var idx []int
		for i, s := range ss {
			if step < len(parts[i]) {
				batch, toks, idx = append(batch, s), append(toks, parts[i][step]), append(idx, i)
			}
		}
		if len(batch) == 0 {
			break
		}
		lens := map[bool]bool{}
		for _, tk := range toks {
			lens[len(tk) == 1] = true
		}
		mixed = mixed || len(lens) == 2
		require.NoError(t, EvalBatch(batch, toks), "step %d", step)
		for k, i := range idx {
			s := batch[k]
			require.Equal(t, slices.Concat(parts[i][:step+1]...), s.Tokens(), "step %d sequence %d", step, i)
			require.Equal(t, refs[i][step], takeResult(s), "step %d sequence %d at %d", step, i, s.Pos())
		}
	}
	require.True(t, mixed, "no step mixed one-token and longer parts")
}

// TestDecodeBatchStreaming checks that with the routed experts streamed
// through a cache of 2 slots (so the batch's experts run in many groups)
// DecodeBatch still gives the mapped model's solo logits bit for bit, and
// that one step acquires each expert of the batch's union once per layer.
func TestDecodeBatchStreaming(t *testing.T) {
	be := cpu.New(2)
	defer be.Close()
	for _, r := range []layout.Recipe{layout.RecipeQ2, layout.RecipeQ4} {
		t.Run(r.Name, func(t *testing.T) {
			path := tinyFile(t, r)
			mapped, err := Open(path)
			require.NoError(t, err)
			defer mapped.File.Close()
			refs := soloRefs(t, mapped, be)
			m := openStreamed(t, path, Open, StreamOptions{Slots: 2})
			checkBatches(t, m, be, refs)

			ss, _ := batchSessions(t, m, be)
			union := &expertUnion{}
			for _, s := range ss {
				s.opt.Experts = union
			}
			toks := make([]int, len(ss))
			for i := range ss {
				toks[i] = seqTokens(i, m.Params.Vocab)[batchPrompts[i]]
			}
			before := m.ExpertCache().Stats()
			require.NoError(t, DecodeBatch(ss, toks))
			after := m.ExpertCache().Stats()
			require.Equal(t, int64(len(union.seen)), after.Hits+after.Misses-before.Hits-before.Misses)
		})
	}
}

// expertUnion records the distinct (layer, expert) pairs evaluated.
type expertUnion struct{ seen map[[2]int]bool }

func (u *expertUnion) ObserveExpert(il, e int, in, mid []float32) {
	if u.seen == nil {
		u.seen = map[[2]int]bool{}
	}
	u.seen[[2]int{il, e}] = true
}

// sessionState is what DecodeBatch may change in a session.
type sessionState struct {
	tokens []int
	logits []uint32
}

func stateOf(s *Session) sessionState {
	return sessionState{slices.Clone(s.Tokens()), bitsOf32(s.Logits())}
}

// TestDecodeBatchErrors checks that DecodeBatch refuses mismatched
// lengths, nil and repeated sessions, sessions of another model or
// backend, a full session and tokens outside the vocabulary, and that a
// refused batch leaves every session unchanged.
func TestDecodeBatchErrors(t *testing.T) {
	m := tinyModel(t, layout.RecipeQ2, nil)
	other := tinyModel(t, layout.RecipeQ2, nil)
	be, be2 := cpu.New(2), cpu.New(1)
	defer be.Close()
	defer be2.Close()
	v := m.Params.Vocab
	session := func(m *Model, be backends.Backend, ctx, n int) *Session {
		s, err := NewSession(m, be, Options{Context: ctx})
		require.NoError(t, err)
		require.NoError(t, s.Prefill(testTokens(n, v)))
		return s
	}
	a, b := session(m, be, 64, 5), session(m, be, 64, 9)
	full := session(m, be, 8, 8)
	otherModel, otherBackend := session(other, be, 64, 3), session(m, be2, 64, 3)
	all := []*Session{a, b, full, otherModel, otherBackend}
	for _, c := range []struct {
		name string
		ss   []*Session
		toks []int
		full bool // the error is ErrContextFull
	}{
		{"lengths", []*Session{a, b}, []int{1}, false},
		{"nil first", []*Session{nil, a}, []int{1, 2}, false},
		{"nil", []*Session{a, nil}, []int{1, 2}, false},
		{"repeated", []*Session{a, b, a}, []int{1, 2, 3}, false},
		{"model", []*Session{a, otherModel}, []int{1, 2}, false},
		{"backend", []*Session{a, otherBackend}, []int{1, 2}, false},
		{"full", []*Session{a, b, full}, []int{1, 2, 3}, true},
		{"full alone", []*Session{full}, []int{1}, true},
		{"negative token", []*Session{a, b}, []int{1, -1}, false},
		{"token past vocabulary", []*Session{a, b}, []int{v, 1}, false},
		{"token alone", []*Session{b}, []int{v}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var want []sessionState
			for _, s := range all {
				want = append(want, stateOf(s))
			}
			err := DecodeBatch(c.ss, c.toks)
			require.Error(t, err)
			if c.full {
				require.ErrorIs(t, err, ErrContextFull)
			}
			for i, s := range all {
				require.Equal(t, want[i], stateOf(s), "session %d", i)
			}
		})
	}
	want := stateOf(a)
	require.NoError(t, DecodeBatch(nil, nil))
	require.Equal(t, want, stateOf(a))

	// EvalBatch's own: a session given no token, tokens past the context.
	for _, c := range []struct {
		name string
		toks [][]int
		full bool
	}{
		{"lengths", [][]int{{1}}, false},
		{"no token", [][]int{{1, 2}, {}}, false},
		{"past the context", [][]int{{1}, testTokens(64-9+1, v)}, true},
		{"a bad token among good ones", [][]int{{1, 2, v}, {3}}, false},
	} {
		t.Run("EvalBatch "+c.name, func(t *testing.T) {
			wantA, wantB := stateOf(a), stateOf(b)
			err := EvalBatch([]*Session{a, b}, c.toks)
			require.Error(t, err)
			if c.full {
				require.ErrorIs(t, err, ErrContextFull)
			}
			require.Equal(t, wantA, stateOf(a))
			require.Equal(t, wantB, stateOf(b))
		})
	}
	require.NoError(t, EvalBatch([]*Session{a, b}, [][]int{{1, 2}, testTokens(64-9, v)}), "b filled to its context exactly")
	require.Equal(t, 64, b.Pos())
}

// TestDecodeBatchLayerHook checks that a batched step calls each
// session's layer hook once per layer, in the order of the batch.
func TestDecodeBatchLayerHook(t *testing.T) {
	m := tinyModel(t, layout.RecipeQ2, nil)
	be := cpu.New(2)
	defer be.Close()
	var calls []string
	var ss []*Session
	for i, name := range []string{"a", "b", "", "d"} {
		s, err := NewSession(m, be, Options{Context: 64})
		require.NoError(t, err)
		require.NoError(t, s.Prefill(testTokens(3+i, m.Params.Vocab)))
		if name != "" {
			s.SetLayerHook(func() { calls = append(calls, name) })
		}
		ss = append(ss, s)
	}
	require.NoError(t, DecodeBatch(ss, []int{1, 2, 3, 4}))
	var want []string
	for range m.Layers {
		want = append(want, "a", "b", "d")
	}
	require.Equal(t, want, calls)
}

// TestDecodeBatchAllocatesNothing checks that repeated batched steps over
// the same sessions allocate nothing, mapped and streaming.
func TestDecodeBatchAllocatesNothing(t *testing.T) {
	be := cpu.New(2)
	defer be.Close()
	path := tinyFile(t, layout.RecipeQ2)
	for _, c := range []struct {
		name string
		open func(t *testing.T) *Model
	}{
		{"mapped", func(t *testing.T) *Model {
			m, err := Open(path)
			require.NoError(t, err)
			t.Cleanup(func() { m.File.Close() })
			return m
		}},
		{"streaming", func(t *testing.T) *Model { return openStreamed(t, path, Open, StreamOptions{Slots: 1 << 20}) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := c.open(t)
			var ss []*Session
			for i := range 4 {
				s, err := NewSession(m, be, Options{Context: 512})
				require.NoError(t, err)
				require.NoError(t, s.Prefill(testTokens(10+20*i, m.Params.Vocab)))
				ss = append(ss, s)
			}
			toks := []int{3, 5, 7, 9}
			require.NoError(t, DecodeBatch(ss, toks))
			allocs := testing.AllocsPerRun(20, func() {
				if err := DecodeBatch(ss, toks); err != nil {
					t.Fatal(err)
				}
			})
			if !raceEnabled {
				require.Zero(t, allocs)
			}
		})
	}
}

// TestSharedWorkspace checks that sessions sharing one Workspace, taking
// turns at prefill, decode and DecodeBatch, get bit for bit the results of
// sessions with buffers of their own, and that a workspace serves one
// model only.
func TestSharedWorkspace(t *testing.T) {
	m, err := OpenTiny()
	require.NoError(t, err)
	be := cpu.New(2)
	defer be.Close()
	refs := soloRefs(t, m, be)
	v := m.Params.Vocab
	ws := NewWorkspace(m)
	var ss []*Session
	for i, n := range batchPrompts {
		opt := seqOptions(m.Params, i)
		opt.Workspace = ws
		s, err := NewSession(m, be, opt)
		require.NoError(t, err)
		require.NoError(t, s.Prefill(seqTokens(i, v)[:n]))
		takeResult(s)
		ss = append(ss, s)
	}
	for step := range batchSteps {
		// Half the sequences decode alone, in between the others' batch.
		var batch []*Session
		var toks, idx []int
		for i, s := range ss {
			tok := seqTokens(i, v)[batchPrompts[i]+step]
			if (i+step)%2 == 0 {
				require.NoError(t, s.Decode(tok))
				require.Equal(t, refs[i][step], takeResult(s), "step %d sequence %d alone", step, i)
				continue
			}
			batch, toks, idx = append(batch, s), append(toks, tok), append(idx, i)
		}
		require.NoError(t, DecodeBatch(batch, toks))
		for k, i := range idx {
			require.Equal(t, refs[i][step], takeResult(batch[k]), "step %d sequence %d in the batch", step, i)
		}
	}
	other, err := OpenTiny()
	require.NoError(t, err)
	_, err = NewSession(other, be, Options{Workspace: ws})
	require.ErrorContains(t, err, "another model")
}
