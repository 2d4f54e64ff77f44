// Package steering builds, reads and writes directional activation
// steering vectors (docs/steering.md).
//
// A direction holds one unit vector per layer; the engine applies it as
// y := y − s·v·dot(v, y) to a sublayer output y (see engine.Steering).
package steering

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/gonum/floats"

	"github.com/ds4-go/ds4/engine"
)

// Format is the format identifier written in the metadata file.
const Format = "ds4-directional-steering-v1"

// DefaultNote is the note written in the metadata file when none is given.
const DefaultNote = "runtime positive scale suppresses this direction; negative scale amplifies it"

// Direction is one steering vector per layer.
type Direction struct {
	Layers, Embd int
	V            []float32 // Layers × Embd values, layer-major
}

// Layer returns layer l's vector.
func (d *Direction) Layer(l int) []float32 { return d.V[l*d.Embd : (l+1)*d.Embd] }

// Meta is the JSON metadata written next to a direction's .f32 file.
type Meta struct {
	Format                   string `json:"format"`
	Shape                    [2]int `json:"shape"`
	Component                string `json:"component"` // "ffn_out" or "attn_out"
	Thinking                 bool   `json:"thinking"`
	PairNormalize            bool   `json:"pair_normalize"`
	OrthogonalizeControlMean bool   `json:"orthogonalize_control_mean"`
	GoodFile                 string `json:"good_file"`
	BadFile                  string `json:"bad_file"`
	Model                    string `json:"model"`
	Note                     string `json:"note"`
}

// stem returns path without its extension.
func stem(path string) string { return strings.TrimSuffix(path, filepath.Ext(path)) }

// Read loads a .f32 direction file of exactly layers × embd little-endian
// float32 values.
func Read(path string, layers, embd int) (*Direction, error) {
	if layers <= 0 || embd <= 0 {
		return nil, fmt.Errorf("steering: invalid shape %d×%d", layers, embd)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("steering: %w", err)
	}
	if want := 4 * layers * embd; len(b) != want {
		return nil, fmt.Errorf("steering: %s has %d bytes, want %d (%d layers × %d float32)", path, len(b), want, layers, embd)
	}
	d := &Direction{Layers: layers, Embd: embd, V: make([]float32, layers*embd)}
	for i := range d.V {
		d.V[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return d, nil
}

// Write stores d as <stem>.f32 and meta as <stem>.json, where stem is path
// without its extension; meta's format and shape are filled from d and an
// empty note becomes DefaultNote.
func Write(path string, d *Direction, meta Meta) error {
	if d.Layers <= 0 || d.Embd <= 0 || len(d.V) != d.Layers*d.Embd {
		return fmt.Errorf("steering: direction has %d values for shape %d×%d", len(d.V), d.Layers, d.Embd)
	}
	b := make([]byte, 4*len(d.V))
	for i, v := range d.V {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	meta.Format, meta.Shape = Format, [2]int{d.Layers, d.Embd}
	if meta.Note == "" {
		meta.Note = DefaultNote
	}
	j, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return fmt.Errorf("steering: %w", err)
	}
	s := stem(path)
	if err := os.WriteFile(s+".f32", b, 0o644); err != nil {
		return fmt.Errorf("steering: %w", err)
	}
	if err := os.WriteFile(s+".json", append(j, '\n'), 0o644); err != nil {
		return fmt.Errorf("steering: %w", err)
	}
	return nil
}

// ReadMeta loads the <stem>.json metadata of the direction at path.
func ReadMeta(path string) (*Meta, error) {
	b, err := os.ReadFile(stem(path) + ".json")
	if err != nil {
		return nil, fmt.Errorf("steering: %w", err)
	}
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("steering: %s: %w", stem(path)+".json", err)
	}
	if m.Format != Format {
		return nil, fmt.Errorf("steering: %s: format %q, want %q", stem(path)+".json", m.Format, Format)
	}
	return &m, nil
}

// BuildOptions select the aggregation variants of Build.
type BuildOptions struct {
	PairNormalize bool // average the normalized per-pair differences
	Orthogonalize bool // remove the component along the contrast mean
}

// Build aggregates per-pair activations, indexed [pair][layer][embd], into
// a direction (docs/steering.md#building-a-direction); the lists are truncated to the
// shorter one.
func Build(good, bad [][][]float32, opt BuildOptions) (*Direction, error) {
	n := min(len(good), len(bad))
	if n == 0 {
		return nil, errors.New("steering: no activation pairs")
	}
	layers := len(good[0])
	if layers == 0 || len(good[0][0]) == 0 {
		return nil, errors.New("steering: empty activations")
	}
	embd := len(good[0][0])
	for i := range n {
		for _, set := range [][][]float32{good[i], bad[i]} {
			if len(set) != layers {
				return nil, fmt.Errorf("steering: pair %d has %d layers, want %d", i, len(set), layers)
			}
			for l, row := range set {
				if len(row) != embd {
					return nil, fmt.Errorf("steering: pair %d layer %d has %d values, want %d", i, l, len(row), embd)
				}
			}
		}
	}
	d := &Direction{Layers: layers, Embd: embd, V: make([]float32, layers*embd)}
	gm, bm := make([]float64, embd), make([]float64, embd)
	g, b := make([]float64, embd), make([]float64, embd)
	acc, diff := make([]float64, embd), make([]float64, embd)
	for l := range layers {
		clear(gm)
		clear(bm)
		clear(acc)
		for i := range n {
			widen(g, good[i][l])
			widen(b, bad[i][l])
			floats.Add(gm, g)
			floats.Add(bm, b)
			if opt.PairNormalize {
				normalize(floats.SubTo(diff, g, b))
				floats.Add(acc, diff)
			}
		}
		floats.Scale(1/float64(n), gm)
		floats.Scale(1/float64(n), bm)
		if opt.PairNormalize {
			floats.Scale(1/float64(n), acc)
		} else {
			floats.SubTo(acc, gm, bm)
		}
		normalize(acc)
		if opt.Orthogonalize {
			normalize(bm)
			floats.AddScaled(acc, -floats.Dot(acc, bm), bm)
			normalize(acc)
		}
		out := d.Layer(l)
		for j, v := range acc {
			out[j] = float32(v)
		}
	}
	return d, nil
}

// widen copies the float32 values of src into dst.
func widen(dst []float64, src []float32) {
	for j, v := range src {
		dst[j] = float64(v)
	}
}

// normalize divides v by its L2 norm, leaving a zero vector unchanged.
func normalize(v []float64) {
	if n := floats.Norm(v, 2); n != 0 {
		floats.Scale(1/n, v)
	}
}

// ReadPrompts reads one prompt per line, trimmed, skipping empty lines and
// lines starting with '#'.
func ReadPrompts(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("steering: %w", err)
	}
	var out []string
	for line := range strings.SplitSeq(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, line)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("steering: %s has no prompts", path)
	}
	return out, nil
}

// MaxScale bounds the runtime steering scales (docs/steering.md#applying-a-direction).
const MaxScale = 100

// Scales applies the flag rules of docs/steering.md#applying-a-direction: the FFN scale
// defaults to 1 when a file is given and neither scale was set, both
// scales must lie in [−MaxScale, MaxScale], and a non-zero scale needs a
// file. Steering is off when both returned scales are 0.
func Scales(file string, ffn, attn float64, ffnSet, attnSet bool) (float32, float32, error) {
	if file != "" && !ffnSet && !attnSet {
		ffn = 1
	}
	for _, c := range []struct {
		name string
		v    float64
	}{{"--dir-steering-ffn", ffn}, {"--dir-steering-attn", attn}} {
		if math.IsNaN(c.v) || c.v < -MaxScale || c.v > MaxScale {
			return 0, 0, fmt.Errorf("steering: %s %v outside [-%d, %d]", c.name, c.v, MaxScale, MaxScale)
		}
	}
	if file == "" && (ffn != 0 || attn != 0) {
		return 0, 0, errors.New("steering: a non-zero steering scale needs --dir-steering-file")
	}
	return float32(ffn), float32(attn), nil
}

// Load reads the direction file for a model of the given shape and returns
// the engine's steering with the resolved scales (see Scales), or nil when
// both scales are zero, in which case the file is not read.
func Load(file string, ffn, attn float32, layers, embd int) (*engine.Steering, error) {
	if ffn == 0 && attn == 0 {
		return nil, nil
	}
	d, err := Read(file, layers, embd)
	if err != nil {
		return nil, err
	}
	return &engine.Steering{Dir: d.V, FFN: ffn, Attn: attn}, nil
}
