package checkpoint

import (
	"encoding/binary"
	"testing"
)

// FuzzParseHeader feeds arbitrary bytes to the safetensors parser. A file
// that parses must have unique sorted names and every tensor's bytes, of
// exactly elements × dtype size, inside the file; anything else must be an
// error, never a panic.
func FuzzParseHeader(f *testing.F) {
	f.Add(sample())
	f.Add(encodeST(nil, nil))
	for _, tc := range badImages {
		f.Add(tc.file)
	}
	f.Fuzz(func(t *testing.T, file []byte) {
		h, err := parseHeader(file)
		if err != nil {
			return
		}
		var total int
		for i, ti := range h.tensors {
			if i > 0 && h.tensors[i-1].Name >= ti.Name {
				t.Fatalf("names not unique and sorted: %q, %q", h.tensors[i-1].Name, ti.Name)
			}
			if want := ti.Elements() * ti.DType.Size(); len(ti.Data()) != want {
				t.Fatalf("tensor %q: %d bytes, want %d", ti.Name, len(ti.Data()), want)
			}
			base := 8 + binary.LittleEndian.Uint64(file)
			if end := base + ti.off + uint64(len(ti.Data())); end > uint64(len(file)) {
				t.Fatalf("tensor %q: data ends at %d in a %d-byte file", ti.Name, end, len(file))
			}
			if len(ti.Data()) > 0 && &ti.Data()[0] != &file[base+ti.off] {
				t.Fatalf("tensor %q: data is not the file's bytes at its offset", ti.Name)
			}
			total += len(ti.Data())
		}
		if total > len(file) {
			t.Fatalf("tensors hold %d bytes in a %d-byte file", total, len(file))
		}
	})
}
