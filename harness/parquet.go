package harness

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/ds4-go/ds4/internal/atomicfile"
)

// Partition is one level of a hive-style directory: Key=Value.
type Partition struct {
	Key, Value string
}

// Partitions returns the standard partitions of a run: the model and the
// UTC date it started. Their keys are not column names, so no reader sees
// a column twice.
func (m RunMeta) Partitions() []Partition {
	model := m.ModelName
	if model == "" {
		model = filepath.Base(m.ModelFile)
	}
	return []Partition{
		{"model", model},
		{"date", m.StartedAt.Format("2006-01-02")},
	}
}

// RunPath returns the file of one run: root/table/k=v/.../<run>.parquet,
// with partition values reduced to letters, digits, '.', '-' and '_' so
// every engine reads them the same.
func RunPath(root, table string, parts []Partition, run string) string {
	elems := []string{root, table}
	for _, p := range parts {
		elems = append(elems, p.Key+"="+cleanValue(p.Value))
	}
	return filepath.Join(append(elems, cleanValue(run)+".parquet")...)
}

func cleanValue(s string) string {
	if s == "" {
		return "unknown"
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, s)
}

// WriteRows writes rows to a Parquet file at path (Snappy-compressed, one
// row group), creating its directories, with the key-value metadata kv.
// The file appears atomically: it is written beside its final name and
// renamed.
func WriteRows[T any](path string, rows []T, kv map[string]string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("harness: %w", err)
	}
	opts := []parquet.WriterOption{parquet.Compression(&parquet.Snappy), parquet.CreatedBy("ds4-go", "", "")}
	for _, k := range sortedKeys(kv) {
		opts = append(opts, parquet.KeyValueMetadata(k, kv[k]))
	}
	err := atomicfile.Write(path, 0o644, func(f io.Writer) error {
		w := parquet.NewGenericWriter[T](f, opts...)
		if _, err := w.Write(rows); err != nil {
			return err
		}
		return w.Close()
	})
	if err != nil {
		return fmt.Errorf("harness: write %s: %w", path, err)
	}
	return nil
}

// ReadRows reads every row of a Parquet file written by WriteRows.
func ReadRows[T any](path string) ([]T, error) {
	rows, err := parquet.ReadFile[T](path)
	if err != nil {
		return nil, fmt.Errorf("harness: read %s: %w", path, err)
	}
	return rows, nil
}

// ReadMetadata returns the key-value metadata of a Parquet file.
func ReadMetadata(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("harness: read %s: %w", path, err)
	}
	kv := map[string]string{}
	for _, e := range pf.Metadata().KeyValueMetadata {
		kv[e.Key] = e.Value
	}
	return kv, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
