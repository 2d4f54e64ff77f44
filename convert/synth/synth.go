// Package synth writes synthetic DS4 models: GGUF files with the exact
// layout, metadata and tokenizer of the published files and seeded random
// weights that are valid blocks of every quant type.
package synth

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"

	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/gguf"
	"github.com/ds4-go/ds4/internal/atomicfile"
	"github.com/ds4-go/ds4/quant"
)

// Options describe the model to synthesize.
type Options struct {
	Params  layout.Params
	Recipe  layout.Recipe
	Seed    uint64
	Workers int               // generator goroutines; 0 means GOMAXPROCS
	Tables  *tokenizer.Tables // nil means the embedded DeepSeek V4 tables
	// Progress, if set, is called with the number of tensor bytes produced.
	Progress func(n int64)
}

// Metadata returns the key-values of a synthetic file: the model's
// hyperparameters, the tokenizer tables and provenance.
func Metadata(opt Options) []gguf.KV {
	kv := append(opt.Params.KV(), layout.TokenizerKV(opt.Tables)...)
	return append(kv,
		gguf.KV{Key: "ds4go.synth.seed", Value: gguf.Uint64(opt.Seed)},
		gguf.KV{Key: "ds4go.synth.recipe", Value: gguf.String(opt.Recipe.Name)},
	)
}

// Write writes the synthetic model to w and returns the tensor infos it
// wrote. Memory use is bounded by a few chunks per worker, whatever the
// model size.
func Write(w io.Writer, opt Options) ([]gguf.TensorInfo, error) {
	infos, err := write(w, opt)
	if err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	return infos, nil
}

// prepare checks opt, fills in its default tokenizer tables and returns
// the model's tensors and their infos for the writer.
func prepare(opt *Options) ([]layout.Tensor, []gguf.TensorInfo, error) {
	if err := opt.Params.Validate(); err != nil {
		return nil, nil, err
	}
	if err := opt.Params.CheckRecipe(opt.Recipe); err != nil {
		return nil, nil, err
	}
	if opt.Tables == nil {
		t, err := tokenizer.DeepSeekV4()
		if err != nil {
			return nil, nil, err
		}
		opt.Tables = t
	}
	catalog := opt.Params.Tensors(opt.Recipe)
	infos := make([]gguf.TensorInfo, len(catalog))
	for i, t := range catalog {
		infos[i] = gguf.TensorInfo{Name: t.Name, Type: t.Type, Dims: t.Dims}
	}
	return catalog, infos, nil
}

func write(w io.Writer, opt Options) ([]gguf.TensorInfo, error) {
	catalog, infos, err := prepare(&opt)
	if err != nil {
		return nil, err
	}
	gw, err := gguf.NewWriter(w, Metadata(opt), infos)
	if err != nil {
		return nil, err
	}
	if err := generate(gw, catalog, gw.Tensors(), opt); err != nil {
		return nil, err
	}
	if err := gw.Close(); err != nil {
		return nil, err
	}
	return gw.Tensors(), nil
}

// WriteFile writes the model to path atomically: into a temporary file in
// the same directory, synced, then renamed over path.
func WriteFile(path string, opt Options) ([]gguf.TensorInfo, error) {
	var infos []gguf.TensorInfo
	err := atomicfile.Write(path, 0o644, func(w io.Writer) error {
		var err error
		infos, err = write(w, opt)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	return infos, nil
}

// WriteSparse writes the model opt describes to path at its full size with
// all-zero tensor data: the header and tensor table are written and the
// data section is left a hole, so a file of any size takes next to no
// disk. Tests use it to load and inspect real-shape models.
func WriteSparse(path string, opt Options) ([]gguf.TensorInfo, error) {
	infos, err := writeSparse(path, opt)
	if err != nil {
		return nil, fmt.Errorf("synth: sparse %s: %w", path, err)
	}
	return infos, nil
}

func writeSparse(path string, opt Options) ([]gguf.TensorInfo, error) {
	_, infos, err := prepare(&opt)
	if err != nil {
		return nil, err
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gw, err := gguf.NewWriter(f, Metadata(opt), infos)
	if err != nil {
		return nil, err
	}
	if err := gw.Flush(); err != nil {
		return nil, err
	}
	start, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, err
	}
	infos = gw.Tensors()
	last := infos[len(infos)-1]
	if err := f.Truncate(start + int64(last.Offset+last.Size)); err != nil {
		return nil, err
	}
	return infos, f.Close()
}

// chunkBytes is the target size of one unit of generation work.
const chunkBytes = 4 << 20

type job struct {
	t        layout.Tensor
	seed     uint64 // per tensor
	index    int    // chunk number within the tensor
	row0     int
	rows     int
	rowBytes int
	experts  int // the model's expert count, for hash tables
	buf      []byte
	done     chan struct{}
}

// generate fills the tensors chunk by chunk on worker goroutines and
// writes the chunks in order. Each chunk's content depends only on the
// seed, the tensor name and the chunk number, so the output is the same
// for any number of workers.
func generate(w io.Writer, catalog []layout.Tensor, infos []gguf.TensorInfo, opt Options) error {
	workers := opt.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	jobs := make(chan *job)
	ordered := make(chan *job, 2*workers)
	free := make(chan []byte, 3*workers)
	stop := make(chan struct{})
	defer close(stop)
	for range workers {
		go func() {
			for j := range jobs {
				fill(j)
				close(j.done)
			}
		}()
	}
	go func() {
		defer close(ordered)
		defer close(jobs)
		for ti, t := range catalog {
			rowBytes := int(infos[ti].Size) / int(rowsOf(t))
			perChunk := max(1, chunkBytes/rowBytes)
			seed := tensorSeed(opt.Seed, t.Name)
			for index, row0 := 0, 0; row0 < int(rowsOf(t)); index++ {
				n := min(perChunk, int(rowsOf(t))-row0)
				var buf []byte
				select {
				case buf = <-free:
				default:
				}
				if cap(buf) < n*rowBytes {
					buf = make([]byte, n*rowBytes)
				}
				j := &job{t: t, seed: seed, index: index, row0: row0, rows: n, rowBytes: rowBytes, experts: opt.Params.Experts, buf: buf[:n*rowBytes], done: make(chan struct{})}
				select {
				case ordered <- j:
				case <-stop:
					return
				}
				select {
				case jobs <- j:
				case <-stop:
					return
				}
				row0 += n
			}
		}
	}()
	for j := range ordered {
		<-j.done
		if _, err := w.Write(j.buf); err != nil {
			return err
		}
		if opt.Progress != nil {
			opt.Progress(int64(len(j.buf)))
		}
		select {
		case free <- j.buf:
		default:
		}
	}
	return nil
}

func rowsOf(t layout.Tensor) uint64 {
	n := uint64(1)
	for _, d := range t.Dims[1:] {
		n *= d
	}
	return n
}

func tensorSeed(seed uint64, name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return seed ^ h.Sum64()
}

// fill generates one chunk of rows.
func fill(j *job) {
	rng := rand.New(rand.NewPCG(j.seed, uint64(j.index)))
	t := j.t
	ne0 := int(t.Dims[0])
	// std is the typical weight magnitude: 1/sqrt(fan-in) keeps random
	// activations of order one through every projection.
	std := float32(1 / math.Sqrt(float64(ne0)))
	switch t.Type {
	case quant.F32:
		for i := 0; i < len(j.buf); i += 4 {
			binary.LittleEndian.PutUint32(j.buf[i:], math.Float32bits(vectorValue(t.Name, rng)))
		}
	case quant.F16:
		a := std * sqrt3 // uniform in ±a has standard deviation std
		switch {
		case t.Name == "token_embd.weight":
			a = sqrt3
		case strings.HasSuffix(t.Name, "_ape.weight"):
			a = 0.1
		}
		for i := 0; i < len(j.buf); i += 2 {
			binary.LittleEndian.PutUint16(j.buf[i:], quant.F32ToF16(a*uniform(rng)))
		}
	case quant.I32:
		// Each row (a token) routes to ExpertsUsed distinct experts.
		nExp := int(t.Dims[0]) // ExpertsUsed per row
		perm := make([]int32, j.experts)
		for r := range j.rows {
			for i := range perm {
				perm[i] = int32(i)
			}
			for i := range nExp {
				k := i + rng.IntN(j.experts-i)
				perm[i], perm[k] = perm[k], perm[i]
				binary.LittleEndian.PutUint32(j.buf[r*j.rowBytes+4*i:], uint32(perm[i]))
			}
		}
	default:
		fillBlocks(j.buf, t.Type, std, rng)
	}
}

// uniform returns a float32 uniform in [-1, 1).
func uniform(rng *rand.Rand) float32 {
	return float32(rng.Uint32()>>8)*(2.0/(1<<24)) - 1
}

// vectorValue draws an element of a 1-D F32 tensor, by role.
func vectorValue(name string, rng *rand.Rand) float32 {
	u := uniform(rng)
	switch {
	case strings.HasSuffix(name, "norm.weight"):
		return 1 + 0.1*u
	case strings.Contains(name, "_scale.weight"):
		return 0.5 + 0.1*u
	case strings.Contains(name, "_base.weight"):
		return 0.1 * u
	case strings.HasSuffix(name, "attn_sinks.weight"):
		return 0.5 * u
	}
	return 0.01 * u // router selection bias
}

// fillBlocks fills buf with random blocks of a quantized type whose
// dequantized values have a magnitude of about std. Every bit pattern of
// the code fields is a legal code, so only the f16 scales need care: they
// are positive normal numbers, jittered per block.
func fillBlocks(buf []byte, typ quant.Type, std float32, rng *rand.Rand) {
	bb := typ.BlockBytes()
	for off := 0; off < len(buf); off += bb {
		blk := buf[off : off+bb]
		randomBytes(blk, rng)
		jitter := 0.75 + 0.25*uniform(rng) // in [0.5, 1)
		scale := func(v float32) [2]byte {
			var b [2]byte
			binary.LittleEndian.PutUint16(b[:], quant.F32ToF16(max(v*jitter, minNormalF16)))
			return b
		}
		switch typ {
		case quant.Q8_0:
			d := scale(std * sqrt3 / 127)
			copy(blk[0:2], d[:])
			for i := 2; i < 34; i++ {
				if blk[i] == 0x80 { // ggml's quantizer never emits -128
					blk[i] = 0x81
				}
			}
		case quant.Q2_K: // value ≈ d·sc·q − dmin·m with sc, m ≤ 15, q ≤ 3
			d, dm := scale(std/10), scale(std/20)
			copy(blk[80:82], d[:])
			copy(blk[82:84], dm[:])
		case quant.Q4_K: // value ≈ d·sc·q − dmin·m with sc, m ≤ 63, q ≤ 15
			d, dm := scale(std/200), scale(std/60)
			copy(blk[0:2], d[:])
			copy(blk[2:4], dm[:])
		case quant.IQ2_XXS: // value = d·(0.5+ls)/4·{8,25,43}
			d := scale(std / 50)
			copy(blk[0:2], d[:])
		default:
			panic(fmt.Sprintf("synth: no random block generator for %v", typ))
		}
	}
}

// minNormalF16 is the smallest positive normal binary16 value, 2^-14.
const minNormalF16 = 1.0 / (1 << 14)

func randomBytes(b []byte, rng *rand.Rand) {
	for len(b) >= 8 {
		binary.LittleEndian.PutUint64(b, rng.Uint64())
		b = b[8:]
	}
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}

// sqrt3 scales a uniform [-1, 1) draw to unit standard deviation.
const sqrt3 = 1.7320508075688772
