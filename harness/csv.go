package harness

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// CSVHeader is ds4-bench's CSV header line, without the newline.
const CSVHeader = "ctx_tokens,prefill_tokens,prefill_tps,gen_tokens,gen_tps,kvcache_bytes"

// AppendCSV appends the CSV line of r, newline included, exactly as
// upstream formats it (rates with two decimals).
func AppendCSV(dst []byte, r BenchRow) []byte {
	return fmt.Appendf(dst, "%d,%d,%.2f,%d,%.2f,%d\n", r.CtxTokens, r.PrefillTokens, r.PrefillTPS, r.GenTokens, r.GenTPS, r.KVCacheBytes)
}

// WriteCSV writes the header and rows.
func WriteCSV(w io.Writer, rows []BenchRow) error {
	buf := []byte(CSVHeader + "\n")
	for _, r := range rows {
		buf = AppendCSV(buf, r)
	}
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("harness: write CSV: %w", err)
	}
	return nil
}

// ReadCSV reads a ds4-bench CSV: UTF-8 with an optional BOM, columns
// found by name, a missing final newline accepted. ctx_tokens,
// prefill_tps and gen_tps are required, the other columns optional; rows
// come back sorted by ctx_tokens.
func ReadCSV(r io.Reader) ([]BenchRow, error) {
	br := bufio.NewReader(r)
	if b, err := br.Peek(3); err == nil && bytes.Equal(b, []byte("\xef\xbb\xbf")) {
		br.Discard(3)
	}
	cr := csv.NewReader(br)
	cr.FieldsPerRecord = -1
	recs, err := cr.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("harness: CSV: %w", err)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("harness: CSV: empty")
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[strings.TrimSpace(h)] = i
	}
	for _, need := range []string{"ctx_tokens", "prefill_tps", "gen_tps"} {
		if _, ok := col[need]; !ok {
			return nil, fmt.Errorf("harness: CSV: missing column %s", need)
		}
	}
	var rows []BenchRow
	for n, rec := range recs[1:] {
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		var row BenchRow
		var err error
		num := func(name string, dst *float64) {
			i, ok := col[name]
			if !ok || err != nil {
				return
			}
			if i >= len(rec) {
				err = fmt.Errorf("line %d: missing %s", n+2, name)
				return
			}
			*dst, err = strconv.ParseFloat(strings.TrimSpace(rec[i]), 64)
			if err != nil {
				err = fmt.Errorf("line %d: %s: %w", n+2, name, err)
			}
		}
		var ctx, pt, gt, kv float64
		num("ctx_tokens", &ctx)
		num("prefill_tokens", &pt)
		num("prefill_tps", &row.PrefillTPS)
		num("gen_tokens", &gt)
		num("gen_tps", &row.GenTPS)
		num("kvcache_bytes", &kv)
		if err != nil {
			return nil, fmt.Errorf("harness: CSV: %w", err)
		}
		row.CtxTokens, row.PrefillTokens, row.GenTokens, row.KVCacheBytes = int64(ctx), int64(pt), int64(gt), int64(kv)
		row.Repeats = 1
		rows = append(rows, row)
	}
	slices.SortStableFunc(rows, func(a, b BenchRow) int { return int(a.CtxTokens - b.CtxTokens) })
	return rows, nil
}

// ReadCSVFile reads the ds4-bench CSV at path.
func ReadCSVFile(path string) ([]BenchRow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	defer f.Close()
	rows, err := ReadCSV(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rows, nil
}

// CSVWriter writes ds4-bench's CSV a row at a time, each flushed as soon
// as it is written, so a long sweep's rows are seen as they are measured.
type CSVWriter struct {
	w   *bufio.Writer
	buf []byte
}

// NewCSVWriter writes the header to w and returns the writer of its rows.
func NewCSVWriter(w io.Writer) (*CSVWriter, error) {
	c := &CSVWriter{w: bufio.NewWriter(w)}
	c.w.WriteString(CSVHeader + "\n")
	if err := c.w.Flush(); err != nil {
		return nil, fmt.Errorf("write CSV: %w", err)
	}
	return c, nil
}

// Write writes the line of r (AppendCSV) and flushes it.
func (c *CSVWriter) Write(r BenchRow) error {
	c.buf = AppendCSV(c.buf[:0], r)
	c.w.Write(c.buf)
	if err := c.w.Flush(); err != nil {
		return fmt.Errorf("write CSV: %w", err)
	}
	return nil
}
