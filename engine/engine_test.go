package engine

import (
	"bytes"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/convert/synth"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/gguf"
)

var tables = sync.OnceValues(tokenizer.DeepSeekV4)

// tinyModel synthesizes the tiny preset (vocabulary shortened to keep tests
// fast) with the given recipe and binds it.
func tinyModel(t testing.TB, r layout.Recipe, edit func(*layout.Params)) *Model {
	t.Helper()
	p := layout.Tiny()
	p.Vocab = 1024
	if edit != nil {
		edit(&p)
	}
	tab, err := tables()
	require.NoError(t, err)
	var buf bytes.Buffer
	_, err = synth.Write(&buf, synth.Options{Params: p, Recipe: r, Seed: 5, Tables: tab})
	require.NoError(t, err)
	f, err := gguf.Parse(buf.Bytes())
	require.NoError(t, err)
	m, err := Load(f)
	require.NoError(t, err)
	return m
}

func testTokens(n, vocab int) []int {
	toks := make([]int, n)
	for i := range toks {
		toks[i] = (i*7919 + 13) % vocab
	}
	return toks
}

// TestPrefillMatchesDecode runs the same tokens as one prefill (in chunks,
// crossing window and compression boundaries) and one token at a time: the
// logits must be bit-identical at every position.
func TestPrefillMatchesDecode(t *testing.T) {
	for _, r := range []layout.Recipe{layout.RecipeQ2, layout.RecipeQ4} {
		t.Run(r.Name, func(t *testing.T) {
			m := tinyModel(t, r, func(p *layout.Params) { p.CompressRatios = []int{0, 0, 4, 16, 4, 128} })
			be := cpu.New(2)
			defer be.Close()
			toks := testTokens(150, m.Params.Vocab)
			v := m.Params.Vocab

			pre, err := NewSession(m, be, Options{Context: 256})
			require.NoError(t, err)
			pre.chunk = 64 // several chunks over the 150 tokens
			all := make([]float32, len(toks)*v)
			require.NoError(t, pre.PrefillAll(toks, all))

			dec, err := NewSession(m, be, Options{Context: 256})
			require.NoError(t, err)
			for i, tok := range toks {
				require.NoError(t, dec.Decode(tok))
				got := dec.Logits()
				want := all[i*v : (i+1)*v]
				for j := range got {
					if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
						t.Fatalf("position %d logit %d: decode %v, prefill %v", i, j, got[j], want[j])
					}
					require.False(t, math.IsNaN(float64(got[j])), "NaN logit at %d", i)
				}
			}
			require.Equal(t, pre.Logits(), dec.Logits())
		})
	}
}

// TestLayerHook checks the hook runs once per layer of every chunk and
// decoded token, and that nil removes it.
func TestLayerHook(t *testing.T) {
	m := tinyModel(t, layout.RecipeQ2, nil)
	be := cpu.New(2)
	defer be.Close()
	s, err := NewSession(m, be, Options{Context: 64})
	require.NoError(t, err)
	s.chunk = 8
	layers := len(m.Layers)
	calls := 0
	s.SetLayerHook(func() { calls++ })
	require.NoError(t, s.Prefill(testTokens(20, m.Params.Vocab))) // chunks of 8, 8 and 4
	require.Equal(t, 3*layers, calls)
	require.NoError(t, s.Decode(7))
	require.Equal(t, 4*layers, calls)
	s.SetLayerHook(nil)
	require.NoError(t, s.Decode(7))
	require.Equal(t, 4*layers, calls)
}

// TestSnapshotRestore checks that restoring a snapshot and continuing gives
// the same logits as never having stopped, across window and compression
// boundaries, and that a bad snapshot is refused.
func TestSnapshotRestore(t *testing.T) {
	m := tinyModel(t, layout.RecipeQ2, func(p *layout.Params) { p.CompressRatios = []int{0, 0, 4, 8, 4, 8} })
	be := cpu.New(2)
	defer be.Close()
	toks := testTokens(60, m.Params.Vocab)
	ref, _ := NewSession(m, be, Options{Context: 128})
	require.NoError(t, ref.Prefill(toks))

	s, _ := NewSession(m, be, Options{Context: 128})
	require.NoError(t, s.Prefill(toks[:23]))
	snap := s.Snapshot()
	require.NoError(t, s.Prefill(toks[23:41])) // diverge the live state
	require.NoError(t, s.Restore(snap))
	require.Equal(t, toks[:23], s.Tokens())
	require.NoError(t, s.Prefill(toks[23:]))
	require.Equal(t, ref.Logits(), s.Logits())

	other, _ := NewSession(m, be, Options{Context: 64})
	require.Error(t, other.Restore(snap))
}

func TestContextAndTokenErrors(t *testing.T) {
	m := tinyModel(t, layout.RecipeQ2, nil)
	be := cpu.New(1)
	defer be.Close()
	s, err := NewSession(m, be, Options{Context: 8})
	require.NoError(t, err)
	require.ErrorIs(t, s.Prefill(testTokens(9, m.Params.Vocab)), ErrContextFull)
	require.NoError(t, s.Prefill(testTokens(8, m.Params.Vocab)))
	require.ErrorIs(t, s.Decode(1), ErrContextFull)
	s.Reset()
	require.ErrorContains(t, s.Decode(m.Params.Vocab), "outside the vocabulary")
	require.ErrorContains(t, s.Decode(-1), "outside the vocabulary")
	_, err = NewSession(m, be, Options{Context: 1 << 30})
	require.ErrorContains(t, err, "exceeds the model's")
}

// rewrite copies a parsed file with edited metadata and tensor infos
// (tensor data is zero-filled when a tensor's size changes).
func rewrite(t *testing.T, f *gguf.File, kv func([]gguf.KV) []gguf.KV, ts func([]gguf.TensorInfo) []gguf.TensorInfo) *gguf.File {
	keys := append([]gguf.KV(nil), f.KV...)
	infos := append([]gguf.TensorInfo(nil), f.Tensors...)
	if kv != nil {
		keys = kv(keys)
	}
	if ts != nil {
		infos = ts(infos)
	}
	var buf bytes.Buffer
	w, err := gguf.NewWriter(&buf, keys, infos)
	require.NoError(t, err)
	for i, ti := range w.Tensors() {
		data := make([]byte, ti.Size)
		if orig, ok := f.Tensor(infos[i].Name); ok && orig.Size == ti.Size {
			copy(data, f.TensorData(orig))
		}
		_, err := w.Write(data)
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	out, err := gguf.Parse(buf.Bytes())
	require.NoError(t, err)
	return out
}

func TestLoadRejectsBadModels(t *testing.T) {
	good := tinyModel(t, layout.RecipeQ2, nil).File
	setKV := func(key string, v gguf.Value) func([]gguf.KV) []gguf.KV {
		return func(kv []gguf.KV) []gguf.KV {
			for i := range kv {
				if kv[i].Key == key {
					kv[i].Value = v
				}
			}
			return kv
		}
	}
	cases := []struct {
		name string
		kv   func([]gguf.KV) []gguf.KV
		ts   func([]gguf.TensorInfo) []gguf.TensorInfo
		msg  string
	}{
		{"wrong architecture", setKV("general.architecture", gguf.String("llama")), nil, `general.architecture: "llama", want "deepseek4"`},
		{"inconsistent heads", setKV("deepseek4.attention.head_count", gguf.Uint32(8)), nil, "blk.0.attn_q_b.weight: dims [128 512], want [128 1024]"},
		{"inconsistent ratios", setKV("deepseek4.attention.compress_ratios", gguf.Uint32s([]uint32{0, 4, 4, 128, 4, 128})), nil, "blk.1.attn_compressor_kv.weight: missing"},
		{"sinkhorn iterations 2^31", setKV("deepseek4.hyper_connection.sinkhorn_iterations", gguf.Uint32(1<<31)), nil, `metadata "deepseek4.hyper_connection.sinkhorn_iterations" at offset`},
		{"zero sinkhorn iterations", setKV("deepseek4.hyper_connection.sinkhorn_iterations", gguf.Uint32(0)), nil, `"deepseek4.hyper_connection.sinkhorn_iterations" at offset`},
		{"huge top-k", setKV("deepseek4.attention.indexer.top_k", gguf.Uint32(1<<31)), nil, `"deepseek4.attention.indexer.top_k" at offset`},
		{"huge window", setKV("deepseek4.attention.sliding_window", gguf.Uint32(1<<32-1)), nil, `"deepseek4.attention.sliding_window" at offset`},
		{"huge ratio", setKV("deepseek4.attention.compress_ratios", gguf.Uint32s([]uint32{0, 0, 4, 1 << 31, 4, 128})), nil, `"deepseek4.attention.compress_ratios"[3] at offset`},
		{"misshapen tensor", nil, func(ts []gguf.TensorInfo) []gguf.TensorInfo {
			for i := range ts {
				if ts[i].Name == "output.weight" {
					ts[i].Dims = []uint64{256, 1000}
				}
			}
			return ts
		}, "output.weight: dims [256 1000], want [256 1024]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(rewrite(t, good, c.kv, c.ts))
			require.ErrorContains(t, err, c.msg)
		})
	}
	// An expert id out of range in a hash table is refused at load time.
	f := rewrite(t, good, nil, nil)
	ti, _ := f.Tensor("blk.0.ffn_gate_tid2eid.weight")
	data := f.TensorData(ti)
	data[0], data[1], data[2], data[3] = 99, 0, 0, 0
	_, err := Load(f)
	require.ErrorContains(t, err, "entry 0 = 99 is not an expert id below 8")
}

// TestDecodeAllocatesNothing checks the decode loop runs on the session's
// scratch buffers alone once warmed up.
func TestDecodeAllocatesNothing(t *testing.T) {
	m := tinyModel(t, layout.RecipeQ2, nil)
	be := cpu.New(2)
	defer be.Close()
	s, err := NewSession(m, be, Options{Context: 512})
	require.NoError(t, err)
	require.NoError(t, s.Prefill(testTokens(40, m.Params.Vocab)))
	require.NoError(t, s.Decode(3))
	allocs := testing.AllocsPerRun(20, func() {
		if err := s.Decode(5); err != nil {
			t.Fatal(err)
		}
	})
	if !raceEnabled {
		require.Zero(t, allocs)
	}
}

func TestTopLogprobs(t *testing.T) {
	m := tinyModel(t, layout.RecipeQ2, nil)
	be := cpu.New(1)
	defer be.Close()
	s, _ := NewSession(m, be, Options{Context: 64})
	require.NoError(t, s.Prefill(testTokens(5, m.Params.Vocab)))
	top := s.TopLogprobs(5)
	require.Len(t, top, 5)
	lg := s.Logits()
	var sum float64
	for _, v := range lg {
		sum += math.Exp(float64(v))
	}
	for i, tl := range top {
		require.InDelta(t, float64(lg[tl.ID])-math.Log(sum), float64(tl.Logprob), 1e-4)
		if i > 0 {
			require.GreaterOrEqual(t, top[i-1].Logprob, tl.Logprob)
		}
	}
}

func TestOpenDefault(t *testing.T) {
	t.Chdir(t.TempDir()) // no ./ds4flash.gguf here
	m, opened, err := OpenDefault("")
	require.NoError(t, err)
	require.Empty(t, opened, "the built-in tiny model")
	require.Equal(t, layout.Tiny().Layers, m.Params.Layers)
	_, _, err = OpenDefault("missing.gguf")
	require.Error(t, err)
}

// TestOpenInMemory checks that a model read into memory of its own gives
// the logits of the same file mapped, bit for bit.
func TestOpenInMemory(t *testing.T) {
	p := layout.Tiny()
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	_, err := synth.WriteFile(path, synth.Options{Params: p, Recipe: layout.RecipeQ2, Seed: 5})
	require.NoError(t, err)
	be := cpu.New(2)
	defer be.Close()
	var logits [2][]float32
	for i, open := range []func(string) (*Model, error){Open, OpenInMemory} {
		m, err := open(path)
		require.NoError(t, err)
		s, err := NewSession(m, be, Options{Context: 64})
		require.NoError(t, err)
		require.NoError(t, s.Prefill(testTokens(20, p.Vocab)))
		require.NoError(t, s.Decode(7))
		logits[i] = slices.Clone(s.Logits())
		require.NoError(t, m.File.Close())
	}
	require.Equal(t, logits[0], logits[1])
	_, err = OpenInMemory(filepath.Join(t.TempDir(), "missing.gguf"))
	require.Error(t, err)
}
