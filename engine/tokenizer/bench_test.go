package tokenizer

import (
	"os"
	"testing"
)

// BenchmarkEncodePromessiSposi encodes a ~200 KB excerpt of the upstream
// speed-bench text (Italian prose); MB/s is input bytes per second.
func BenchmarkEncodePromessiSposi(b *testing.B) {
	tk := defaultTok(b)
	raw, err := os.ReadFile("testdata/promessi_sposi_excerpt.txt")
	if err != nil {
		b.Fatal(err)
	}
	text := string(raw)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	var ids []int
	for b.Loop() {
		ids = tk.AppendEncode(ids[:0], text, false)
	}
	b.ReportMetric(float64(len(ids)), "tokens")
}

// BenchmarkEncodeLongWord encodes 1 MiB without spaces: one piece for the
// pre-tokenizer, so BPE must be O(n log n).
func BenchmarkEncodeLongWord(b *testing.B) {
	tk := defaultTok(b)
	for _, bc := range []struct {
		name   string
		random bool
	}{{"repeated", false}, {"random", true}} {
		b.Run(bc.name, func(b *testing.B) {
			text := longWord(1<<20, bc.random)
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				tk.Encode(text)
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	tk := defaultTok(b)
	raw, err := os.ReadFile("testdata/promessi_sposi_excerpt.txt")
	if err != nil {
		b.Fatal(err)
	}
	ids := tk.Encode(string(raw))
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		tk.Decode(ids)
	}
}

func BenchmarkDefault(b *testing.B) {
	for b.Loop() {
		tab, err := DeepSeekV4()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := New(tab); err != nil {
			b.Fatal(err)
		}
	}
}
