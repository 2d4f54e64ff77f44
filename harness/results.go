package harness

import (
	"encoding/json"
	"fmt"
)

// BenchInput describes the token sequence of a sweep.
type BenchInput struct {
	PromptFile   string `parquet:"prompt_file"`
	PromptMode   string `parquet:"prompt_mode"` // "raw" (plain text) or "chat"
	PromptTokens int64  `parquet:"prompt_tokens"`
}

// BenchRecord is one row of a bench run's Parquet file: the run, the
// sweep and one frontier.
type BenchRecord struct {
	RunMeta
	BenchInput
	BenchConfig
	BenchRow
}

// BenchTable is the directory of bench runs under a results root.
const BenchTable = "bench"

// WriteBenchRun writes the rows of one sweep as one Parquet file under
// root (root/bench/model=…/date=…/<run_id>.parquet) and returns
// its path. The run metadata is also stored as JSON in the file's
// key-value metadata under "ds4.run".
func WriteBenchRun(root string, meta RunMeta, in BenchInput, cfg BenchConfig, rows []BenchRow) (string, error) {
	recs := make([]BenchRecord, len(rows))
	for i, r := range rows {
		recs[i] = BenchRecord{RunMeta: meta, BenchInput: in, BenchConfig: cfg, BenchRow: r}
	}
	return WriteRun(root, BenchTable, meta, recs)
}

func metaKV(meta RunMeta) (map[string]string, error) {
	b, err := json.Marshal(meta)
	if err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	return map[string]string{"ds4.run": string(b)}, nil
}

// WriteRun writes rows of any record type as one run's Parquet file under
// root/table with the run's standard partitions and returns its path.
func WriteRun[T any](root, table string, meta RunMeta, rows []T) (string, error) {
	path := RunPath(root, table, meta.Partitions(), meta.RunID)
	kv, err := metaKV(meta)
	if err != nil {
		return "", err
	}
	if err := WriteRows(path, rows, kv); err != nil {
		return "", err
	}
	return path, nil
}
