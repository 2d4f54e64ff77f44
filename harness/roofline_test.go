package harness

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/convert/synth"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/harness/probe"
	"github.com/ds4-go/ds4/quant"
)

// TestDecodeTraffic checks the traffic read from the tensor table against
// one computed independently from the model's bound matrices and vectors.
func TestDecodeTraffic(t *testing.T) {
	m, err := engine.OpenTiny()
	if err != nil {
		t.Fatal(err)
	}
	p := m.Params
	parts, err := DecodeTraffic(m.File, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != p.Layers+3 {
		t.Fatalf("%d parts, want %d", len(parts), p.Layers+3)
	}
	k := int64(p.ExpertsUsed)
	f32 := func(vs ...[]float32) (n int64) {
		for _, v := range vs {
			n += 4 * int64(len(v))
		}
		return n
	}
	// The tiny model's quantized matrices are all Q8_0.
	mats := func(ms ...backends.Matrix) (bytes, int8, float int64) {
		for _, w := range ms {
			bytes += int64(len(w.Data))
			macs := int64(w.Rows) * int64(w.Cols) * int64(w.Experts)
			if w.Type == quant.Q8_0 {
				int8 += macs
			} else {
				float += macs
			}
		}
		return
	}
	expQ8 := func(ms ...backends.Matrix) (macs int64) {
		for _, w := range ms {
			if w.Type == quant.Q8_0 {
				macs += k * int64(w.Rows) * int64(w.Cols)
			}
		}
		return macs
	}
	var want Traffic
	for il, l := range m.Layers {
		got := parts[1+il]
		dense, i8, fl := mats(l.HCAttnFn, l.QA, l.QB, l.KV, l.OutA, l.OutB, l.CompKV, l.CompGate,
			l.IdxCompKV, l.IdxCompGate, l.HCFFNFn, l.GateInp, l.ShGate, l.ShUp, l.ShDown)
		dense += f32(l.HCAttnScale, l.HCAttnBase, l.AttnNorm, l.QANorm, l.KVNorm, l.Sinks, l.CompNorm,
			l.IdxCompNorm, l.HCFFNScale, l.HCFFNBase, l.FFNNorm, l.ExpBias)
		if l.Ratio != 0 {
			dense += 2 * int64(len(l.CompAPE)/l.Ratio) // one F16 row
		}
		if l.IdxCompAPE != nil {
			dense += 2 * int64(len(l.IdxCompAPE)/4)
		}
		if l.Tid2Eid != nil {
			dense += 4 * k
		}
		idx, _, _ := mats(l.IdxQB, l.IdxProj)
		perExpert := int64(len(l.GateExps.Data)+len(l.UpExps.Data)+len(l.DownExps.Data)) / int64(l.GateExps.Experts)
		expMACs := k * int64(3*p.Embd*p.ExpertFF)
		if got.DenseBytes != dense || got.ExpertBytes != k*perExpert || got.IndexerBytes != idx ||
			got.Bytes != dense+k*perExpert || got.MACsInt8 != i8+expMACs || got.MACsFloat != fl ||
			got.MACsQ8_0 != i8+expQ8(l.GateExps, l.UpExps, l.DownExps) {
			t.Errorf("layer %d: got %+v, want dense %d experts %d indexer %d int8 %d (Q8_0 %d) float %d",
				il, got, dense, k*perExpert, idx, i8+expMACs, i8+expQ8(l.GateExps, l.UpExps, l.DownExps), fl)
		}
		want.Bytes += dense + k*perExpert
	}
	embd := int64(len(m.Embd.Data) / m.Embd.Rows)
	if parts[0].Bytes != embd || parts[0].MACsInt8+parts[0].MACsFloat != 0 {
		t.Errorf("embd: got %+v, want %d bytes and no MACs", parts[0], embd)
	}
	hb, hi8, hfl := mats(m.OutHCFn, m.Output)
	hb += f32(m.OutHCBase, m.OutHCScale, m.OutNorm)
	if h := parts[len(parts)-2]; h.Bytes != hb || h.MACsInt8 != hi8 || h.MACsQ8_0 != hi8 || h.MACsFloat != hfl {
		t.Errorf("head: got %+v, want %d bytes, %d int8 and %d float MACs", h, hb, hi8, hfl)
	}
	want.Bytes += embd + hb
	if tot := parts[len(parts)-1]; tot.Part != "total" || tot.Bytes != want.Bytes {
		t.Errorf("total: got %+v, want %d bytes", tot, want.Bytes)
	}
}

func TestLimits(t *testing.T) {
	mc := Machine{ReadGBsAll: 50, Int8GopsAll: 400, FMAGflopsAll: 100}
	tot := Traffic{Bytes: 1e9, MACsInt8: 100e9, MACsFloat: 25e9}
	if got := DecodeLimit(mc, tot); got != 50 {
		t.Errorf("DecodeLimit = %v, want 50", got)
	}
	// 200 Gop at 400 Gop/s + 50 GFLOP at 100 GFLOP/s = 1 s per token.
	if got := PrefillLimit(mc, tot); math.Abs(got-1) > 1e-12 {
		t.Errorf("PrefillLimit = %v, want 1", got)
	}
	if PrefillLimitVNNI(mc, tot) != 0 {
		t.Error("PrefillLimitVNNI without a VNNI peak is not 0")
	}
	// 200 Gop at 800 Gop/s + 50 GFLOP at 100 GFLOP/s = 0.75 s per token.
	if got := PrefillLimitVNNI(Machine{VNNIGopsAll: 800, FMAGflopsAll: 100}, tot); math.Abs(got-1/0.75) > 1e-12 {
		t.Errorf("PrefillLimitVNNI = %v, want 4/3", got)
	}
	// 60e9 Q8_0 multiply-adds (120 Gop) at 300 Gop/s, the other 80 Gop
	// at 400 and 50 GFLOP at 100 GFLOP/s: 1.1 s per token.
	mix := Machine{Int8GopsAll: 400, Q8_0GopsAll: 300, FMAGflopsAll: 100}
	if got := PrefillLimitMix(mix, Traffic{MACsInt8: 100e9, MACsQ8_0: 60e9, MACsFloat: 25e9}); math.Abs(got-1/1.1) > 1e-12 {
		t.Errorf("PrefillLimitMix = %v, want 1/1.1", got)
	}
	if PrefillLimitMix(mc, tot) != 0 {
		t.Error("PrefillLimitMix without a Q8_0 peak is not 0")
	}
	if DecodeLimit(mc, Traffic{}) != 0 || PrefillLimit(Machine{}, tot) != 0 {
		t.Error("limits of empty inputs are not 0")
	}
	// Kernel floors of 10 ms and 15 ms: 40 tok/s at most.
	rates := []KernelRate{{Type: "q8_0", DecodeBytes: 5e8, FloorMs: 10}, {Type: "iq2_xxs", DecodeBytes: 1e8, FloorMs: 15}}
	if got := KernelLimit(rates); math.Abs(got-40) > 1e-9 {
		t.Errorf("KernelLimit = %v, want 40", got)
	}
	if KernelLimit(nil) != 0 || KernelLimit([]KernelRate{{DecodeBytes: 1}}) != 0 {
		t.Error("kernel limit without floors is not 0")
	}
	// The head's 80e9 int8 multiply-adds are shared by a prompt of 8
	// tokens: each token does tot's work, so the prefill limit is 1 tok/s.
	parts := []Traffic{{Part: "layer", MACsInt8: 90e9, MACsFloat: 25e9}, {Part: "head", MACsInt8: 80e9}, {Part: "total", Bytes: 1e9, MACsInt8: 170e9, MACsFloat: 25e9}}
	recs := RooflineRecords(RunMeta{RunID: "r"}, mc, parts, rates, Speed{PrefillTokens: 8, DecodeTPS: 40, PrefillTPS: 0.5}, nil, nil)
	for _, r := range recs {
		if math.Abs(r.KernelLimitTPS-40) > 1e-9 || math.Abs(r.DecodeKernelFraction-1) > 1e-9 {
			t.Errorf("record %+v: want kernel limit 40 and fraction 1", r)
		}
		if r.DecodeFraction != 0.8 || math.Abs(r.PrefillFraction-0.5) > 1e-12 || r.DecodeLimitTPS != 50 {
			t.Errorf("record %+v: want fractions 0.8 and 0.5", r)
		}
		if r.PrefillMACsInt8 != 100e9 || r.PrefillMACsFloat != 25e9 {
			t.Errorf("record %+v: want 100e9 int8 and 25e9 float prefill multiply-adds per token", r)
		}
	}
}

func TestPrefillWork(t *testing.T) {
	parts := []Traffic{
		{Part: "embd", MACsInt8: 0, MACsFloat: 0},
		{Part: "layer", MACsInt8: 300, MACsQ8_0: 100, MACsFloat: 20},
		{Part: "layer", MACsInt8: 300, MACsQ8_0: 100, MACsFloat: 20},
		{Part: "head", MACsInt8: 1000, MACsQ8_0: 1000, MACsFloat: 8},
		{Part: "total", MACsInt8: 1600, MACsQ8_0: 1200, MACsFloat: 48},
	}
	for _, c := range []struct {
		n                  int64
		int8, q8_0, floats int64
	}{
		{1, 1600, 1200, 48}, // a one-token prefill is a decode step
		{4, 850, 450, 42},
		{1000, 601, 201, 40},
		{0, 600, 200, 40}, // no prompt: the head is not counted at all
	} {
		w := PrefillWork(parts, c.n)
		if w.MACsInt8 != c.int8 || w.MACsQ8_0 != c.q8_0 || w.MACsFloat != c.floats {
			t.Errorf("PrefillWork(%d) = %d int8 (%d Q8_0), %d float multiply-adds; want %d (%d), %d",
				c.n, w.MACsInt8, w.MACsQ8_0, w.MACsFloat, c.int8, c.q8_0, c.floats)
		}
	}
}

// TestReprobeRead checks that a second bandwidth probe only raises the
// figures: a higher earlier figure stays, a zero one is measured.
func TestReprobeRead(t *testing.T) {
	cfg := MachineConfig{BufferBytes: 8 << 20, MinTime: 10 * time.Millisecond, Trials: 1, Threads: 2}
	mc := Machine{ReadGBs1: 1e9, FMAGflopsAll: 7}
	var steps []string
	if err := ReprobeRead(context.Background(), cfg, &mc, func(s string) { steps = append(steps, s) }); err != nil {
		t.Fatal(err)
	}
	if mc.ReadGBs1 != 1e9 {
		t.Errorf("ReadGBs1 = %v, want the higher 1e9 kept", mc.ReadGBs1)
	}
	if mc.ReadGBsAll <= 0 || mc.ReadGBsAll > 1e6 {
		t.Errorf("ReadGBsAll = %v, want a measured figure", mc.ReadGBsAll)
	}
	if mc.FMAGflopsAll != 7 {
		t.Errorf("FMAGflopsAll = %v, want 7 left alone", mc.FMAGflopsAll)
	}
	if want := "read bandwidth, 1 thread|read bandwidth, 2 threads"; strings.Join(steps, "|") != want {
		t.Errorf("steps %q, want %q", steps, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ReprobeRead(ctx, cfg, &mc, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: err = %v", err)
	}
}

// TestReprobeCompute checks that a second probe of the arithmetic peaks
// only raises them: a higher earlier figure stays, a zero one is measured,
// and the bandwidth is left alone.
func TestReprobeCompute(t *testing.T) {
	cfg := MachineConfig{BufferBytes: 8 << 20, MinTime: 10 * time.Millisecond, Trials: 1, Threads: 2}
	mc := Machine{Int8Gops1: 1e9, ReadGBsAll: 7}
	var steps []string
	if err := ReprobeCompute(context.Background(), cfg, &mc, func(s string) { steps = append(steps, s) }); err != nil {
		t.Fatal(err)
	}
	if mc.Int8Gops1 != 1e9 {
		t.Errorf("Int8Gops1 = %v, want the higher 1e9 kept", mc.Int8Gops1)
	}
	for name, v := range map[string]float64{"Int8GopsAll": mc.Int8GopsAll, "FMAGflops1": mc.FMAGflops1, "FMAGflopsAll": mc.FMAGflopsAll,
		"Q8_0Gops1": mc.Q8_0Gops1, "Q8_0GopsAll": mc.Q8_0GopsAll} {
		if v <= 0 || v > 1e6 {
			t.Errorf("%s = %v, want a measured figure", name, v)
		}
	}
	if mc.ReadGBsAll != 7 || mc.ReadGBs1 != 0 {
		t.Errorf("bandwidth %v, %v, want 0 and 7 left alone", mc.ReadGBs1, mc.ReadGBsAll)
	}
	want := []string{"float32 FMA, 1 thread", "float32 FMA, 2 threads", "int8 dot, 1 thread", "int8 dot, 2 threads",
		"int8 Q8_0 dot, 1 thread", "int8 Q8_0 dot, 2 threads"}
	if probe.HasVNNI() {
		want = append(want, "int8 VNNI dot, 1 thread", "int8 VNNI dot, 2 threads")
	}
	if !slices.Equal(steps, want) {
		t.Errorf("steps %q, want %q", steps, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ReprobeCompute(ctx, cfg, &mc, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: err = %v", err)
	}
}

// TestSetFloors checks the floors against a bandwidth raised after the
// kernels were measured: a kernel slower than the bandwidth keeps its
// rate, a faster one and a table row go at the bandwidth.
func TestSetFloors(t *testing.T) {
	rates := []KernelRate{
		{Type: "q8_0", DecodeBytes: 6e8, GBsAll: 90, FloorMs: 99},
		{Type: "iq2_xxs", DecodeBytes: 2e8, GBsAll: 20, FloorMs: 99},
		{Type: "i32", DecodeBytes: 3e6, FloorMs: 99},
	}
	SetFloors(rates, Machine{ReadGBsAll: 60})
	for i, want := range []float64{10, 10, 0.05} {
		if math.Abs(rates[i].FloorMs-want) > 1e-9 {
			t.Errorf("%s floor %v ms, want %v", rates[i].Type, rates[i].FloorMs, want)
		}
	}
	if got := KernelLimit(rates); math.Abs(got-1000/20.05) > 1e-9 {
		t.Errorf("KernelLimit = %v, want %v", got, 1000/20.05)
	}
	SetFloors(rates, Machine{})
	if rates[2].FloorMs != 0 || KernelLimit(rates) != 0 {
		t.Errorf("no bandwidth: floors %+v, want the table row's 0 and no limit", rates)
	}
}

func TestMeasureMachine(t *testing.T) {
	mc, err := MeasureMachine(context.Background(), MachineConfig{BufferBytes: 8 << 20, MinTime: 20 * time.Millisecond, Trials: 1, Threads: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rates := map[string]float64{"read 1": mc.ReadGBs1, "read all": mc.ReadGBsAll, "fma 1": mc.FMAGflops1,
		"fma all": mc.FMAGflopsAll, "int8 1": mc.Int8Gops1, "int8 all": mc.Int8GopsAll, "q8_0 1": mc.Q8_0Gops1, "q8_0 all": mc.Q8_0GopsAll}
	if probe.HasVNNI() {
		rates["vnni 1"], rates["vnni all"] = mc.VNNIGops1, mc.VNNIGopsAll
	} else if mc.VNNIGops1 != 0 || mc.VNNIGopsAll != 0 {
		t.Errorf("VNNI peaks %v, %v on a machine without VNNI", mc.VNNIGops1, mc.VNNIGopsAll)
	}
	for name, v := range rates {
		// Any machine does more than 0.1 G per second and less than 100 T.
		if !(v > 0.1 && v < 1e5) {
			t.Errorf("%s = %v G/s", name, v)
		}
	}
	if mc.ProbeThreads != 2 || mc.BufferBytes != 8<<20 {
		t.Errorf("machine %+v: want 2 threads, 8 MiB", mc)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := MeasureMachine(ctx, MachineConfig{BufferBytes: 1 << 20}, nil); err == nil {
		t.Error("cancelled context: no error")
	}
	if _, err := MeasureMachine(context.Background(), MachineConfig{BufferBytes: 64}, nil); err == nil {
		t.Error("64-byte buffer: no error")
	}
}

// TestMeasureSpeedStreaming checks that a streaming model's speed run
// reports the expert cache's work over the timed decode alone: every
// request of its tokens and none of the prefills' or the warm-up's.
func TestMeasureSpeedStreaming(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	_, err := synth.WriteFile(path, synth.Options{Params: layout.Tiny(), Recipe: layout.RecipeQ2, Seed: 1})
	require.NoError(t, err)
	m, err := engine.Open(path)
	require.NoError(t, err)
	defer m.File.Close()
	be := cpu.New(2)
	defer be.Close()
	sp, err := MeasureSpeed(context.Background(), m, be, 8, 3, nil)
	require.NoError(t, err)
	require.Nil(t, sp.Experts, "a mapped model")
	require.NoError(t, m.Stream(path, engine.StreamOptions{Slots: 4}))
	sp, err = MeasureSpeed(context.Background(), m, be, 8, 3, nil)
	require.NoError(t, err)
	require.NotNil(t, sp.Experts)
	p := m.Params
	require.Equal(t, int64(3*p.Layers*p.ExpertsUsed), sp.Experts.Hits+sp.Experts.Misses)
	require.Positive(t, sp.Experts.Busy)
}

func TestMeasureSpeedAndParquet(t *testing.T) {
	m, err := engine.OpenTiny()
	if err != nil {
		t.Fatal(err)
	}
	be := cpu.New(2)
	defer be.Close()
	var ticks int
	sp, err := MeasureSpeed(context.Background(), m, be, 8, 3, func(n int) { ticks += n })
	if err != nil {
		t.Fatal(err)
	}
	if sp.PrefillTPS <= 0 || sp.PrefillFirstTPS <= 0 || sp.DecodeTPS <= 0 || sp.PrefillTokens != 8 || sp.DecodeTokens != 3 || ticks != 2*8+speedWarmup+3 {
		t.Errorf("speed %+v, %d ticks", sp, ticks)
	}
	if _, err := MeasureSpeed(context.Background(), m, be, 0, 3, nil); err == nil {
		t.Error("0 prefill tokens: no error")
	}
	parts, err := DecodeTraffic(m.File, m.Params)
	if err != nil {
		t.Fatal(err)
	}
	meta := RunMeta{RunID: "roof", ModelName: "tiny", StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	mc := Machine{ReadGBs1: 30, ReadGBsAll: 60, FMAGflopsAll: 100, Int8GopsAll: 200}
	path, err := WriteRun(t.TempDir(), RooflineTable, meta, RooflineRecords(meta, mc, parts, nil, sp, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := ReadRows[RooflineRecord](path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(parts) {
		t.Fatalf("%d rows, want %d", len(rows), len(parts))
	}
	last := rows[len(rows)-1]
	if last.Traffic != parts[len(parts)-1] || last.Machine != mc || last.Speed != sp || last.RunID != "roof" ||
		last.DecodeLimitTPS != DecodeLimit(mc, parts[len(parts)-1]) {
		t.Errorf("last row %+v does not round-trip", last)
	}
}

func TestLockWeights(t *testing.T) {
	m, err := engine.OpenTiny()
	if err != nil {
		t.Fatal(err)
	}
	// Without the privilege to pin 119 MB the call must fail cleanly,
	// naming the tensor; with it, every tensor is pinned and unpinned.
	unlock, err := LockWeights(m.File)
	if err != nil && !strings.Contains(err.Error(), "harness: lock tensor ") {
		t.Fatalf("LockWeights: %v", err)
	}
	unlock()
}

// TestDecodeBytesByType checks the per-type bytes against the tiny model's
// bound matrices, summed independently of the tensor table: every
// matrix's bytes (ExpertsUsed experts of a stack) under its type, and the
// types together against DecodeTraffic's total.
func TestDecodeBytesByType(t *testing.T) {
	m, err := engine.OpenTiny()
	if err != nil {
		t.Fatal(err)
	}
	byType, err := DecodeBytesByType(m.File, m.Params)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := DecodeTraffic(m.File, m.Params)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, n := range byType {
		sum += n
	}
	if total := parts[len(parts)-1].Bytes; sum != total {
		t.Errorf("types sum to %d bytes, DecodeTraffic's total is %d", sum, total)
	}
	want := map[quant.Type]int64{}
	k := m.Params.ExpertsUsed
	for _, l := range m.Layers {
		for _, w := range []backends.Matrix{l.QA, l.QB, l.KV, l.OutA, l.OutB, l.ShGate, l.ShUp, l.ShDown} {
			want[w.Type] += int64(len(w.Data))
		}
		for _, w := range []backends.Matrix{l.GateExps, l.UpExps, l.DownExps} {
			want[w.Type] += int64(len(w.Data) / w.Experts * k)
		}
	}
	want[m.Output.Type] += int64(len(m.Output.Data))
	for typ, n := range want {
		if typ == quant.F32 || typ == quant.F16 {
			continue // norms, mixers and the embedding row share these types
		}
		if byType[typ] != n {
			t.Errorf("%v: %d bytes, want %d", typ, byType[typ], n)
		}
	}
}

// TestMeasureKernels times the tiny model's types with short probes and
// checks the floors against the rates and bytes they come from.
func TestMeasureKernels(t *testing.T) {
	m, err := engine.OpenTiny()
	if err != nil {
		t.Fatal(err)
	}
	byType, err := DecodeBytesByType(m.File, m.Params)
	if err != nil {
		t.Fatal(err)
	}
	byType[quant.I32] = 4096 // a lookup-table row: no kernel, read at bandwidth
	mc := Machine{ReadGBsAll: 20}
	k := quant.BestKernels()
	rates, err := MeasureKernels(context.Background(), k, byType, mc, MachineConfig{BufferBytes: 1 << 20, Threads: 2, MinTime: 8 * time.Millisecond, Trials: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rates) != len(byType) {
		t.Fatalf("%d rates for %d types", len(rates), len(byType))
	}
	for i, r := range rates {
		if i > 0 && r.DecodeBytes > rates[i-1].DecodeBytes {
			t.Errorf("rates not sorted by bytes: %+v after %+v", r, rates[i-1])
		}
		rate := min(r.GBsAll, mc.ReadGBsAll)
		if r.Type == quant.I32.String() {
			if r.GBsAll != 0 || r.GBs1 != 0 {
				t.Errorf("I32 has a kernel rate: %+v", r)
			}
			rate = mc.ReadGBsAll
		} else if !(r.GBs1 > 0.01 && r.GBsAll > 0.01 && r.GBs1 < 1e4 && r.GBsAll < 1e4) {
			t.Errorf("%s: implausible rates %+v", r.Type, r)
		}
		if want := float64(r.DecodeBytes) / (rate * 1e9) * 1e3; math.Abs(r.FloorMs-want) > 1e-9*want {
			t.Errorf("%s floor %v ms, want %v", r.Type, r.FloorMs, want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := MeasureKernels(ctx, k, byType, mc, MachineConfig{BufferBytes: 1 << 20, MinTime: time.Millisecond}, nil); err == nil {
		t.Error("cancelled context: no error")
	}
}

func TestMeasureDecodeOps(t *testing.T) {
	m, err := engine.OpenTiny()
	if err != nil {
		t.Fatal(err)
	}
	be := cpu.New(2)
	defer be.Close()
	const steps = 3
	ops, step, err := MeasureDecodeOps(context.Background(), m, be, 8, steps)
	if err != nil {
		t.Fatal(err)
	}
	if step <= 0 || len(ops) == 0 {
		t.Fatalf("step %v, %d ops", step, len(ops))
	}
	var sum float64
	byName := map[string]DecodeOp{}
	for i, op := range ops {
		if strings.Contains(op.Op, "blk.0.") || strings.Contains(op.Op, "blk.1.") {
			t.Errorf("op %q names a layer", op.Op)
		}
		if i > 0 && op.Millis > ops[i-1].Millis {
			t.Errorf("op %q (%v ms) after %q (%v ms)", op.Op, op.Millis, ops[i-1].Op, ops[i-1].Millis)
		}
		sum += op.Millis
		byName[op.Op] = op
	}
	if sum > step.Seconds()*1e3 {
		t.Errorf("products take %v ms of a %v step", sum, step)
	}
	// The output head is one product a step, its whole matrix; the
	// attention output projection one per layer.
	if head := byName["output.weight"]; head.Calls != 1 || head.Bytes != int64(len(m.Output.Data)) {
		t.Errorf("output head %+v, want 1 call of %d bytes", head, len(m.Output.Data))
	}
	if ob := byName["blk.N.attn_output_b.weight"]; ob.Calls != float64(len(m.Layers)) {
		t.Errorf("attn_output_b %+v, want %d calls a step", ob, len(m.Layers))
	}
	if _, _, err := MeasureDecodeOps(context.Background(), m, be, 8, 0); err == nil {
		t.Error("0 decode steps: no error")
	}
}
