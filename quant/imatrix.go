package quant

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"

	"github.com/ds4-go/ds4/internal/atomicfile"
)

// Imatrix is a llama.cpp legacy importance matrix (docs/formats/harness.md#the-dat-file).
type Imatrix struct {
	Entries []ImatrixEntry
	Chunks  int    // collection calls counted by the collector; 0 when the file has no trailer
	Dataset string // the dataset path as given at collection; "" if none
}

// ImatrixEntry is one tensor's importance values, expert-major for stacked
// experts; after ReadImatrix the values are means and NCall is 1.
type ImatrixEntry struct {
	Name   string
	NCall  int
	Values []float32
}

// Limits of the legacy format as upstream's loader enforces them.
const (
	maxImatrixName    = 4096      // longest entry name in bytes
	maxImatrixDataset = 1<<20 - 1 // longest dataset name kept from the trailer
)

// ReadImatrix reads a legacy .dat importance matrix and validates it as
// upstream's quantizer does (docs/formats/harness.md#how-the-quantizer-uses-it): at least one entry,
// names of 1..4096 bytes, at least one value per entry, every value finite
// after division by the entry's ncall (when positive). The optional
// trailer (chunks and dataset name) is read when bytes remain; a dataset
// name whose length is outside 1..1 MiB−1 is ignored, as upstream does.
// A dataset name cut short is an error (upstream drops it silently).
func ReadImatrix(r io.Reader) (*Imatrix, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	n, err := readImatrixI32(br)
	if err != nil {
		return nil, fmt.Errorf("imatrix: entry count: %w", err)
	}
	if n < 1 {
		return nil, fmt.Errorf("imatrix: %d entries", n)
	}
	m := &Imatrix{Entries: make([]ImatrixEntry, 0, min(int(n), 1024))}
	for i := range int(n) {
		e, err := readImatrixEntry(br)
		if err != nil {
			return nil, fmt.Errorf("imatrix: entry %d: %w", i, err)
		}
		m.Entries = append(m.Entries, e)
	}
	if _, err := br.Peek(1); err == io.EOF {
		return m, nil
	}
	chunks, err := readImatrixI32(br)
	if err != nil {
		return nil, fmt.Errorf("imatrix: trailer chunks: %w", err)
	}
	dlen, err := readImatrixI32(br)
	if err != nil {
		return nil, fmt.Errorf("imatrix: trailer dataset length: %w", err)
	}
	m.Chunks = int(chunks)
	if dlen > 0 && dlen <= maxImatrixDataset {
		b := make([]byte, dlen)
		if _, err := io.ReadFull(br, b); err != nil {
			return nil, fmt.Errorf("imatrix: trailer dataset name: %w", imatrixShortErr(err))
		}
		m.Dataset = string(b)
	}
	return m, nil
}

// readImatrixEntry reads one entry and divides its values by its ncall.
func readImatrixEntry(br *bufio.Reader) (ImatrixEntry, error) {
	nlen, err := readImatrixI32(br)
	if err != nil {
		return ImatrixEntry{}, fmt.Errorf("name length: %w", err)
	}
	if nlen < 1 || nlen > maxImatrixName {
		return ImatrixEntry{}, fmt.Errorf("name length %d outside 1..%d", nlen, maxImatrixName)
	}
	name := make([]byte, nlen)
	if _, err := io.ReadFull(br, name); err != nil {
		return ImatrixEntry{}, fmt.Errorf("name: %w", imatrixShortErr(err))
	}
	e := ImatrixEntry{Name: string(name), NCall: 1}
	ncall, err := readImatrixI32(br)
	if err != nil {
		return e, fmt.Errorf("%q: ncall: %w", e.Name, err)
	}
	nval, err := readImatrixI32(br)
	if err != nil {
		return e, fmt.Errorf("%q: value count: %w", e.Name, err)
	}
	if nval < 1 {
		return e, fmt.Errorf("%q: %d values", e.Name, nval)
	}
	if e.Values, err = readImatrixF32s(br, int(nval)); err != nil {
		return e, fmt.Errorf("%q: values: %w", e.Name, err)
	}
	if ncall > 0 {
		div := float32(ncall)
		for j := range e.Values {
			e.Values[j] /= div
		}
	}
	for j, v := range e.Values {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return e, fmt.Errorf("%q: value %d is %v", e.Name, j, v)
		}
	}
	return e, nil
}

// readImatrixF32s reads n little-endian float32 values. The slice grows with the
// bytes actually read, so a hostile count cannot force a huge allocation
// ahead of the data.
func readImatrixF32s(br *bufio.Reader, n int) ([]float32, error) {
	const step = 1 << 14
	out := make([]float32, 0, min(n, step))
	var buf [4 * step]byte
	for len(out) < n {
		k := min(n-len(out), step)
		if _, err := io.ReadFull(br, buf[:4*k]); err != nil {
			return nil, imatrixShortErr(err)
		}
		for j := range k {
			out = append(out, math.Float32frombits(binary.LittleEndian.Uint32(buf[4*j:])))
		}
	}
	return out, nil
}

func readImatrixI32(br *bufio.Reader) (int32, error) {
	var b [4]byte
	if _, err := io.ReadFull(br, b[:]); err != nil {
		return 0, imatrixShortErr(err)
	}
	return int32(binary.LittleEndian.Uint32(b[:])), nil
}

// imatrixShortErr reports a file that ends before a field, which
// io.ReadFull gives as io.EOF, as io.ErrUnexpectedEOF.
func imatrixShortErr(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// ReadImatrixFile reads the legacy .dat importance matrix at path.
func ReadImatrixFile(path string) (*Imatrix, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("imatrix: %w", err)
	}
	defer f.Close()
	m, err := ReadImatrix(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// validate checks that m can be written in the legacy layout and read back
// by ReadImatrix.
func (m *Imatrix) validate() error {
	if len(m.Entries) == 0 {
		return errors.New("imatrix: no entries")
	}
	if len(m.Entries) > math.MaxInt32 {
		return fmt.Errorf("imatrix: %d entries", len(m.Entries))
	}
	for i, e := range m.Entries {
		switch {
		case len(e.Name) < 1 || len(e.Name) > maxImatrixName:
			return fmt.Errorf("imatrix: entry %d: name length %d outside 1..%d", i, len(e.Name), maxImatrixName)
		case e.NCall < 1 || e.NCall > math.MaxInt32:
			return fmt.Errorf("imatrix: entry %q: ncall %d", e.Name, e.NCall)
		case len(e.Values) < 1 || len(e.Values) > math.MaxInt32:
			return fmt.Errorf("imatrix: entry %q: %d values", e.Name, len(e.Values))
		}
		for j, v := range e.Values {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("imatrix: entry %q: value %d is %v", e.Name, j, v)
			}
		}
	}
	if m.Chunks < math.MinInt32 || m.Chunks > math.MaxInt32 {
		return fmt.Errorf("imatrix: chunks %d", m.Chunks)
	}
	if len(m.Dataset) > maxImatrixDataset {
		return fmt.Errorf("imatrix: dataset name of %d bytes (at most %d)", len(m.Dataset), maxImatrixDataset)
	}
	return nil
}

// WriteTo writes m in the legacy .dat layout of docs/formats/harness.md#the-dat-file,
// trailer included; it returns the number of bytes written.
func (m *Imatrix) WriteTo(w io.Writer) (int64, error) {
	if err := m.validate(); err != nil {
		return 0, err
	}
	cw := &imatrixCounter{w: w}
	bw := bufio.NewWriterSize(cw, 1<<16)
	var b [4]byte
	i32 := func(v int) {
		binary.LittleEndian.PutUint32(b[:], uint32(int32(v)))
		bw.Write(b[:])
	}
	i32(len(m.Entries))
	var buf [1 << 14]byte
	for _, e := range m.Entries {
		i32(len(e.Name))
		bw.WriteString(e.Name)
		i32(e.NCall)
		i32(len(e.Values))
		for vs := e.Values; len(vs) > 0; {
			k := min(len(vs), len(buf)/4)
			for j, v := range vs[:k] {
				binary.LittleEndian.PutUint32(buf[4*j:], math.Float32bits(v))
			}
			bw.Write(buf[:4*k])
			vs = vs[k:]
		}
	}
	i32(m.Chunks)
	i32(len(m.Dataset))
	bw.WriteString(m.Dataset)
	// bufio.Writer keeps the first write error and returns it from Flush.
	if err := bw.Flush(); err != nil {
		return cw.n, fmt.Errorf("imatrix: %w", err)
	}
	return cw.n, nil
}

type imatrixCounter struct {
	w io.Writer
	n int64
}

func (c *imatrixCounter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// WriteFile writes m to path atomically: to a temporary file in the same
// directory, synced, then renamed over path.
func (m *Imatrix) WriteFile(path string) (err error) {
	if err := m.validate(); err != nil {
		return err
	}
	return atomicfile.Write(path, 0o644, func(w io.Writer) error {
		_, err := m.WriteTo(w)
		return err
	})
}

// Importance returns the column importance of a tensor
// (docs/formats/harness.md#how-the-quantizer-uses-it). names are the candidate names, GGUF name first, then the HF
// source name ("" entries are skipped); expert is the expert id, or −1 for
// a non-expert tensor; nExperts is the tensor's expert count and ncols its
// ne[0]. For an expert the names tried are every "<name>.expert.<id>",
// then every "<name>.expert_<id>", then the bare names; the first present
// decides (the first entry of that name, when the file repeats one). A hit
// of ncols values is used whole, one of ncols·nExperts values is sliced at
// expert; any other length is an error. It returns nil, nil when no entry
// matches or m is nil. The result aliases the entry's values.
func (m *Imatrix) Importance(names []string, expert, nExperts, ncols int) ([]float32, error) {
	if m == nil {
		return nil, nil
	}
	if ncols < 1 {
		return nil, fmt.Errorf("imatrix: %d columns", ncols)
	}
	if expert >= 0 && expert >= nExperts {
		return nil, fmt.Errorf("imatrix: expert %d of %d", expert, nExperts)
	}
	for pass := range 3 {
		if expert < 0 && pass < 2 {
			continue
		}
		for _, name := range names {
			if name == "" {
				continue
			}
			cand := name
			switch pass {
			case 0:
				cand = name + ".expert." + strconv.Itoa(expert)
			case 1:
				cand = name + ".expert_" + strconv.Itoa(expert)
			}
			e := m.entry(cand)
			if e == nil {
				continue
			}
			switch v := e.Values; {
			case len(v) == ncols:
				return v[:ncols:ncols], nil
			case expert >= 0 && len(v) == ncols*nExperts:
				return v[expert*ncols : (expert+1)*ncols : (expert+1)*ncols], nil
			default:
				return nil, fmt.Errorf("imatrix: entry %q has %d values, want %d", cand, len(v), ncols)
			}
		}
	}
	return nil, nil
}

// entry returns the first entry named name, or nil. A linear scan keeps
// Importance safe for concurrent use without an index to build; files hold
// a few hundred entries.
func (m *Imatrix) entry(name string) *ImatrixEntry {
	for i := range m.Entries {
		if m.Entries[i].Name == name {
			return &m.Entries[i]
		}
	}
	return nil
}
