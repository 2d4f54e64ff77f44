// Package quant holds the ggml tensor block formats DS4 files use: their
// layouts, dequantization, the weight quantizers that produce them, the
// activation-side quantization and the integer dot products the engine runs.
package quant

import (
	"fmt"
	"strings"
)

// Type is a ggml tensor type id as stored in GGUF tensor infos.
type Type uint32

// The ggml type ids this project reads or writes.
const (
	F32     Type = 0
	F16     Type = 1
	Q8_0    Type = 8
	Q2_K    Type = 10
	Q4_K    Type = 12
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	I32     Type = 26
	BF16    Type = 30
)

// QK_K is the number of elements in a K-quant or IQ super-block.
const QK_K = 256

type typeInfo struct {
	name       string
	blockElems int
	blockBytes int
}

// typeTable lists every ggml type with its correct block geometry. Types
// marked with a zero block size are known by name only: a file carrying them
// is rejected, since their sizes cannot be bounds-checked.
var typeTable = map[Type]typeInfo{
	0:  {"F32", 1, 4},
	1:  {"F16", 1, 2},
	2:  {"Q4_0", 32, 18},
	3:  {"Q4_1", 32, 20},
	6:  {"Q5_0", 32, 22},
	7:  {"Q5_1", 32, 24},
	8:  {"Q8_0", 32, 34},
	9:  {"Q8_1", 32, 36},
	10: {"Q2_K", 256, 84},
	11: {"Q3_K", 256, 110},
	12: {"Q4_K", 256, 144},
	13: {"Q5_K", 256, 176},
	14: {"Q6_K", 256, 210},
	15: {"Q8_K", 256, 292},
	16: {"IQ2_XXS", 256, 66},
	17: {"IQ2_XS", 256, 74},
	18: {"IQ3_XXS", 256, 98},
	19: {"IQ1_S", 256, 50},
	20: {"IQ4_NL", 32, 18},
	21: {"IQ3_S", 256, 110},
	22: {"IQ2_S", 256, 82},
	23: {"IQ4_XS", 256, 136},
	24: {"I8", 1, 1},
	25: {"I16", 1, 2},
	26: {"I32", 1, 4},
	27: {"I64", 1, 8},
	28: {"F64", 1, 8},
	29: {"IQ1_M", 256, 56},
	30: {"BF16", 1, 2},
	34: {"TQ1_0", 256, 54},
	35: {"TQ2_0", 256, 66},
}

// Known reports whether t is a ggml type with a known block geometry.
func (t Type) Known() bool {
	_, ok := typeTable[t]
	return ok
}

// String returns the ggml name of t, or "type(N)" for unknown ids.
func (t Type) String() string {
	if ti, ok := typeTable[t]; ok {
		return ti.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockElems returns the number of elements in one block of t (0 if unknown).
func (t Type) BlockElems() int { return typeTable[t].blockElems }

// BlockBytes returns the byte size of one block of t (0 if unknown).
func (t Type) BlockBytes() int { return typeTable[t].blockBytes }

// RowBytes returns the byte size of a row of n elements of type t, or an
// error when n is not a whole number of blocks or t is unknown.
func (t Type) RowBytes(n int) (int, error) {
	ti, ok := typeTable[t]
	if !ok {
		return 0, fmt.Errorf("quant: unknown type %v", t)
	}
	if n < 0 || n%ti.blockElems != 0 {
		return 0, fmt.Errorf("quant: %v row of %d elements is not a multiple of the block size %d", t, n, ti.blockElems)
	}
	return n / ti.blockElems * ti.blockBytes, nil
}

// ParseType parses a type name case-insensitively, ignoring '-' and '_'
// ("q4_k", "Q4K", "iq2-xxs").
func ParseType(s string) (Type, error) {
	norm := func(s string) string {
		return strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(s))
	}
	want := norm(s)
	for t, ti := range typeTable {
		if norm(ti.name) == want {
			return t, nil
		}
	}
	return 0, fmt.Errorf("quant: unknown type name %q", s)
}
