package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/ds4-go/ds4/internal/cli"
	"github.com/ds4-go/ds4/quant"
	"github.com/spf13/pflag"
)

// rawDoc describes the raw subcommand in its help.
const rawDoc = `Quantizes a raw little-endian float32 matrix (rows of N columns) into ggml
blocks of type T, rows concatenated, or with --dequant decodes such blocks
back to float32. --imatrix names a raw little-endian float32 vector of N
per-column importances. IQ2_XXS without --imatrix uses the column sums of
squares of the input.

Types: F32, F16, BF16, Q8_0, Q2_K, Q4_K, IQ2_XXS.`

// runRaw implements the raw subcommand: it converts a raw float32 matrix file
// to ggml blocks of one type, or back with --dequant.
func runRaw(args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("raw", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	typeName := fs.String("type", "", "ggml block type to write or read (required)")
	cols := fs.Int("cols", 0, "number of columns per row (required)")
	imatrix := fs.String("imatrix", "", "raw float32 file of per-column importances")
	dequant := fs.Bool("dequant", false, "decode IN.bin blocks to float32 instead of quantizing")
	// Command-line mistakes are usage errors (exit status 2); the
	// dispatcher prefixes every error with "ds4-quant raw: ".
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return cli.Usage(fmt.Errorf("want 2 file arguments (input and output), got %d", fs.NArg()))
	}
	if *typeName == "" {
		return cli.Usage(errors.New("--type is required"))
	}
	typ, err := quant.ParseType(*typeName)
	if err != nil {
		return cli.Usage(fmt.Errorf("--type: %w", err))
	}
	if !typ.Emittable() {
		return cli.Usage(fmt.Errorf("--type: %v is not supported (want F32, F16, BF16, Q8_0, Q2_K, Q4_K or IQ2_XXS)", typ))
	}
	if *cols <= 0 {
		return cli.Usage(cli.FlagError(fs, "cols", "must be at least 1"))
	}
	if st, err := os.Stat(fs.Arg(0)); err != nil {
		return cli.Usage(fmt.Errorf("input %s: no such file", fs.Arg(0)))
	} else if st.IsDir() {
		return cli.Usage(fmt.Errorf("input %s: is a directory, not a file", fs.Arg(0)))
	}
	if err := cli.InputFile("imatrix", *imatrix); err != nil {
		return cli.Usage(err)
	}
	rowBytes, err := typ.RowBytes(*cols)
	if err != nil {
		return cli.Usage(fmt.Errorf("--cols: %w", err))
	}
	job := rawJob{typ: typ, cols: *cols, rowBytes: rowBytes, in: fs.Arg(0), out: fs.Arg(1)}
	if *dequant {
		if *imatrix != "" {
			return cli.Usage(errors.New("--imatrix cannot be used with --dequant"))
		}
		err = job.run(job.dequantize)
	} else {
		if *imatrix != "" {
			if job.importance, err = readImportance(*imatrix, *cols); err != nil {
				return err
			}
		}
		err = job.run(job.quantize)
	}
	if err != nil {
		return err
	}
	verb := "quantized"
	if *dequant {
		verb = "dequantized"
	}
	fmt.Fprintf(stdout, "raw: %s %d rows x %d cols (%v): %d bytes in, %d bytes out\n",
		verb, job.rows, job.cols, job.typ, job.bytesIn, job.bytesOut)
	return nil
}

// rawJob is one conversion between a raw float32 file and a ggml block file.
type rawJob struct {
	typ        quant.Type
	cols       int
	rowBytes   int
	importance []float32 // nil or cols values
	in, out    string

	rows              int
	bytesIn, bytesOut int64
}

// run opens the input and creates the output, calls convert, and removes
// the output again if anything fails.
func (j *rawJob) run(convert func(in *os.File, size int64, w *bufio.Writer) error) (err error) {
	in, err := os.Open(j.in)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	if ost, err := os.Stat(j.out); err == nil && os.SameFile(st, ost) {
		return fmt.Errorf("%s: output would overwrite the input", j.out)
	}
	out, err := os.Create(j.out)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(j.out)
		}
	}()
	w := bufio.NewWriterSize(out, 1<<20)
	if err := convert(in, st.Size(), w); err != nil {
		return err
	}
	j.bytesIn = st.Size()
	return w.Flush()
}

// quantize converts float32 rows to blocks of j.typ.
func (j *rawJob) quantize(in *os.File, size int64, w *bufio.Writer) error {
	inRow := int64(4 * j.cols)
	if size%inRow != 0 {
		return fmt.Errorf("%s: size %d is not a multiple of a row of %d float32 values (%d bytes)", j.in, size, j.cols, inRow)
	}
	j.rows = int(size / inRow)
	r := bufio.NewReaderSize(in, 1<<20)
	raw := make([]byte, inRow)
	row := make([]float32, j.cols)
	readRow := func() error {
		if _, err := io.ReadFull(r, raw); err != nil {
			return fmt.Errorf("%s: %w", j.in, err)
		}
		for i := range row {
			row[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		return nil
	}
	importance := j.importance
	if importance == nil && j.typ.RequiresImportance() {
		// The importance derived from the weights needs every row first
		// (quant.Quantize's rule), so read the file twice instead of
		// holding it in memory.
		importance = make([]float32, j.cols)
		for range j.rows {
			if err := readRow(); err != nil {
				return err
			}
			for c, v := range row {
				importance[c] += float32(v * v) // float32(): no fused multiply-add
			}
		}
		if _, err := in.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("%s: %w", j.in, err)
		}
		r.Reset(in)
	}
	block := make([]byte, j.rowBytes)
	for range j.rows {
		if err := readRow(); err != nil {
			return err
		}
		if err := quant.QuantizeRow(j.typ, row, importance, block); err != nil {
			return err
		}
		if _, err := w.Write(block); err != nil {
			return fmt.Errorf("%s: %w", j.out, err)
		}
	}
	j.bytesOut = int64(j.rows) * int64(j.rowBytes)
	return nil
}

// dequantize converts rows of j.typ blocks to float32.
func (j *rawJob) dequantize(in *os.File, size int64, w *bufio.Writer) error {
	if size%int64(j.rowBytes) != 0 {
		return fmt.Errorf("%s: size %d is not a multiple of a %v row of %d columns (%d bytes)", j.in, size, j.typ, j.cols, j.rowBytes)
	}
	j.rows = int(size / int64(j.rowBytes))
	r := bufio.NewReaderSize(in, 1<<20)
	block := make([]byte, j.rowBytes)
	row := make([]float32, j.cols)
	raw := make([]byte, 4*j.cols)
	for range j.rows {
		if _, err := io.ReadFull(r, block); err != nil {
			return fmt.Errorf("%s: %w", j.in, err)
		}
		if err := quant.DequantizeRow(j.typ, block, row); err != nil {
			return err
		}
		for i, v := range row {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
		}
		if _, err := w.Write(raw); err != nil {
			return fmt.Errorf("%s: %w", j.out, err)
		}
	}
	j.bytesOut = int64(j.rows) * int64(len(raw))
	return nil
}

// readImportance reads a raw little-endian float32 vector of exactly cols
// finite values.
func readImportance(path string, cols int) ([]float32, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("imatrix: %w", err)
	}
	if len(raw) != 4*cols {
		return nil, fmt.Errorf("imatrix %s: %d bytes, want %d float32 values (%d bytes) for --cols %d", path, len(raw), cols, 4*cols, cols)
	}
	v := make([]float32, cols)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		if math.IsNaN(float64(v[i])) || math.IsInf(float64(v[i]), 0) {
			return nil, fmt.Errorf("imatrix %s: value %d is %v", path, i, v[i])
		}
	}
	return v, nil
}
