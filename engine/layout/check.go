package layout

import (
	"errors"
	"fmt"
	"slices"

	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/gguf"
)

// Report is the outcome of checking a file against the DS4 layout.
type Report struct {
	Params    Params
	Recipe    Recipe   // routed expert types found in the file
	Published bool     // every tensor has the type of the published files
	Problems  []error  // violations: the engine refuses the file
	Warnings  []string // accepted departures worth knowing about
}

// Err joins the problems into one error, or returns nil.
func (r *Report) Err() error {
	if len(r.Problems) == 0 {
		return nil
	}
	return fmt.Errorf("layout: %d problems: %w", len(r.Problems), errors.Join(r.Problems...))
}

// Check validates f's metadata, tokenizer tables and every tensor of the
// catalog its metadata implies (presence, type, dims), collecting all
// violations rather than stopping at the first.
func Check(f *gguf.File) *Report {
	r := &Report{Published: true}
	if v, ok := f.Value("general.architecture"); ok {
		if a, _ := v.Str(); a != Arch {
			r.Problems = append(r.Problems, fmt.Errorf("metadata general.architecture: %v, want %q", v, Arch))
		}
	}
	params, err := FromGGUF(f)
	r.Params = params
	if err != nil {
		r.Problems = append(r.Problems, unjoin(err)...)
	}
	r.checkTokenizer(f)
	if err != nil {
		return r // without valid parameters there is no catalog to check against
	}
	r.Recipe = detectRecipe(f)
	want := params.Tensors(r.Recipe)
	inCatalog := make(map[string]bool, len(want))
	for _, t := range want {
		inCatalog[t.Name] = true
		got, ok := f.Tensor(t.Name)
		if !ok {
			if !t.Optional {
				r.Problems = append(r.Problems, fmt.Errorf("tensor %s: missing", t.Name))
			}
			continue
		}
		if !slices.Equal(got.Dims, t.Dims) {
			r.Problems = append(r.Problems, fmt.Errorf("tensor %s: dims %v, want %v", t.Name, got.Dims, t.Dims))
		}
		if !slices.Contains(t.Allowed(), got.Type) {
			r.Problems = append(r.Problems, fmt.Errorf("tensor %s: type %v, want one of %v", t.Name, got.Type, t.Allowed()))
		} else if got.Type != t.Type && t.Class != ClassRouted {
			r.Published = false
		}
	}
	for il := range params.Layers {
		gate, g := f.Tensor(fmt.Sprintf("blk.%d.ffn_gate_exps.weight", il))
		up, u := f.Tensor(fmt.Sprintf("blk.%d.ffn_up_exps.weight", il))
		if g && u && gate.Type != up.Type {
			r.Problems = append(r.Problems, fmt.Errorf("layer %d: routed gate is %v but up is %v; they must match", il, gate.Type, up.Type))
		}
		down, d := f.Tensor(fmt.Sprintf("blk.%d.ffn_down_exps.weight", il))
		if g && d && (gate.Type != r.Recipe.GateUp || down.Type != r.Recipe.Down) {
			r.Warnings = append(r.Warnings, fmt.Sprintf("layer %d: routed types %v/%v differ from layer 0's", il, gate.Type, down.Type))
		}
		if name := fmt.Sprintf("blk.%d.exp_probs_b.bias", il); params.IsHash(il) {
			if _, ok := f.Tensor(name); ok {
				r.Warnings = append(r.Warnings, fmt.Sprintf("tensor %s: present on a hash-routed layer (ignored; llama.cpp rejects it)", name))
			}
		}
	}
	if r.Recipe != RecipeQ2 && r.Recipe != RecipeQ4 {
		r.Published = false
	}
	extra := 0
	for _, t := range f.Tensors {
		if !inCatalog[t.Name] {
			extra++
		}
	}
	if extra > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d tensors outside the DS4 catalog (ignored)", extra))
	}
	return r
}

// detectRecipe reads the routed types from layer 0.
func detectRecipe(f *gguf.File) Recipe {
	gate, _ := f.Tensor("blk.0.ffn_gate_exps.weight")
	down, _ := f.Tensor("blk.0.ffn_down_exps.weight")
	for _, r := range []Recipe{RecipeQ2, RecipeQ4} {
		if gate.Type == r.GateUp && down.Type == r.Down {
			return r
		}
	}
	return Recipe{Name: "custom", GateUp: gate.Type, Down: down.Type}
}

func (r *Report) checkTokenizer(f *gguf.File) {
	var tokens []string
	for _, k := range []string{"tokenizer.ggml.tokens", "tokenizer.ggml.merges"} {
		v, ok := f.Value(k)
		if !ok {
			r.Problems = append(r.Problems, fmt.Errorf("metadata %s: missing", k))
			continue
		}
		a, _ := v.Array()
		s, ok := a.Strings()
		if !ok {
			r.Problems = append(r.Problems, fmt.Errorf("metadata %s: type %v, want ARRAY of STRING", k, describe(v)))
			continue
		}
		if k == "tokenizer.ggml.tokens" {
			tokens = s
		}
	}
	if tokens == nil {
		return
	}
	missing := make(map[string]bool, len(tokenizer.RequiredSpecials))
	for _, s := range tokenizer.RequiredSpecials {
		missing[s] = true
	}
	for _, t := range tokens {
		delete(missing, t)
	}
	for _, s := range tokenizer.RequiredSpecials {
		if missing[s] {
			r.Problems = append(r.Problems, fmt.Errorf("tokenizer: special token %q missing", s))
		}
	}
}

// unjoin splits an error made by errors.Join (possibly wrapped once) into
// its parts.
func unjoin(err error) []error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			return j.Unwrap()
		}
	}
	return []error{err}
}
