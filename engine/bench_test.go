//go:build unix

package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/convert/synth"
	"github.com/ds4-go/ds4/engine/layout"
)

// flashSlice returns a 2-layer real-shape Flash slice: the file named by
// DS4_FLASH_SLICE, or one synthesized once into sliceDir (5.5 GB, about
// 20 s), which TestMain removes when the test binary ends.
var flashSlice = sync.OnceValues(func() (string, error) {
	if p := os.Getenv("DS4_FLASH_SLICE"); p != "" {
		return p, nil
	}
	dir, err := os.MkdirTemp("", "ds4-flash2-")
	if err != nil {
		return "", err
	}
	sliceDir = dir
	p := layout.Flash()
	p.SetLayers(2)
	path := filepath.Join(dir, "flash2.gguf")
	_, err = synth.WriteFile(path, synth.Options{Params: p, Recipe: layout.RecipeQ2, Seed: 1})
	return path, err
})

// sliceDir is the directory flashSlice synthesized its slice in, if any.
var sliceDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if sliceDir != "" {
		os.RemoveAll(sliceDir)
	}
	os.Exit(code)
}

// openFlash opens the Flash slice with its weights pinned in memory
// (harness.LockWeights does the same for ds4-bench): on a machine that
// reclaims cold pages, rarely routed experts would otherwise be read back
// from disk during the measurement.
func openFlash(b *testing.B) *Model {
	path, err := flashSlice()
	if err != nil {
		b.Fatal(err)
	}
	m, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	for _, t := range m.File.Tensors {
		if err := unix.Mlock(m.File.TensorData(t)); err != nil {
			b.Logf("weights not pinned: %s: %v", t.Name, err)
			break
		}
	}
	return m
}

// weightBytesPerToken is the weight traffic of one decode step: every
// dense matrix, the output head and ExpertsUsed experts per layer.
func weightBytesPerToken(m *Model) int64 {
	var n int64
	for _, l := range m.Layers {
		for _, w := range []int{len(l.HCAttnFn.Data), len(l.QA.Data), len(l.QB.Data), len(l.KV.Data), len(l.OutA.Data), len(l.OutB.Data),
			len(l.CompKV.Data), len(l.CompGate.Data), len(l.IdxCompKV.Data), len(l.IdxCompGate.Data),
			len(l.HCFFNFn.Data), len(l.GateInp.Data), len(l.ShGate.Data), len(l.ShUp.Data), len(l.ShDown.Data)} {
			n += int64(w)
		}
		per := len(l.GateExps.Data)/l.GateExps.Experts + len(l.UpExps.Data)/l.UpExps.Experts + len(l.DownExps.Data)/l.DownExps.Experts
		n += int64(per * m.Params.ExpertsUsed)
	}
	return n + int64(len(m.OutHCFn.Data)+len(m.Output.Data))
}

// BenchmarkFlash2Decode decodes 16 tokens after a 16-token prefill on the
// 2-layer Flash slice and reports tokens/s and weight GB/s (the weight
// bytes of one step, weightBytesPerToken, times tokens/s).
func BenchmarkFlash2Decode(b *testing.B) {
	m := openFlash(b)
	defer m.File.Close()
	be := cpu.New(0)
	defer be.Close()
	s, err := NewSession(m, be, Options{Context: 256})
	if err != nil {
		b.Fatal(err)
	}
	toks := testTokens(32, m.Params.Vocab)
	if err := s.Prefill(toks[:16]); err != nil {
		b.Fatal(err)
	}
	snap := s.Snapshot()
	b.ResetTimer()
	var decoded int
	var elapsed time.Duration
	cpu0 := cpuTime()
	for range b.N {
		if err := s.Restore(snap); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for _, t := range toks[16:] {
			if err := s.Decode(t); err != nil {
				b.Fatal(err)
			}
		}
		elapsed += time.Since(start)
		decoded += 16
	}
	tps := float64(decoded) / elapsed.Seconds()
	b.ReportMetric(tps, "tok/s")
	b.ReportMetric(tps*float64(weightBytesPerToken(m))/1e9, "weightGB/s")
	// CPU time per token measures the work, which other processes on a
	// shared machine disturb far less than the elapsed time.
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Millisecond)/float64(decoded), "cpu-ms/tok")
}

// cpuTime returns the user and system time this process has used.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFlash2Prefill prefills 64 tokens on the 2-layer Flash slice in
// one chunk.
func BenchmarkFlash2Prefill(b *testing.B) { benchPrefill(b, 64, PrefillChunk) }

// BenchmarkFlash2PrefillChunk prefills 3072 tokens on the 2-layer Flash
// slice in chunks of several sizes: the measurement behind PrefillChunk.
// Larger chunks route more tokens to each expert, so each expert's rows
// are packed for the tile kernels fewer times, until the chunk's buffers
// outgrow the caches.
func BenchmarkFlash2PrefillChunk(b *testing.B) {
	for _, c := range []int{256, 512, 768, 1024, 1536} {
		b.Run(fmt.Sprintf("chunk=%d", c), func(b *testing.B) { benchPrefill(b, 3072, c) })
	}
}

func benchPrefill(b *testing.B, n, chunk int) {
	m := openFlash(b)
	defer m.File.Close()
	be := cpu.New(0)
	defer be.Close()
	s, err := NewSession(m, be, Options{Context: n + 1})
	if err != nil {
		b.Fatal(err)
	}
	s.chunk = chunk
	toks := testTokens(n, m.Params.Vocab)
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for range b.N {
		s.Reset()
		if err := s.Prefill(toks); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "tok/s")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Millisecond)/float64(n*b.N), "cpu-ms/tok")
}

// BenchmarkDecodeBatch decodes 16 batched steps over N sessions, each
// after its own 16-token prompt, on the 2-layer Flash slice and reports
// the aggregate tokens/s (N per step) and the CPU time per token.
func BenchmarkDecodeBatch(b *testing.B) {
	m := openFlash(b)
	defer m.File.Close()
	be := cpu.New(0)
	defer be.Close()
	const prompt, steps = 16, 16
	for _, n := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			ss := make([]*Session, n)
			snaps := make([]*Snapshot, n)
			toks := make([][]int, n)
			for i := range ss {
				s, err := NewSession(m, be, Options{Context: 256})
				require.NoError(b, err)
				toks[i] = testTokens(prompt+steps+i, m.Params.Vocab)[i:]
				require.NoError(b, s.Prefill(toks[i][:prompt]))
				ss[i], snaps[i] = s, s.Snapshot()
			}
			step := make([]int, n)
			b.ResetTimer()
			var elapsed time.Duration
			cpu0 := cpuTime()
			for range b.N {
				for i, s := range ss {
					require.NoError(b, s.Restore(snaps[i]))
				}
				start := time.Now()
				for j := range steps {
					for i := range ss {
						step[i] = toks[i][prompt+j]
					}
					if err := DecodeBatch(ss, step); err != nil {
						b.Fatal(err)
					}
				}
				elapsed += time.Since(start)
			}
			decoded := float64(n * steps * b.N)
			b.ReportMetric(decoded/elapsed.Seconds(), "tok/s")
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Millisecond)/decoded, "cpu-ms/tok")
		})
	}
}

// BenchmarkPrefillBatch prefills a 77-token prompt (a short chat turn)
// in each of 8 sessions on the 2-layer Flash slice two ways: way=each
// runs the 8 prefills one after the other, way=batch runs them as one
// EvalBatch pass, and reports the prompt tokens per second.
func BenchmarkPrefillBatch(b *testing.B) {
	m := openFlash(b)
	defer m.File.Close()
	be := cpu.New(0)
	defer be.Close()
	const n, prompt = 8, 77
	ws := NewWorkspace(m)
	ss := make([]*Session, n)
	toks := make([][]int, n)
	for i := range ss {
		s, err := NewSession(m, be, Options{Context: 256, Workspace: ws})
		require.NoError(b, err)
		ss[i], toks[i] = s, testTokens(prompt+i, m.Params.Vocab)[i:]
	}
	for _, way := range []string{"each", "batch"} {
		b.Run("way="+way, func(b *testing.B) {
			for b.Loop() {
				for _, s := range ss {
					s.Reset()
				}
				if way == "batch" {
					require.NoError(b, EvalBatch(ss, toks))
					continue
				}
				for i, s := range ss {
					require.NoError(b, s.Prefill(toks[i]))
				}
			}
			b.ReportMetric(float64(n*prompt*b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}
