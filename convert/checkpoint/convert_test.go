package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/gguf"
	"github.com/ds4-go/ds4/quant"
)

// convertCase converts an oracle case into a file under t.TempDir and
// returns the opened result; it fails unless layout.Check accepts it.
func convertCase(t *testing.T, name string, opt Options) (*gguf.File, *Report, layout.Params) {
	t.Helper()
	p, err := LoadConfig(oracle(name))
	require.NoError(t, err)
	src, err := Open(oracle(name))
	require.NoError(t, err)
	defer src.Close()
	var log bytes.Buffer
	opt.Log = &log
	opt.Tables = tables(t)
	path := filepath.Join(t.TempDir(), name+".gguf")
	r, err := ConvertFile(path, src, p, opt)
	require.NoError(t, err)
	f, err := gguf.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	check := layout.Check(f)
	require.NoError(t, check.Err())
	require.Equal(t, p, check.Params)
	require.Len(t, f.Tensors, len(r.Tensors))
	require.Equal(t, len(r.Tensors)+len(r.Fallbacks), strings.Count(log.String(), "\n"))
	mode, _ := f.Value("ds4go.convert.mode")
	ms, _ := mode.Str()
	require.Equal(t, string(opt.Mode), ms)
	return f, r, p
}

// row dequantizes row r (of ne[0] elements) of a GGUF tensor.
func row(t *testing.T, f *gguf.File, name string, r int) []float32 {
	t.Helper()
	ti, ok := f.Tensor(name)
	require.True(t, ok, name)
	cols := int(ti.Dims[0])
	rb, err := ti.Type.RowBytes(cols)
	require.NoError(t, err)
	out := make([]float32, cols)
	data := f.TensorData(ti)
	if ti.Type == quant.I32 {
		for i := range out {
			out[i] = float32(int32(binary.LittleEndian.Uint32(data[r*rb+4*i:])))
		}
		return out
	}
	require.NoError(t, quant.DequantizeRow(ti.Type, data[r*rb:(r+1)*rb], out))
	return out
}

func bitsEqual(t *testing.T, want, got float32, msg string, args ...any) {
	t.Helper()
	if math.Float32bits(want) != math.Float32bits(got) {
		t.Fatalf("%s: got %v (%#08x), want %v (%#08x)", fmt.Sprintf(msg, args...), got, math.Float32bits(got), want, math.Float32bits(want))
	}
}

// handFP8 decodes element [r, c] of an FP8 weight from the raw file bytes
// with the format's formula, independently of the package.
func handFP8(t *testing.T, file []byte, name string, r, c int) float32 {
	dt, shape, w := rawTensor(t, file, name+".weight")
	require.Equal(t, "F8_E4M3", dt)
	sdt, sshape, s := rawTensor(t, file, name+".scale")
	require.Equal(t, "F8_E8M0", sdt)
	b := w[r*shape[1]+c]
	return float32(e4m3Ref(b) * math.Ldexp(1, int(s[r/128*sshape[1]+c/128])-127))
}

// handFP4 decodes element [r, c] of a packed FP4 expert weight.
func handFP4(t *testing.T, file []byte, name string, r, c int) float32 {
	dt, shape, w := rawTensor(t, file, name+".weight")
	require.Equal(t, "I8", dt)
	_, sshape, s := rawTensor(t, file, name+".scale")
	nib := w[r*shape[1]+c/2]
	if c%2 == 1 {
		nib >>= 4
	}
	v := []float64{0, 0.5, 1, 1.5, 2, 3, 4, 6}[nib&7]
	if nib&8 != 0 {
		v = -v
	}
	return float32(v * math.Ldexp(1, int(s[r*sshape[1]+c/32])-127))
}

// TestConvertLossless converts every oracle case losslessly, checks the
// layout, checks selected elements of every source encoding against the
// format's formulas applied to the raw file bytes, and checks every
// element of every tensor against the checkpoint's decoded values.
func TestConvertLossless(t *testing.T) {
	for _, name := range oracleCases {
		t.Run(name, func(t *testing.T) {
			f, r, p := convertCase(t, name, Options{Mode: ModeLossless})
			require.Empty(t, r.Fallbacks)
			require.Empty(t, r.Ignored)
			require.Positive(t, r.MTP)
			file, err := os.ReadFile(filepath.Join(oracle(name), "weights.safetensors"))
			require.NoError(t, err)

			// FP8 projections, including rows and columns in partial
			// 128-tiles (wkv has head_dim rows, wo_a 384 or 256 columns).
			for _, tc := range []struct {
				gguf, hf string
			}{
				{"blk.0.attn_q_a.weight", "layers.0.attn.wq_a"},
				{"blk.1.attn_kv.weight", "layers.1.attn.wkv"},
				{"blk.2.attn_output_a.weight", "layers.2.attn.wo_a"},
				{"blk.4.ffn_down_shexp.weight", "layers.4.ffn.shared_experts.w2"},
				{"blk.2.indexer.attn_q_b.weight", "layers.2.attn.indexer.wq_b"},
			} {
				ti, _ := f.Tensor(tc.gguf)
				require.Equal(t, quant.BF16, ti.Type, tc.gguf)
				rows, cols := int(ti.Dims[1]), int(ti.Dims[0])
				for _, rc := range [][2]int{{0, 0}, {1, 5}, {rows - 1, cols - 1}, {rows / 2, cols - 3}, {rows - 1, 0}} {
					got := row(t, f, tc.gguf, rc[0])[rc[1]]
					bitsEqual(t, handFP8(t, file, tc.hf, rc[0], rc[1]), got, "%s[%d,%d]", tc.gguf, rc[0], rc[1])
				}
			}

			// FP4 expert slices of the stacked tensors.
			for _, tc := range []struct {
				gguf, part string
				il, e      int
			}{
				{"blk.2.ffn_up_exps.weight", "w3", 2, 1},
				{"blk.0.ffn_gate_exps.weight", "w1", 0, p.Experts - 1},
				{"blk.4.ffn_down_exps.weight", "w2", 4, p.Experts / 2},
			} {
				ti, _ := f.Tensor(tc.gguf)
				require.Equal(t, quant.BF16, ti.Type)
				rows, cols := int(ti.Dims[1]), int(ti.Dims[0])
				hf := fmt.Sprintf("layers.%d.ffn.experts.%d.%s", tc.il, tc.e, tc.part)
				for _, rc := range [][2]int{{0, 0}, {0, 1}, {3, 33}, {rows - 1, cols - 1}, {rows - 2, cols - 32}} {
					got := row(t, f, tc.gguf, tc.e*rows+rc[0])[rc[1]]
					bitsEqual(t, handFP4(t, file, hf, rc[0], rc[1]), got, "%s expert %d [%d,%d]", tc.gguf, tc.e, rc[0], rc[1])
				}
			}

			// BF16 norm → F32; F32 hyper-connection tensors → F32 bit for
			// bit; BF16 embedding → BF16; I64 tid2eid → I32.
			ti, _ := f.Tensor("blk.1.attn_norm.weight")
			require.Equal(t, quant.F32, ti.Type)
			_, _, raw := rawTensor(t, file, "layers.1.attn_norm.weight")
			for i, v := range row(t, f, "blk.1.attn_norm.weight", 0) {
				bitsEqual(t, math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:]))<<16), v, "attn_norm[%d]", i)
			}
			ti, _ = f.Tensor("blk.3.hc_ffn_fn.weight")
			require.Equal(t, quant.F32, ti.Type)
			_, _, raw = rawTensor(t, file, "layers.3.hc_ffn_fn")
			require.Equal(t, raw, f.TensorData(ti))
			ti, _ = f.Tensor("token_embd.weight")
			require.Equal(t, quant.BF16, ti.Type)
			_, _, raw = rawTensor(t, file, "embed.weight")
			require.Equal(t, raw, f.TensorData(ti))
			ti, _ = f.Tensor("blk.1.ffn_gate_tid2eid.weight")
			require.Equal(t, quant.I32, ti.Type)
			dt, _, raw := rawTensor(t, file, "layers.1.ffn.gate.tid2eid")
			require.Equal(t, "I64", dt)
			got := f.TensorData(ti)
			for i := range len(raw) / 8 {
				require.Equal(t, binary.LittleEndian.Uint64(raw[8*i:]), uint64(binary.LittleEndian.Uint32(got[4*i:])), "tid2eid[%d]", i)
			}

			// Every element of every tensor equals the decoded checkpoint.
			src, err := Open(oracle(name))
			require.NoError(t, err)
			defer src.Close()
			for _, pt := range r.Tensors {
				ti, _ := f.Tensor(pt.Name)
				if ti.Type == quant.I32 {
					continue
				}
				want := decodeSource(t, src, pt.Source, p.Experts)
				n := int(ti.Elements())
				require.Len(t, want, n, pt.Name)
				gotAll := make([]float32, n)
				require.NoError(t, quant.DequantizeRow(ti.Type, f.TensorData(ti), gotAll))
				for i := range gotAll {
					if math.Float32bits(gotAll[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s element %d: got %v, want %v", pt.Name, i, gotAll[i], want[i])
					}
				}
			}
		})
	}
}

// decodeSource decodes a planned tensor's source, experts concatenated.
func decodeSource(t *testing.T, src *Checkpoint, name string, experts int) []float32 {
	t.Helper()
	names := []string{name}
	if strings.Contains(name, ".*.") {
		names = nil
		for e := range experts {
			names = append(names, strings.Replace(name, "*", fmt.Sprint(e), 1))
		}
	}
	var out []float32
	for _, n := range names {
		w, err := src.Weight(n)
		require.NoError(t, err)
		v, err := w.Float32s()
		require.NoError(t, err)
		out = append(out, v...)
	}
	return out
}

// TestConvertQ2 converts with the published 2-bit mix: Q2_K down
// projections of 128 columns fall back to Q8_0, and every IQ2_XXS expert
// is quantized with its own weight-derived importance.
func TestConvertQ2(t *testing.T) {
	f, r, p := convertCase(t, "hd192_w8_r32", Options{Mode: ModeQ2, Workers: 3})
	var want []Fallback
	for il := range p.Layers {
		want = append(want, Fallback{Tensor: fmt.Sprintf("blk.%d.ffn_down_exps.weight", il), Want: quant.Q2_K, Got: quant.Q8_0})
	}
	require.Equal(t, want, r.Fallbacks)
	check := layout.Check(f)
	require.Equal(t, layout.Recipe{Name: "custom", GateUp: quant.IQ2_XXS, Down: quant.Q8_0}, check.Recipe)
	for _, pt := range r.Tensors {
		ti, _ := f.Tensor(pt.Name)
		require.Equal(t, pt.Type, ti.Type, pt.Name)
		switch {
		case strings.HasSuffix(pt.Name, "_exps.weight") && !strings.Contains(pt.Name, "down"):
			require.Equal(t, quant.IQ2_XXS, ti.Type, pt.Name)
		case strings.HasSuffix(pt.Name, "tid2eid.weight"):
			require.Equal(t, quant.I32, ti.Type)
		default:
			require.Contains(t, []quant.Type{quant.Q8_0, quant.F16, quant.F32}, ti.Type, pt.Name)
		}
	}

	// Expert 3 of a gate tensor equals quantizing that expert alone.
	src, err := Open(oracle("hd192_w8_r32"))
	require.NoError(t, err)
	defer src.Close()
	w, err := src.Weight(layout.ExpertHF(5, 3, "w1"))
	require.NoError(t, err)
	x, err := w.Float32s()
	require.NoError(t, err)
	q, err := quant.Quantize(quant.IQ2_XXS, x, w.Cols(), nil)
	require.NoError(t, err)
	ti, _ := f.Tensor("blk.5.ffn_gate_exps.weight")
	require.Equal(t, q, f.TensorData(ti)[3*len(q):4*len(q)])

	// A Q8_0 projection equals quantizing the decoded FP8 weight.
	w, err = src.Weight("layers.2.attn.wq_b.weight")
	require.NoError(t, err)
	x, err = w.Float32s()
	require.NoError(t, err)
	q, err = quant.Quantize(quant.Q8_0, x, w.Cols(), nil)
	require.NoError(t, err)
	ti, _ = f.Tensor("blk.2.attn_q_b.weight")
	require.Equal(t, q, f.TensorData(ti))

	// The output does not depend on the number of workers.
	var a, b bytes.Buffer
	_, err = Convert(&a, src, p, Options{Mode: ModeLossless, Workers: 1, Tables: tables(t)})
	require.NoError(t, err)
	_, err = Convert(&b, src, p, Options{Mode: ModeLossless, Workers: 4, Tables: tables(t)})
	require.NoError(t, err)
	require.True(t, bytes.Equal(a.Bytes(), b.Bytes()))
}

func TestConvertQ4AndF32(t *testing.T) {
	_, r, p := convertCase(t, "tiny_w16_r16", Options{Mode: ModeQ4})
	require.Len(t, r.Fallbacks, p.Layers)
	require.Equal(t, Fallback{Tensor: "blk.0.ffn_down_exps.weight", Want: quant.Q4_K, Got: quant.Q8_0}, r.Fallbacks[0])
	require.Equal(t, "blk.0.ffn_down_exps.weight: Q4_K -> Q8_0 (ne[0] not a multiple of 256)", r.Fallbacks[0].String())

	f, r, _ := convertCase(t, "flash_ratios_s300", Options{Mode: ModeF32})
	require.Empty(t, r.Fallbacks)
	for _, ti := range f.Tensors {
		if strings.HasSuffix(ti.Name, "tid2eid.weight") {
			require.Equal(t, quant.I32, ti.Type)
		} else {
			require.Equal(t, quant.F32, ti.Type, ti.Name)
		}
	}
}

// TestConvertSharded splits a checkpoint into shards with an index; the
// conversion is byte-identical to the single file's.
func TestConvertSharded(t *testing.T) {
	dir := t.TempDir()
	set := loadST(t, filepath.Join(oracle("tiny_w16_r16"), "weights.safetensors"))
	var s1, s2 []stTensor
	weightMap := map[string]string{}
	for _, ts := range set.list() {
		shard := "model-00001-of-00002.safetensors"
		if strings.HasPrefix(ts.Name, "layers.3") || strings.HasPrefix(ts.Name, "layers.4") || ts.Name < "h" {
			shard = "model-00002-of-00002.safetensors"
			s2 = append(s2, ts)
		} else {
			s1 = append(s1, ts)
		}
		weightMap[ts.Name] = shard
	}
	writeST(t, filepath.Join(dir, "model-00001-of-00002.safetensors"), s1)
	writeST(t, filepath.Join(dir, "model-00002-of-00002.safetensors"), s2)
	idx, err := json.Marshal(map[string]any{"metadata": map[string]any{}, "weight_map": weightMap})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, IndexFile), idx, 0o644))

	p, err := LoadConfig(oracle("tiny_w16_r16"))
	require.NoError(t, err)
	convert := func(path string) []byte {
		src, err := Open(path)
		require.NoError(t, err)
		defer src.Close()
		var buf bytes.Buffer
		_, err = Convert(&buf, src, p, Options{Mode: ModeLossless, Source: "x", Tables: tables(t)})
		require.NoError(t, err)
		return buf.Bytes()
	}
	require.True(t, bytes.Equal(convert(oracle("tiny_w16_r16")), convert(dir)))
}

// brokenCase writes a modified copy of the tiny checkpoint and converts it.
func brokenCase(t *testing.T, edit func(s stSet)) (*Report, error) {
	t.Helper()
	set := loadST(t, filepath.Join(oracle("tiny_w16_r16"), "weights.safetensors"))
	edit(set)
	path := filepath.Join(t.TempDir(), "w.safetensors")
	writeST(t, path, set.list())
	p, err := LoadConfig(oracle("tiny_w16_r16"))
	require.NoError(t, err)
	src, err := Open(path)
	require.NoError(t, err)
	defer src.Close()
	return Convert(io.Discard, src, p, Options{Mode: ModeLossless, Tables: tables(t)})
}

func TestConvertErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(s stSet)
		err  string
	}{
		{"missing tensor", func(s stSet) {
			delete(s, "layers.1.attn.wq_a.weight")
			delete(s, "layers.1.attn.wq_a.scale")
		}, `tensor "layers.1.attn.wq_a.weight" (for blk.1.attn_q_a.weight): not in checkpoint`},
		{"missing expert", func(s stSet) {
			delete(s, "layers.4.ffn.experts.7.w2.weight")
		}, `tensor "layers.4.ffn.experts.7.w2.weight" (for blk.4.ffn_down_exps.weight): not in checkpoint`},
		{"misshapen", func(s stSet) {
			n := s["layers.0.attn_norm.weight"]
			n.Shape, n.Data = []int{128}, n.Data[:256]
		}, `tensor "layers.0.attn_norm.weight" (for blk.0.attn_norm.weight): shape [128], want [256] (the reverse of ne [256])`},
		{"transposed", func(s stSet) {
			n := s["layers.3.attn.compressor.wkv.weight"]
			n.Shape = []int{n.Shape[1], n.Shape[0]}
		}, `tensor "layers.3.attn.compressor.wkv.weight" (for blk.3.attn_compressor_kv.weight): shape [256 128], want [128 256] (the reverse of ne [256 128])`},
		{"table as floats", func(s stSet) {
			n := s["layers.0.ffn.gate.tid2eid"]
			n.DType, n.Data = F32, n.Data[:len(n.Data)/2]
		}, `tensor "layers.0.ffn.gate.tid2eid" (for blk.0.ffn_gate_tid2eid.weight): dtype F32, want I64 or I32`},
		{"floats as ints", func(s stSet) {
			n := s["norm.weight"]
			n.DType, n.Shape = I16, []int{256}
		}, `tensor "norm.weight" (for output_norm.weight): dtype I16 is not a weight encoding`},
		{"int norm", func(s stSet) {
			n := s["layers.2.ffn_norm.weight"]
			n.DType, n.Data = I64, append(n.Data, n.Data...)
			n.Data = append(n.Data, n.Data...)
		}, `tensor "layers.2.ffn_norm.weight" (for blk.2.ffn_norm.weight): dtype I64, want a float encoding`},
		{"missing scale", func(s stSet) {
			delete(s, "layers.3.attn.wkv.scale")
		}, `tensor "layers.3.attn.wkv.weight" (for blk.3.attn_kv.weight): F8_E4M3 weight without its .scale companion "layers.3.attn.wkv.scale"`},
		{"missing expert scale", func(s stSet) {
			delete(s, "layers.1.ffn.experts.2.w3.scale")
		}, `I8 weight without its .scale companion "layers.1.ffn.experts.2.w3.scale"`},
		{"scale shape", func(s stSet) {
			n := s["layers.0.attn.wq_b.scale"]
			n.Shape = []int{n.Shape[1], n.Shape[0]}
		}, `scale "layers.0.attn.wq_b.scale" has shape [1 4], want [4 1] for a [512 128] weight`},
		{"scale dtype", func(s stSet) {
			n := s["layers.0.attn.wq_b.scale"]
			n.DType = U8
		}, `scale "layers.0.attn.wq_b.scale" has dtype U8, want F8_E8M0`},
		{"NaN scale", func(s stSet) {
			s["layers.2.ffn.experts.6.w1.scale"].Data[100] = 0xFF
		}, `checkpoint: blk.2.ffn_gate_exps.weight: tensor "layers.2.ffn.experts.6.w1.weight": element [12, 128]: scale "layers.2.ffn.experts.6.w1.scale" holds the E8M0 NaN code 0xFF`},
		{"NaN weight", func(s stSet) {
			s["layers.1.attn.wo_b.weight"].Data[70] = 0xFF
		}, `checkpoint: blk.1.attn_output_b.weight: tensor "layers.1.attn.wo_b.weight": element [0, 70]: F8_E4M3 NaN code 0xff`},
		{"expert id", func(s stSet) {
			s["layers.2.ffn.gate.tid2eid"].Data[8*7] = 8
		}, `checkpoint: blk.2.ffn_gate_tid2eid.weight: tensor "layers.2.ffn.gate.tid2eid": element 7 (token 2) = expert 8, outside 0..7`},
		{"id overflow", func(s stSet) {
			binary.LittleEndian.PutUint64(s["layers.2.ffn.gate.tid2eid"].Data[8*7:], 1<<40)
		}, `tensor "layers.2.ffn.gate.tid2eid": element 7 = 1099511627776 does not fit int32`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := brokenCase(t, tc.edit)
			require.ErrorContains(t, err, tc.err)
		})
	}
}

// TestConvertExtras checks the report: unused tensors are listed, a
// missing optional router bias is omitted with a warning.
func TestConvertExtras(t *testing.T) {
	r, err := brokenCase(t, func(s stSet) {
		s["extra.weight"] = &stTensor{"extra.weight", F32, []int{1}, make([]byte, 4)}
		s["layers.0.ffn.gate.bias"] = &stTensor{"layers.0.ffn.gate.bias", F32, []int{8}, make([]byte, 32)}
		delete(s, "layers.4.ffn.gate.bias")
	})
	require.NoError(t, err)
	require.Equal(t, []string{"extra.weight", "layers.0.ffn.gate.bias"}, r.Ignored)
	require.Equal(t, []string{`tensor blk.4.exp_probs_b.bias: optional, "layers.4.ffn.gate.bias" not in checkpoint, omitted`}, r.Warnings)
	require.False(t, slices.ContainsFunc(r.Tensors, func(p Planned) bool { return p.Name == "blk.4.exp_probs_b.bias" }))
	require.True(t, slices.ContainsFunc(r.Tensors, func(p Planned) bool { return p.Name == "blk.3.exp_probs_b.bias" }))

	p, err := LoadConfig(oracle("tiny_w16_r16"))
	require.NoError(t, err)
	src, err := Open(oracle("tiny_w16_r16"))
	require.NoError(t, err)
	defer src.Close()
	plan, err := Plan(src, p, Options{Mode: ModeLossless})
	require.NoError(t, err)
	var sum int64
	for _, pt := range plan.Tensors {
		sum += pt.Bytes
	}
	require.Equal(t, plan.Bytes, sum)
	_, err = Plan(src, p, Options{Mode: "q3"})
	require.ErrorContains(t, err, `unknown mode "q3"`)
	p.Experts = 9
	_, err = Plan(src, p, Options{Mode: ModeLossless})
	require.ErrorContains(t, err, `tensor "layers.0.ffn.experts.8.w1.weight" (for blk.0.ffn_gate_exps.weight): not in checkpoint`)
}

// TestConvertLosslessF32Scales: FP8 weights with a scale below 2⁻¹²⁴
// are stored as F32 in lossless mode, still exactly.
func TestConvertLosslessF32Scales(t *testing.T) {
	set := loadST(t, filepath.Join(oracle("tiny_w16_r16"), "weights.safetensors"))
	set["layers.0.attn.wkv.scale"].Data[0] = 1
	set["layers.0.attn.wkv.weight"].Data[0] = 0x01 // 2⁻⁹ · 2⁻¹²⁶ = 2⁻¹³⁵
	path := filepath.Join(t.TempDir(), "w.safetensors")
	writeST(t, path, set.list())
	p, err := LoadConfig(oracle("tiny_w16_r16"))
	require.NoError(t, err)
	src, err := Open(path)
	require.NoError(t, err)
	defer src.Close()
	out := filepath.Join(t.TempDir(), "o.gguf")
	_, err = ConvertFile(out, src, p, Options{Mode: ModeLossless, Tables: tables(t)})
	require.NoError(t, err)
	f, err := gguf.Open(out)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, layout.Check(f).Err())
	ti, _ := f.Tensor("blk.0.attn_kv.weight")
	require.Equal(t, quant.F32, ti.Type)
	bitsEqual(t, float32(math.Ldexp(1, -135)), row(t, f, "blk.0.attn_kv.weight", 0)[0], "tiny subnormal")
	ti, _ = f.Tensor("blk.1.attn_kv.weight")
	require.Equal(t, quant.BF16, ti.Type)

	// Failures leave no output file behind.
	set["layers.0.attn.wkv.scale"].Data[0] = 0xFF
	path = filepath.Join(t.TempDir(), "w2.safetensors")
	writeST(t, path, set.list())
	src2, err := Open(path)
	require.NoError(t, err)
	defer src2.Close()
	bad := filepath.Join(t.TempDir(), "bad.gguf")
	_, err = ConvertFile(bad, src2, p, Options{Mode: ModeLossless, Tables: tables(t)})
	require.ErrorContains(t, err, "0xFF")
	entries, _ := os.ReadDir(filepath.Dir(bad))
	require.Empty(t, entries)
}
