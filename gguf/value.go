// Package gguf reads and writes GGUF v3 files: a hardened, zero-copy reader
// over a memory mapping and a streaming writer.
package gguf

import (
	"fmt"
	"math"
	"strings"
)

// ValueType is the type tag of a metadata value.
type ValueType uint32

// Metadata value types of GGUF v3.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32", "BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64"}

// String returns the GGUF name of the type.
func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("VALUETYPE(%d)", uint32(t))
}

// valid reports whether t is a GGUF v3 value type.
func (t ValueType) valid() bool { return t <= TypeFloat64 }

// size returns the encoded size of a fixed-size type, or 0 for strings and arrays.
func (t ValueType) size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// KV is one metadata key-value pair.
type KV struct {
	Key   string
	Value Value
}

// Value is a decoded metadata value; build one with the constructors
// (Uint32, String, Strings, …) and read it with the typed accessors.
type Value struct {
	typ  ValueType
	data any // uint8 … float64, bool, string, or Array
}

// Array is a decoded metadata array; Data holds a typed slice ([]uint32,
// []string, []Array, …) matching Elem.
type Array struct {
	Elem ValueType
	Data any
}

// Len returns the number of elements of the array.
func (a Array) Len() int {
	switch d := a.Data.(type) {
	case []uint8:
		return len(d)
	case []int8:
		return len(d)
	case []uint16:
		return len(d)
	case []int16:
		return len(d)
	case []uint32:
		return len(d)
	case []int32:
		return len(d)
	case []float32:
		return len(d)
	case []bool:
		return len(d)
	case []string:
		return len(d)
	case []uint64:
		return len(d)
	case []int64:
		return len(d)
	case []float64:
		return len(d)
	case []Array:
		return len(d)
	}
	return 0
}

// Strings returns the elements of a string array.
func (a Array) Strings() ([]string, bool) {
	s, ok := a.Data.([]string)
	return s, ok
}

// Ints returns the elements of an integer array widened to int64; it fails
// for non-integer arrays and for UINT64 elements above MaxInt64.
func (a Array) Ints() ([]int64, bool) {
	n := a.Len()
	out := make([]int64, n)
	for i := range n {
		v, ok := a.elem(i).Int()
		if !ok {
			return nil, false
		}
		out[i] = v
	}
	return out, true
}

// Floats returns the elements of a numeric array converted to float64.
func (a Array) Floats() ([]float64, bool) {
	n := a.Len()
	out := make([]float64, n)
	for i := range n {
		v, ok := a.elem(i).Float()
		if !ok {
			return nil, false
		}
		out[i] = v
	}
	return out, true
}

// elem returns element i as a Value.
func (a Array) elem(i int) Value {
	var v any
	switch d := a.Data.(type) {
	case []uint8:
		v = d[i]
	case []int8:
		v = d[i]
	case []uint16:
		v = d[i]
	case []int16:
		v = d[i]
	case []uint32:
		v = d[i]
	case []int32:
		v = d[i]
	case []float32:
		v = d[i]
	case []bool:
		v = d[i]
	case []string:
		v = d[i]
	case []uint64:
		v = d[i]
	case []int64:
		v = d[i]
	case []float64:
		v = d[i]
	case []Array:
		v = d[i]
	}
	return Value{typ: a.Elem, data: v}
}

// Constructors for metadata values.

// Uint8 returns a UINT8 value.
func Uint8(v uint8) Value { return Value{TypeUint8, v} }

// Int8 returns an INT8 value.
func Int8(v int8) Value { return Value{TypeInt8, v} }

// Uint16 returns a UINT16 value.
func Uint16(v uint16) Value { return Value{TypeUint16, v} }

// Int16 returns an INT16 value.
func Int16(v int16) Value { return Value{TypeInt16, v} }

// Uint32 returns a UINT32 value.
func Uint32(v uint32) Value { return Value{TypeUint32, v} }

// Int32 returns an INT32 value.
func Int32(v int32) Value { return Value{TypeInt32, v} }

// Float32 returns a FLOAT32 value.
func Float32(v float32) Value { return Value{TypeFloat32, v} }

// Bool returns a BOOL value.
func Bool(v bool) Value { return Value{TypeBool, v} }

// String returns a STRING value.
func String(v string) Value { return Value{TypeString, v} }

// Uint64 returns a UINT64 value.
func Uint64(v uint64) Value { return Value{TypeUint64, v} }

// Int64 returns an INT64 value.
func Int64(v int64) Value { return Value{TypeInt64, v} }

// Float64 returns a FLOAT64 value.
func Float64(v float64) Value { return Value{TypeFloat64, v} }

// Strings returns an ARRAY of STRING value.
func Strings(v []string) Value { return Value{TypeArray, Array{TypeString, v}} }

// Uint32s returns an ARRAY of UINT32 value.
func Uint32s(v []uint32) Value { return Value{TypeArray, Array{TypeUint32, v}} }

// Int32s returns an ARRAY of INT32 value.
func Int32s(v []int32) Value { return Value{TypeArray, Array{TypeInt32, v}} }

// Float32s returns an ARRAY of FLOAT32 value.
func Float32s(v []float32) Value { return Value{TypeArray, Array{TypeFloat32, v}} }

// ArrayOf returns an ARRAY value; a.Data must be the slice type matching a.Elem.
func ArrayOf(a Array) Value { return Value{TypeArray, a} }

// Type returns the value's type tag.
func (v Value) Type() ValueType { return v.typ }

// Data returns the decoded Go value (uint8 … float64, bool, string or Array).
func (v Value) Data() any { return v.data }

// Int returns any integer value widened to int64; UINT64 values above
// MaxInt64 and non-integers report false.
func (v Value) Int() (int64, bool) {
	switch d := v.data.(type) {
	case uint8:
		return int64(d), true
	case int8:
		return int64(d), true
	case uint16:
		return int64(d), true
	case int16:
		return int64(d), true
	case uint32:
		return int64(d), true
	case int32:
		return int64(d), true
	case uint64:
		if d > math.MaxInt64 {
			return 0, false
		}
		return int64(d), true
	case int64:
		return d, true
	}
	return 0, false
}

// Float returns any numeric value converted to float64.
func (v Value) Float() (float64, bool) {
	switch d := v.data.(type) {
	case float32:
		return float64(d), true
	case float64:
		return d, true
	case uint64:
		return float64(d), true
	}
	if i, ok := v.Int(); ok {
		return float64(i), true
	}
	return 0, false
}

// Bool returns the value of a BOOL.
func (v Value) Bool() (bool, bool) {
	b, ok := v.data.(bool)
	return b, ok
}

// Str returns the value of a STRING.
func (v Value) Str() (string, bool) {
	s, ok := v.data.(string)
	return s, ok
}

// Array returns the value of an ARRAY.
func (v Value) Array() (Array, bool) {
	a, ok := v.data.(Array)
	return a, ok
}

// String formats the value for display, abbreviating long arrays and strings.
func (v Value) String() string {
	switch d := v.data.(type) {
	case string:
		return quoteShort(d, 80)
	case Array:
		n := d.Len()
		var b strings.Builder
		fmt.Fprintf(&b, "[%d × %v]", n, d.Elem)
		shown := min(n, 8)
		b.WriteString(" [")
		for i := range shown {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(d.elem(i).String())
		}
		if shown < n {
			b.WriteString(", …")
		}
		b.WriteString("]")
		return b.String()
	case nil:
		return "<invalid>"
	}
	return fmt.Sprint(v.data)
}

func quoteShort(s string, max int) string {
	r := []rune(s)
	if len(r) > max {
		return fmt.Sprintf("%q…", string(r[:max]))
	}
	return fmt.Sprintf("%q", s)
}

// check reports whether v is well formed: data matches the type tag, arrays
// are homogeneous, nesting is bounded.
func (v Value) check(depth int) error {
	if depth > maxNesting {
		return fmt.Errorf("array nesting deeper than %d", maxNesting)
	}
	ok := false
	switch v.typ {
	case TypeUint8:
		_, ok = v.data.(uint8)
	case TypeInt8:
		_, ok = v.data.(int8)
	case TypeUint16:
		_, ok = v.data.(uint16)
	case TypeInt16:
		_, ok = v.data.(int16)
	case TypeUint32:
		_, ok = v.data.(uint32)
	case TypeInt32:
		_, ok = v.data.(int32)
	case TypeFloat32:
		_, ok = v.data.(float32)
	case TypeBool:
		_, ok = v.data.(bool)
	case TypeString:
		var s string
		s, ok = v.data.(string)
		if ok && len(s) > MaxStringLen {
			return fmt.Errorf("string of %d bytes exceeds %d", len(s), MaxStringLen)
		}
	case TypeUint64:
		_, ok = v.data.(uint64)
	case TypeInt64:
		_, ok = v.data.(int64)
	case TypeFloat64:
		_, ok = v.data.(float64)
	case TypeArray:
		var a Array
		a, ok = v.data.(Array)
		if !ok {
			break
		}
		if !a.Elem.valid() {
			return fmt.Errorf("array of invalid element type %v", a.Elem)
		}
		n := a.Len()
		if n > MaxArrayLen {
			return fmt.Errorf("array of %d elements exceeds %d", n, MaxArrayLen)
		}
		if n == 0 {
			// An empty typed slice of the wrong Go type is still an error.
			if a.Data != nil && !sameSliceType(a) {
				return fmt.Errorf("array data %T does not match element type %v", a.Data, a.Elem)
			}
			return nil
		}
		for i := range n {
			if err := a.elem(i).check(depth + 1); err != nil {
				return fmt.Errorf("element %d: %w", i, err)
			}
		}
		return nil
	}
	if !ok {
		return fmt.Errorf("value of type %v holds %T", v.typ, v.data)
	}
	return nil
}

func sameSliceType(a Array) bool {
	var ok bool
	switch a.Elem {
	case TypeUint8:
		_, ok = a.Data.([]uint8)
	case TypeInt8:
		_, ok = a.Data.([]int8)
	case TypeUint16:
		_, ok = a.Data.([]uint16)
	case TypeInt16:
		_, ok = a.Data.([]int16)
	case TypeUint32:
		_, ok = a.Data.([]uint32)
	case TypeInt32:
		_, ok = a.Data.([]int32)
	case TypeFloat32:
		_, ok = a.Data.([]float32)
	case TypeBool:
		_, ok = a.Data.([]bool)
	case TypeString:
		_, ok = a.Data.([]string)
	case TypeUint64:
		_, ok = a.Data.([]uint64)
	case TypeInt64:
		_, ok = a.Data.([]int64)
	case TypeFloat64:
		_, ok = a.Data.([]float64)
	case TypeArray:
		_, ok = a.Data.([]Array)
	}
	return ok
}
