package quant

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// datBuilder writes legacy .dat fields by hand, independently of WriteTo.
type datBuilder struct{ bytes.Buffer }

func (b *datBuilder) i32(v int32) *datBuilder {
	binary.Write(&b.Buffer, binary.LittleEndian, v)
	return b
}

func (b *datBuilder) str(s string) *datBuilder { b.WriteString(s); return b }

func (b *datBuilder) f32(vs ...float32) *datBuilder {
	for _, v := range vs {
		binary.Write(&b.Buffer, binary.LittleEndian, math.Float32bits(v))
	}
	return b
}

// entry writes one complete entry.
func (b *datBuilder) entry(name string, ncall int32, vs ...float32) *datBuilder {
	return b.i32(int32(len(name))).str(name).i32(ncall).i32(int32(len(vs))).f32(vs...)
}

func TestImatrixWriteLayout(t *testing.T) {
	m := &Imatrix{
		Entries: []ImatrixEntry{
			{Name: "blk.0.a", NCall: 1, Values: []float32{1.5, -2}},
			{Name: "b", NCall: 3, Values: []float32{0.25}},
		},
		Chunks:  43,
		Dataset: "d.txt",
	}
	var buf bytes.Buffer
	n, err := m.WriteTo(&buf)
	require.NoError(t, err)
	got := buf.Bytes()
	require.EqualValues(t, len(got), n)

	// The expected bytes, field by field, as docs/formats/harness.md#the-dat-file lays them out.
	want := []struct {
		what string
		b    []byte
	}{
		{"n_entries", []byte{2, 0, 0, 0}},
		{"name_len 0", []byte{7, 0, 0, 0}},
		{"name 0", []byte("blk.0.a")},
		{"ncall 0", []byte{1, 0, 0, 0}},
		{"nval 0", []byte{2, 0, 0, 0}},
		{"value 0.0 = 1.5", []byte{0x00, 0x00, 0xc0, 0x3f}},
		{"value 0.1 = -2", []byte{0x00, 0x00, 0x00, 0xc0}},
		{"name_len 1", []byte{1, 0, 0, 0}},
		{"name 1", []byte("b")},
		{"ncall 1", []byte{3, 0, 0, 0}},
		{"nval 1", []byte{1, 0, 0, 0}},
		{"value 1.0 = 0.25", []byte{0x00, 0x00, 0x80, 0x3e}},
		{"chunks", []byte{43, 0, 0, 0}},
		{"dataset_len", []byte{5, 0, 0, 0}},
		{"dataset", []byte("d.txt")},
	}
	off := 0
	for _, f := range want {
		require.LessOrEqual(t, off+len(f.b), len(got), "file ends before %s", f.what)
		assert.Equal(t, f.b, got[off:off+len(f.b)], "%s at offset %d", f.what, off)
		off += len(f.b)
	}
	assert.Equal(t, off, len(got), "bytes after the trailer")
}

func TestImatrixRoundTrip(t *testing.T) {
	vals := make([]float32, 3*256)
	for i := range vals {
		vals[i] = float32(i%97) * 0.125
	}
	for _, tc := range []struct {
		name string
		m    Imatrix
	}{
		{"experts", Imatrix{Entries: []ImatrixEntry{
			{Name: "blk.0.ffn_gate_exps.weight", NCall: 1, Values: vals},
			{Name: "blk.0.ffn_up_exps.weight", NCall: 1, Values: vals},
			{Name: "blk.0.ffn_down_exps.weight", NCall: 1, Values: vals[:2*256]},
		}, Chunks: 6, Dataset: "/data/rendered_prompts.txt"}},
		{"no dataset", Imatrix{Entries: []ImatrixEntry{{Name: "x", NCall: 1, Values: []float32{0, math.MaxFloat32, -math.SmallestNonzeroFloat32}}}}},
		{"long name", Imatrix{Entries: []ImatrixEntry{{Name: strings.Repeat("n", 4096), NCall: 1, Values: []float32{7}}}, Chunks: -1}},
		{"large entry", Imatrix{Entries: []ImatrixEntry{{Name: "big", NCall: 1, Values: make([]float32, 100_003)}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			_, err := tc.m.WriteTo(&buf)
			require.NoError(t, err)
			got, err := ReadImatrix(&buf)
			require.NoError(t, err)
			assert.Equal(t, &tc.m, got)
		})
	}
}

func TestImatrixReadDividesByNCall(t *testing.T) {
	for _, tc := range []struct {
		ncall int32
		in    []float32
		want  []float32
	}{
		{1, []float32{3, 6}, []float32{3, 6}},
		{3, []float32{3, 6}, []float32{1, 2}},
		{4, []float32{1, 0}, []float32{0.25, 0}},
		{0, []float32{3, 6}, []float32{3, 6}},  // ncall ≤ 0: no division (upstream)
		{-2, []float32{3, 6}, []float32{3, 6}}, // likewise
	} {
		var b datBuilder
		b.i32(1).entry("t", tc.ncall, tc.in...)
		m, err := ReadImatrix(&b)
		require.NoError(t, err, "ncall %d", tc.ncall)
		assert.Equal(t, tc.want, m.Entries[0].Values, "ncall %d", tc.ncall)
		assert.Equal(t, 1, m.Entries[0].NCall)
		assert.Zero(t, m.Chunks, "no trailer")
		assert.Empty(t, m.Dataset)
	}
}

func TestImatrixReadTrailer(t *testing.T) {
	base := func() *datBuilder {
		b := &datBuilder{}
		b.i32(1).entry("t", 1, 1)
		return b
	}
	for _, tc := range []struct {
		name    string
		b       *datBuilder
		chunks  int
		dataset string
	}{
		{"none", base(), 0, ""},
		{"empty dataset", base().i32(5).i32(0), 5, ""},
		{"dataset", base().i32(129).i32(3).str("abc"), 129, "abc"},
		{"negative length ignored", base().i32(2).i32(-1).str("junk"), 2, ""},
		{"huge length ignored", base().i32(2).i32(1 << 20), 2, ""},
		{"longest kept", base().i32(1).i32(1<<20 - 1).str(strings.Repeat("d", 1<<20-1)), 1, strings.Repeat("d", 1<<20-1)},
		{"bytes after ignored", base().i32(9).i32(1).str("xyz"), 9, "x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ReadImatrix(tc.b)
			require.NoError(t, err)
			assert.Equal(t, tc.chunks, m.Chunks)
			assert.Equal(t, tc.dataset, m.Dataset)
		})
	}
}

func TestImatrixReadRejects(t *testing.T) {
	one := func() *datBuilder { return (&datBuilder{}).i32(1) }
	for _, tc := range []struct {
		name string
		b    *datBuilder
		want string
	}{
		{"empty file", &datBuilder{}, "entry count: unexpected EOF"},
		{"short count", (&datBuilder{}).str("\x01\x00"), "entry count: unexpected EOF"},
		{"no entries", (&datBuilder{}).i32(0), "0 entries"},
		{"negative entries", (&datBuilder{}).i32(-5), "-5 entries"},
		{"missing entry", (&datBuilder{}).i32(2).entry("a", 1, 1), "entry 1: name length: unexpected EOF"},
		{"empty name", one().i32(0), "name length 0 outside 1..4096"},
		{"negative name", one().i32(-1), "name length -1 outside"},
		{"long name", one().i32(4097).str(strings.Repeat("n", 4097)), "name length 4097 outside"},
		{"short name", one().i32(5).str("abc"), "entry 0: name: unexpected EOF"},
		{"short ncall", one().i32(1).str("a").str("\x01"), `"a": ncall: unexpected EOF`},
		{"short nval", one().i32(1).str("a").i32(1), `"a": value count: unexpected EOF`},
		{"no values", one().i32(1).str("a").i32(1).i32(0), `"a": 0 values`},
		{"negative values", one().i32(1).str("a").i32(1).i32(-3), `"a": -3 values`},
		{"short values", one().i32(1).str("a").i32(1).i32(3).f32(1, 2), `"a": values: unexpected EOF`},
		{"hostile count", one().i32(1).str("a").i32(1).i32(math.MaxInt32).f32(1), `"a": values: unexpected EOF`},
		{"NaN", one().entry("a", 1, 1, float32(math.NaN())), `"a": value 1 is NaN`},
		{"+Inf", one().entry("a", 2, float32(math.Inf(1))), `"a": value 0 is +Inf`},
		{"-Inf", one().entry("a", 0, 0, 0, float32(math.Inf(-1))), `"a": value 2 is -Inf`},
		{"short chunks", one().entry("a", 1, 1).str("\x01\x02"), "trailer chunks: unexpected EOF"},
		{"short dataset length", one().entry("a", 1, 1).i32(1).str("\x01"), "trailer dataset length: unexpected EOF"},
		{"short dataset", one().entry("a", 1, 1).i32(1).i32(10).str("abc"), "trailer dataset name: unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ReadImatrix(tc.b)
			require.Error(t, err)
			assert.Nil(t, m)
			assert.Contains(t, err.Error(), "imatrix: ")
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestImatrixWriteRejects(t *testing.T) {
	ok := func() ImatrixEntry { return ImatrixEntry{Name: "a", NCall: 1, Values: []float32{1}} }
	with := func(f func(e *ImatrixEntry)) *Imatrix {
		e := ok()
		f(&e)
		return &Imatrix{Entries: []ImatrixEntry{e}}
	}
	for _, tc := range []struct {
		name string
		m    *Imatrix
		want string
	}{
		{"no entries", &Imatrix{}, "no entries"},
		{"empty name", with(func(e *ImatrixEntry) { e.Name = "" }), "name length 0"},
		{"long name", with(func(e *ImatrixEntry) { e.Name = strings.Repeat("x", 4097) }), "name length 4097"},
		{"zero ncall", with(func(e *ImatrixEntry) { e.NCall = 0 }), "ncall 0"},
		{"no values", with(func(e *ImatrixEntry) { e.Values = nil }), "0 values"},
		{"NaN", with(func(e *ImatrixEntry) { e.Values = []float32{2, float32(math.NaN())} }), "value 1 is NaN"},
		{"chunks", &Imatrix{Entries: []ImatrixEntry{ok()}, Chunks: math.MaxInt32 + 1}, "chunks"},
		{"dataset", &Imatrix{Entries: []ImatrixEntry{ok()}, Dataset: strings.Repeat("d", 1<<20)}, "dataset name of 1048576 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			_, err := tc.m.WriteTo(&buf)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Zero(t, buf.Len(), "nothing written")

			dir := t.TempDir()
			path := filepath.Join(dir, "out.dat")
			require.Error(t, tc.m.WriteFile(path))
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			assert.Empty(t, entries, "no file and no temporary left behind")
		})
	}
}

type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.n < len(p) {
		k := w.n
		w.n = 0
		return k, errors.New("disk full")
	}
	w.n -= len(p)
	return len(p), nil
}

func TestImatrixWriteError(t *testing.T) {
	m := &Imatrix{Entries: []ImatrixEntry{{Name: "a", NCall: 1, Values: make([]float32, 50_000)}}}
	n, err := m.WriteTo(&failWriter{n: 70_000})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "disk full")
	assert.EqualValues(t, 70_000, n)
}

func TestImatrixFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "imatrix.dat")
	require.NoError(t, os.WriteFile(path, []byte("old contents"), 0o644))
	m := &Imatrix{Entries: []ImatrixEntry{{Name: "blk.1.ffn_down_exps.weight", NCall: 1, Values: []float32{1, 2, 3}}}, Chunks: 2, Dataset: "x.txt"}
	require.NoError(t, m.WriteFile(path))
	got, err := ReadImatrixFile(path)
	require.NoError(t, err)
	assert.Equal(t, m, got)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "the temporary file was renamed away")
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), info.Mode().Perm())

	_, err = ReadImatrixFile(filepath.Join(dir, "missing.dat"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	require.NoError(t, os.WriteFile(path, []byte{0, 0, 0, 0}, 0o644))
	_, err = ReadImatrixFile(path)
	assert.ErrorContains(t, err, path+": imatrix: 0 entries")
	assert.Error(t, m.WriteFile(filepath.Join(dir, "no-such-dir", "x.dat")))
}

func TestImatrixImportance(t *testing.T) {
	seq := func(base float32, n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = base + float32(i)
		}
		return v
	}
	const gguf, hf = "blk.3.ffn_gate_exps.weight", "layers.3.ffn.experts.5.w1.weight"
	m := &Imatrix{Entries: []ImatrixEntry{
		{Name: gguf, NCall: 1, Values: seq(0, 4*8)},               // stacked: 8 experts × 4 columns
		{Name: gguf + ".expert_5", NCall: 1, Values: seq(500, 4)}, // underscore form
		{Name: hf + ".expert.5", NCall: 1, Values: seq(600, 4)},   // HF dotted form
		{Name: gguf + ".expert.6", NCall: 1, Values: seq(700, 4)},
		{Name: gguf + ".expert.6", NCall: 1, Values: seq(750, 4)}, // repeated name: the first wins
		{Name: hf + ".expert_6", NCall: 1, Values: seq(800, 4)},
		{Name: "token_embd.weight", NCall: 1, Values: seq(900, 3)},
		{Name: "bad", NCall: 1, Values: seq(0, 5)},
		{Name: "bad.expert.1", NCall: 1, Values: seq(0, 8)}, // 2 columns × 4 experts, not 4 × 8
	}}
	for _, tc := range []struct {
		name     string
		names    []string
		expert   int
		nExperts int
		ncols    int
		want     []float32 // nil: no importance
		err      string
	}{
		{"dotted gguf first", []string{gguf, hf}, 6, 8, 4, seq(700, 4), ""},
		{"dotted hf before underscore gguf", []string{gguf, hf}, 5, 8, 4, seq(600, 4), ""},
		{"underscore gguf before bare", []string{gguf}, 5, 8, 4, seq(500, 4), ""},
		{"underscore hf", []string{"other", hf}, 6, 8, 4, seq(800, 4), ""},
		{"bare sliced", []string{gguf, hf}, 2, 8, 4, seq(8, 4), ""},
		{"bare sliced last expert", []string{gguf}, 7, 8, 4, seq(28, 4), ""},
		{"bare whole for a single-expert width", []string{"", "token_embd.weight"}, 0, 4, 3, seq(900, 3), ""},
		{"non-expert bare", []string{"token_embd.weight"}, -1, 0, 3, seq(900, 3), ""},
		{"non-expert ignores expert suffixes", []string{gguf + ".expert_5"}, -1, 0, 4, seq(500, 4), ""},
		{"non-expert stacked is a mismatch", []string{gguf}, -1, 8, 4, nil, `"blk.3.ffn_gate_exps.weight" has 32 values, want 4`},
		{"miss", []string{"blk.9.attn_q.weight"}, -1, 0, 4, nil, ""},
		{"expert miss", []string{"blk.9.ffn_up_exps.weight"}, 1, 8, 4, nil, ""},
		{"no names", nil, 1, 8, 4, nil, ""},
		{"size mismatch", []string{"bad"}, -1, 0, 4, nil, `"bad" has 5 values, want 4`},
		{"size mismatch decides", []string{"bad", "token_embd.weight"}, -1, 0, 3, nil, `"bad" has 5 values, want 3`},
		{"expert size mismatch", []string{"bad"}, 1, 8, 4, nil, `"bad.expert.1" has 8 values, want 4`},
		{"expert out of range", []string{gguf}, 8, 8, 4, nil, "expert 8 of 8"},
		{"no columns", []string{gguf}, 0, 8, 0, nil, "0 columns"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := m.Importance(tc.names, tc.expert, tc.nExperts, tc.ncols)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				assert.Nil(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			if got != nil {
				assert.Equal(t, len(got), cap(got), "the result cannot be appended into its neighbours")
			}
		})
	}
	var none *Imatrix
	got, err := none.Importance([]string{gguf}, 0, 8, 4)
	assert.NoError(t, err)
	assert.Nil(t, got)
}

// FuzzReadImatrix checks that ReadImatrix never panics and that whatever
// it accepts is written back in a form it reads to the same value.
func FuzzReadImatrix(f *testing.F) {
	var b datBuilder
	b.i32(2).entry("blk.0.ffn_gate_exps.weight", 1, 1, 2, 3, 4).entry("x", 2, 0.5).i32(43).i32(4).str("data")
	f.Add(b.Bytes())
	f.Add((&datBuilder{}).i32(1).entry("a", 3, 9).Bytes())
	f.Add((&datBuilder{}).i32(1).entry("a", 1, 1).i32(1).i32(-1).Bytes())
	f.Add((&datBuilder{}).i32(1).i32(1).str("a").i32(1).i32(math.MaxInt32).Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ReadImatrix(bytes.NewReader(data))
		if err != nil {
			if m != nil {
				t.Fatal("an error with a result")
			}
			return
		}
		var buf bytes.Buffer
		if _, err := m.WriteTo(&buf); err != nil {
			t.Fatalf("accepted input does not write back: %v", err)
		}
		back, err := ReadImatrix(&buf)
		if err != nil {
			t.Fatalf("written form does not read back: %v", err)
		}
		assert.Equal(t, m, back)
	})
}
