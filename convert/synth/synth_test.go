package synth

import (
	"bytes"
	"crypto/sha256"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/gguf"
	"github.com/ds4-go/ds4/quant"
)

var tables = sync.OnceValues(tokenizer.DeepSeekV4)

// smallTiny is the tiny preset with a shortened vocabulary so tests that
// write several files stay fast; the full tiny model is written once.
func smallTiny() layout.Params {
	p := layout.Tiny()
	p.Vocab = 2048
	return p
}

func options(t *testing.T, p layout.Params, seed uint64, workers int) Options {
	tab, err := tables()
	require.NoError(t, err)
	return Options{Params: p, Recipe: layout.RecipeQ2, Seed: seed, Workers: workers, Tables: tab}
}

func TestTinyModelIsValidDS4(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	var produced int64
	opt := options(t, layout.Tiny(), 7, 0)
	opt.Progress = func(n int64) { produced += n }
	infos, err := WriteFile(path, opt)
	require.NoError(t, err)
	f, err := gguf.Open(path)
	require.NoError(t, err)
	defer f.Close()

	rep := layout.Check(f)
	require.NoError(t, rep.Err())
	require.True(t, rep.Published)
	require.Empty(t, rep.Warnings)
	require.Equal(t, layout.Tiny(), rep.Params)
	require.Len(t, f.Tensors, len(infos))
	var total int64
	for _, ti := range infos {
		total += int64(ti.Size)
	}
	require.Equal(t, total, produced)

	tab, _ := tables()
	v, _ := f.Value("tokenizer.ggml.tokens")
	a, _ := v.Array()
	toks, _ := a.Strings()
	require.Equal(t, tab.Tokens, toks)
	v, _ = f.Value("tokenizer.ggml.merges")
	a, _ = v.Array()
	merges, _ := a.Strings()
	require.Equal(t, tab.Merges, merges)
	v, _ = f.Value("ds4go.synth.seed")
	seed, _ := v.Int()
	require.EqualValues(t, 7, seed)

	// Every structural feature is present.
	p := rep.Params
	require.Contains(t, p.CompressRatios, 4)
	require.Contains(t, p.CompressRatios, 128)
	require.Positive(t, p.HashLayers)
	for _, name := range []string{"blk.2.indexer.proj.weight", "blk.3.attn_compressor_ape.weight", "blk.0.ffn_gate_tid2eid.weight", "blk.5.ffn_gate_shexp.weight", "blk.0.hc_attn_fn.weight"} {
		_, ok := f.Tensor(name)
		require.True(t, ok, name)
	}
}

// TestBlocksAreValid decodes every tensor of a synthetic model and checks
// the values are finite and of the intended magnitude, and that hash tables
// hold distinct in-range expert ids.
func TestBlocksAreValid(t *testing.T) {
	p := smallTiny()
	for _, r := range []layout.Recipe{layout.RecipeQ2, layout.RecipeQ4} {
		t.Run(r.Name, func(t *testing.T) {
			opt := options(t, p, 3, 2)
			opt.Recipe = r
			var buf bytes.Buffer
			_, err := Write(&buf, opt)
			require.NoError(t, err)
			f, err := gguf.Parse(buf.Bytes())
			require.NoError(t, err)
			require.NoError(t, layout.Check(f).Err())
			for _, ti := range f.Tensors {
				data := f.TensorData(ti)
				if ti.Type == quant.I32 {
					checkHashTable(t, ti, data, p.Experts)
					continue
				}
				ne0 := int(ti.Dims[0])
				row := make([]float32, ne0)
				rb, _ := ti.Type.RowBytes(ne0)
				var sum2 float64
				n := 0
				for off := 0; off < len(data); off += rb {
					require.NoError(t, quant.DequantizeRow(ti.Type, data[off:off+rb], row))
					for _, x := range row {
						require.False(t, math.IsNaN(float64(x)) || math.IsInf(float64(x), 0), "%s: non-finite value", ti.Name)
						sum2 += float64(x) * float64(x)
					}
					n += ne0
				}
				rms := math.Sqrt(sum2 / float64(n))
				if len(ti.Dims) > 1 && ti.Name != "token_embd.weight" && !strings.HasSuffix(ti.Name, "_ape.weight") {
					// Matrices aim at rms ≈ 1/sqrt(fan-in); allow the
					// formats' coarse scale models (and the per-block jitter) a margin.
					want := 1 / math.Sqrt(float64(ne0))
					require.InDelta(t, 1, rms/want, 0.35, "%s (%v): rms %g, want about %g", ti.Name, ti.Type, rms, want)
				}
			}
		})
	}
}

func checkHashTable(t *testing.T, ti gguf.TensorInfo, data []byte, experts int) {
	k := int(ti.Dims[0])
	for r := range int(ti.Dims[1]) {
		seen := map[int32]bool{}
		for i := range k {
			off := 4 * (r*k + i)
			id := int32(uint32(data[off]) | uint32(data[off+1])<<8 | uint32(data[off+2])<<16 | uint32(data[off+3])<<24)
			require.True(t, id >= 0 && int(id) < experts, "%s row %d: expert %d", ti.Name, r, id)
			require.False(t, seen[id], "%s row %d: expert %d twice", ti.Name, r, id)
			seen[id] = true
		}
	}
}

// TestDeterministic checks the output depends on the seed only, not on the
// number of workers.
func TestDeterministic(t *testing.T) {
	sum := func(seed uint64, workers int) [32]byte {
		var buf bytes.Buffer
		_, err := Write(&buf, options(t, smallTiny(), seed, workers))
		require.NoError(t, err)
		return sha256.Sum256(buf.Bytes())
	}
	a := sum(1, 1)
	require.Equal(t, a, sum(1, 3))
	require.NotEqual(t, a, sum(2, 1))
}

func TestWriteRejectsBadParams(t *testing.T) {
	p := smallTiny()
	p.Embd = 100 // not a whole number of Q8_0 / IQ2_XXS blocks
	_, err := Write(&bytes.Buffer{}, options(t, p, 1, 1))
	require.ErrorContains(t, err, "not a multiple of the block size")

	p = smallTiny()
	p.HeadsKV = 2
	_, err = Write(&bytes.Buffer{}, options(t, p, 1, 1))
	require.ErrorContains(t, err, "head_count_kv")

	_, err = WriteFile(filepath.Join(t.TempDir(), "missing-dir", "x.gguf"), options(t, smallTiny(), 1, 1))
	require.Error(t, err)
}
