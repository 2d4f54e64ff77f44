package main

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/harness"
	"github.com/ds4-go/ds4/internal/cli"
	"github.com/ds4-go/ds4/vectors"
)

// modelEnv names the variable that points the vector runs at a real model.
const modelEnv = "DS4_MODEL"

// vecEnv overrides the fixture path, as in upstream's runner.
const vecEnv = "DS4_TEST_VECTOR_FILE"

// defaultVecFiles returns the fixtures tried in order when neither --vec
// nor $DS4_TEST_VECTOR_FILE is set.
func defaultVecFiles() []string {
	return []string{"tests/test-vectors/official.vec", "vectors/testdata/official/official.vec"}
}

// OfficialRecord is one row of an official-vector run's Parquet file: one
// step of one case (step -1 for a skipped or failed-to-run case).
type OfficialRecord struct {
	harness.RunMeta
	Source  string `parquet:"source"`
	VecFile string `parquet:"vec_file"`
	vectors.StepRow
}

type officialFlags struct {
	vec, model, endpoint, modelID, apiKey, dump, logits, parquet string
	only                                                         []string
	all, tiny                                                    bool
	tolerance                                                    float64
	threads                                                      int
}

func runOfficial(args []string, stdout, stderr io.Writer) error {
	var f officialFlags
	fs := pflag.NewFlagSet("official", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.vec, "vec", "", "official.vec fixture (default $"+vecEnv+", then "+strings.Join(defaultVecFiles(), ", ")+")")
	fs.StringVarP(&f.model, "model", "m", "", "model GGUF (default $"+modelEnv+", then ./ds4flash.gguf)")
	fs.BoolVar(&f.tiny, "tiny", false, "run the built-in tiny model (a smoke run: its random weights fail every case)")
	fs.StringVar(&f.endpoint, "endpoint", "", "query an OpenAI-compatible server at URL instead of running a model")
	fs.StringVar(&f.modelID, "model-id", "deepseek-v4-flash", "model id sent to --endpoint")
	fs.StringVar(&f.apiKey, "api-key", "", "bearer token for --endpoint (default $OPENAI_API_KEY)")
	fs.StringSliceVar(&f.only, "only", nil, "run only these case ids")
	fs.BoolVar(&f.all, "all", false, "also run the case upstream skips (long_memory_archive)")
	fs.Float64Var(&f.tolerance, "tolerance", vectors.AcceptTolerance, "accepted |local − official| log-probability difference, nats")
	fs.IntVarP(&f.threads, "threads", "t", 0, "CPU worker threads (0: one per CPU)")
	fs.StringVar(&f.dump, "dump", "", "save each case's steps as DIR/<id>.json (a saved run for compare)")
	fs.StringVar(&f.logits, "save-logits", "", "save each case's full logits as DIR/<id>.f32 (local model only)")
	fs.StringVar(&f.parquet, "parquet", "", "write the results as Parquet under DIR (hive-style partitions)")
	if err := cli.Parse(fs, args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return cli.Usage(err)
	}
	if fs.NArg() > 0 {
		return cli.Usage(fmt.Errorf("official: unexpected argument %q", fs.Arg(0)))
	}
	switch {
	case !(f.tolerance > 0):
		return cli.Usage(fmt.Errorf("official: %w", cli.FlagError(fs, "tolerance", "must be positive")))
	case f.threads < 0:
		return cli.Usage(fmt.Errorf("official: %w", cli.Threads(fs, f.threads)))
	case f.tiny && f.model != "":
		return cli.Usage(errors.New("official: --tiny excludes -m"))
	case f.endpoint != "" && (f.model != "" || f.tiny || f.logits != ""):
		return cli.Usage(errors.New("official: --endpoint excludes -m, --tiny and --save-logits"))
	}
	for _, in := range []struct{ name, path string }{{"vec", f.vec}, {"model", f.model}} {
		if err := cli.InputFile(in.name, in.path); err != nil {
			return cli.Usage(fmt.Errorf("official: %w", err))
		}
	}
	vecPath, err := findVecFile(f.vec)
	if err != nil {
		return err
	}
	cases, err := vectors.ReadVecFile(vecPath)
	if err != nil {
		return err
	}
	if id := vectors.MissingCase(cases, f.only); id != "" {
		return cli.Usage(fmt.Errorf("official: --only %s: no such case in %s", id, vecPath))
	}
	src, meta, closeSrc, err := officialSource(f, args, stderr)
	if err != nil {
		return err
	}
	defer closeSrc()
	if f.dump != "" {
		if err := os.MkdirAll(f.dump, 0o755); err != nil {
			return err
		}
	}
	res := vectors.RunCases(context.Background(), src, cases, vectors.RunOptions{
		Dir: filepath.Dir(vecPath), Tolerance: f.tolerance, All: f.all, Only: f.only,
		Progress: func(c vectors.VecCase) { fmt.Fprintf(stderr, "ds4-vectors: vector %s\n", c.ID) },
	})
	rows, err := reportOfficial(stdout, f, cases, res)
	if err != nil {
		return err
	}
	if f.parquet != "" {
		if err := writeOfficial(f, meta, vecPath, rows, stderr); err != nil {
			return err
		}
	}
	if _, failed, _ := vectors.Tally(res); failed > 0 {
		return cli.ErrReported
	}
	return nil
}

// findVecFile returns the fixture of an official run: --vec, then
// $DS4_TEST_VECTOR_FILE, then the first of defaultVecFiles that exists.
func findVecFile(vec string) (string, error) {
	if vec == "" {
		vec = os.Getenv(vecEnv)
	}
	if vec == "" {
		for _, p := range defaultVecFiles() {
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
		return "", cli.Usage(fmt.Errorf("official: no fixture: give --vec FILE or set %s", vecEnv))
	}
	return vec, nil
}

// officialSource returns the source of an official run of the command
// line args, --endpoint or the local model, the run metadata's options for
// it and the function that releases it.
func officialSource(f officialFlags, args []string, stderr io.Writer) (vectors.Source, harness.MetaOptions, func(), error) {
	meta := harness.MetaOptions{Tool: "ds4-vectors official", Args: append([]string{"ds4-vectors", "official"}, args...)}
	if f.endpoint != "" {
		key := f.apiKey
		if key == "" {
			key = os.Getenv("OPENAI_API_KEY")
		}
		meta.Backend = "endpoint"
		return &vectors.Endpoint{URL: f.endpoint, Model: f.modelID, APIKey: key}, meta, func() {}, nil
	}
	m, path, err := openVectorModel(f.model, f.tiny)
	if err != nil {
		return nil, harness.MetaOptions{}, nil, err
	}
	tok, err := tokenizer.Default()
	if err != nil {
		if m.File != nil {
			m.File.Close()
		}
		return nil, harness.MetaOptions{}, nil, err
	}
	be := cpu.New(f.threads)
	release := func() {
		be.Close()
		if m.File != nil {
			m.File.Close()
		}
	}
	es := &vectors.EngineSource{Model: m, Backend: be, Tokenizer: tok}
	if f.logits != "" {
		if err := os.MkdirAll(f.logits, 0o755); err != nil {
			release()
			return nil, harness.MetaOptions{}, nil, err
		}
		es.Logits = func(c vectors.VecCase, step int, l []float32) {
			if err := appendLogits(filepath.Join(f.logits, c.ID+".f32"), step, l); err != nil {
				fmt.Fprintf(stderr, "ds4-vectors: %v\n", err)
			}
		}
	}
	meta.ModelPath, meta.Model, meta.Backend, meta.Threads, meta.Hash = path, m, "cpu", be.Workers(), harness.HashQuick
	return es, meta, release, nil
}

// reportOfficial prints the table of the results res of cases and their
// tally, saves each case that ran under --dump, and returns the table's
// rows.
func reportOfficial(stdout io.Writer, f officialFlags, cases []vectors.VecCase, res []vectors.CaseResult) ([]vectors.StepRow, error) {
	byID := map[string]vectors.VecCase{}
	for _, c := range cases {
		byID[c.ID] = c
	}
	var rows []vectors.StepRow
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "case\tstep\tofficial\tlocal\tlocal logprob\tresult")
	for _, r := range res {
		c := byID[r.ID]
		if f.dump != "" && r.Ran() {
			if err := vectors.WriteDump(filepath.Join(f.dump, r.ID+".json"), vectors.NewDump(sourceName(f), c, r.Got, vectors.AcceptTopK)); err != nil {
				return nil, err
			}
		}
		for _, row := range vectors.StepRows(c, r) {
			printStepRow(tw, row)
			rows = append(rows, row)
		}
		if r.Ran() && r.Err != nil {
			fmt.Fprintf(tw, "%s\t-\t\t\t\tERROR: %v\n", r.ID, r.Err)
		}
	}
	tw.Flush()
	passed, failed, skipped := vectors.Tally(res)
	fmt.Fprintf(stdout, "ds4-vectors: %d passed, %d failed, %d skipped\n", passed, failed, skipped)
	return rows, nil
}

// printStepRow writes the table line of row.
func printStepRow(w io.Writer, row vectors.StepRow) {
	if row.Step < 0 {
		fmt.Fprintf(w, "%s\t-\t\t\t\t%s: %s\n", row.CaseID, row.CaseStatus, row.Failures)
		return
	}
	result := "ok"
	if row.Failures != "" {
		result = "FAIL: " + row.Failures
	}
	official, _ := hex.DecodeString(row.OfficialHex)
	fmt.Fprintf(w, "%s\t%d\t%q\t%q\t%.4f\t%s\n", row.CaseID, row.Step, official, row.LocalText, row.LocalLogprob, result)
}

// writeOfficial writes the rows of an official run of the fixture vecPath
// as Parquet under --parquet.
func writeOfficial(f officialFlags, opt harness.MetaOptions, vecPath string, rows []vectors.StepRow, stderr io.Writer) error {
	meta, err := harness.CollectMeta(opt)
	if err != nil {
		return err
	}
	if f.endpoint != "" {
		meta.ModelFile, meta.ModelName = f.endpoint, f.modelID
	}
	recs := make([]OfficialRecord, len(rows))
	for i, row := range rows {
		recs[i] = OfficialRecord{RunMeta: meta, Source: sourceName(f), VecFile: vecPath, StepRow: row}
	}
	path, err := harness.WriteRun(f.parquet, "vectors", meta, recs)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "ds4-vectors: wrote %s\n", path)
	return nil
}

// openVectorModel opens the model of an official run: -m, $DS4_MODEL,
// ./ds4flash.gguf, or the tiny model when asked for.
func openVectorModel(path string, tiny bool) (*engine.Model, string, error) {
	if tiny {
		if path != "" {
			return nil, "", cli.Usage(errors.New("official: --tiny excludes -m"))
		}
		m, err := engine.OpenTiny()
		return m, "", err
	}
	if path == "" {
		path = os.Getenv(modelEnv)
	}
	if path == "" {
		if _, err := os.Stat(engine.DefaultModel); err == nil {
			path = engine.DefaultModel
		}
	}
	if path == "" {
		return nil, "", cli.Usage(fmt.Errorf("official: %w (or give -m FILE, --endpoint URL, or --tiny for a smoke run)", vectors.ErrNoModel))
	}
	m, err := engine.Open(path)
	return m, path, err
}

func sourceName(f officialFlags) string {
	if f.endpoint != "" {
		return f.endpoint
	}
	return "ds4-go"
}

// appendLogits writes one step's logits to a raw float32 file, truncating
// it at step 0.
func appendLogits(path string, step int, l []float32) error {
	flag := os.O_WRONLY | os.O_CREATE | os.O_APPEND
	if step == 0 {
		flag |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return err
	}
	buf := make([]byte, 4*len(l))
	for i, v := range l {
		binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
	}
	if _, err := f.Write(buf); err != nil {
		f.Close()
		return fmt.Errorf("save logits: %w", err)
	}
	return f.Close()
}
