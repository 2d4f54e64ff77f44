package gguf

import (
	"bytes"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the parser. A file that parses must
// keep every tensor inside the buffer and survive a write/parse round trip
// unchanged; anything else must be an error, never a panic.
func FuzzParse(f *testing.F) {
	f.Add(writeSample(f, sampleKV()))
	f.Add(writeSample(f, nil))
	f.Add(deepNest(8))
	f.Add(deepNest(9))
	f.Add((&builder{}).head(2, 0).tensor("a", 0, 0, 16).tensor("b", 0, 32, 8).withData(96))
	f.Add((&builder{}).head(1, 0).tensor("t", 0, 0, 16).withData(60)) // data section past the end
	f.Add((&builder{}).head(1, 1).str(AlignmentKey).u32(uint32(TypeUint32)).u32(64).tensor("t", 8, 0, 32, 2).withData(200))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			return
		}
		for _, ti := range file.Tensors {
			if d := file.TensorData(ti); uint64(len(d)) != ti.Size {
				t.Fatalf("tensor %q: %d bytes, want %d", ti.Name, len(d), ti.Size)
			}
		}
		first := rewrite(t, file)
		again, err := Parse(first)
		if err != nil {
			t.Fatalf("rewritten file does not parse: %v", err)
		}
		if len(again.KV) != len(file.KV) || len(again.Tensors) != len(file.Tensors) {
			t.Fatalf("round trip changed counts")
		}
		for i, ti := range file.Tensors {
			if !bytes.Equal(again.TensorData(again.Tensors[i]), file.TensorData(ti)) {
				t.Fatalf("tensor %q data changed", ti.Name)
			}
		}
		// Writing is idempotent: the rewritten file rewrites to itself.
		if second := rewrite(t, again); !bytes.Equal(first, second) {
			t.Fatalf("rewrite is not stable")
		}
	})
}

// rewrite writes a parsed file back out with packed offsets.
func rewrite(t *testing.T, file *File) []byte {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, file.KV, file.Tensors)
	if err != nil {
		t.Fatalf("parsed file does not rewrite: %v", err)
	}
	for _, ti := range file.Tensors {
		if _, err := w.Write(file.TensorData(ti)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
