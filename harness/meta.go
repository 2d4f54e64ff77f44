package harness

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/internal/progress"
)

// RunMeta describes one run: what was measured, on what, with what. Every
// Parquet row of a run carries it, so files can be concatenated and
// filtered without joins.
type RunMeta struct {
	RunID       string    `parquet:"run_id"`
	Tool        string    `parquet:"tool"`
	StartedAt   time.Time `parquet:"started_at,timestamp(microsecond)"`
	ModelFile   string    `parquet:"model_file"`
	ModelSHA256 string    `parquet:"model_sha256"`
	ModelBytes  int64     `parquet:"model_bytes"`
	ModelName   string    `parquet:"model_name"`
	ModelRecipe string    `parquet:"model_recipe"`
	Layers      int64     `parquet:"n_layers"`
	Embd        int64     `parquet:"n_embd"`
	Vocab       int64     `parquet:"n_vocab"`
	Experts     int64     `parquet:"n_experts"`
	ExpertsUsed int64     `parquet:"n_experts_used"`
	Backend     string    `parquet:"backend"`
	Threads     int64     `parquet:"threads"`
	GoVersion   string    `parquet:"go_version"`
	GOOS        string    `parquet:"goos"`
	GOARCH      string    `parquet:"goarch"`
	CPUModel    string    `parquet:"cpu_model"`
	NumCPU      int64     `parquet:"num_cpu"`
	Hostname    string    `parquet:"hostname"`
	GitRevision string    `parquet:"git_revision"`
	CommandLine string    `parquet:"command_line"`
	Notes       string    `parquet:"notes"`
}

// HashMode selects how the model file is fingerprinted.
type HashMode string

// Hash modes: the SHA-256 of the whole file, of its size and first and
// last 64 MiB (prefixed "quick:"), or none.
const (
	HashFull  HashMode = "sha256"
	HashQuick HashMode = "quick"
	HashNone  HashMode = "none"
)

// DefaultHash is the --hash default of every command that records run
// metadata: quick, since the full SHA-256 of a real model reads every byte
// of it before the run.
const DefaultHash = HashQuick

// Valid reports whether h names a hash mode.
func (h HashMode) Valid() bool {
	return h == HashFull || h == HashQuick || h == HashNone
}

// MetaOptions are the inputs of CollectMeta.
type MetaOptions struct {
	Tool      string
	ModelPath string // "" for the built-in tiny model
	Model     *engine.Model
	Backend   string
	Threads   int
	Hash      HashMode
	Args      []string
	Now       time.Time // zero means time.Now()
	// Progress, when set, receives a progress bar while a large model
	// file is hashed.
	Progress io.Writer
}

// CollectMeta fills a RunMeta from the options, the model, the build and
// the machine.
func CollectMeta(o MetaOptions) (RunMeta, error) {
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	now = now.UTC().Truncate(time.Microsecond)
	m := RunMeta{
		Tool:        o.Tool,
		StartedAt:   now,
		ModelFile:   o.ModelPath,
		Backend:     o.Backend,
		Threads:     int64(o.Threads),
		GoVersion:   runtime.Version(),
		GOOS:        runtime.GOOS,
		GOARCH:      runtime.GOARCH,
		CPUModel:    CPUModel(),
		NumCPU:      int64(runtime.NumCPU()),
		GitRevision: GitRevision(),
		CommandLine: strings.Join(o.Args, " "),
	}
	m.Hostname, _ = os.Hostname()
	if o.Model != nil {
		p := o.Model.Params
		m.ModelName, m.ModelRecipe = p.Name, o.Model.Recipe.Name
		m.Layers, m.Embd, m.Vocab = int64(p.Layers), int64(p.Embd), int64(p.Vocab)
		m.Experts, m.ExpertsUsed = int64(p.Experts), int64(p.ExpertsUsed)
	}
	if o.ModelPath == "" {
		m.ModelFile = "builtin:tiny"
	} else {
		st, err := os.Stat(o.ModelPath)
		if err != nil {
			return m, fmt.Errorf("harness: %w", err)
		}
		m.ModelBytes = st.Size()
		h, err := HashFile(o.ModelPath, o.Hash, o.Progress)
		if err != nil {
			return m, err
		}
		m.ModelSHA256 = h
	}
	sum := sha256.Sum256([]byte(m.StartedAt.Format(time.RFC3339Nano) + m.Hostname + m.ModelFile + m.CommandLine))
	m.RunID = m.StartedAt.Format("20060102T150405Z") + "-" + hex.EncodeToString(sum[:4])
	return m, nil
}

// HashFile fingerprints a file in the given mode ("" means HashFull).
func HashFile(path string, mode HashMode, prog io.Writer) (string, error) {
	if mode == HashNone {
		return "", nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("harness: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("harness: %w", err)
	}
	h := sha256.New()
	switch mode {
	case "", HashFull:
		var w io.Writer = h
		var bar *progress.Bar
		if prog != nil && st.Size() > 1<<30 {
			bar = progress.New(prog, "hashing model", st.Size(), "B")
			w = io.MultiWriter(h, countWriter{bar})
		}
		if _, err := io.Copy(w, f); err != nil {
			return "", fmt.Errorf("harness: hash %s: %w", path, err)
		}
		if bar != nil {
			bar.Finish()
		}
		return hex.EncodeToString(h.Sum(nil)), nil
	case HashQuick:
		const part = 64 << 20
		fmt.Fprintf(h, "%d\n", st.Size())
		if _, err := io.Copy(h, io.NewSectionReader(f, 0, part)); err != nil {
			return "", fmt.Errorf("harness: hash %s: %w", path, err)
		}
		if st.Size() > part {
			if _, err := io.Copy(h, io.NewSectionReader(f, max(part, st.Size()-part), part)); err != nil {
				return "", fmt.Errorf("harness: hash %s: %w", path, err)
			}
		}
		return "quick:" + hex.EncodeToString(h.Sum(nil)), nil
	}
	return "", fmt.Errorf("harness: unknown hash mode %q (want sha256, quick or none)", mode)
}

type countWriter struct{ b *progress.Bar }

func (c countWriter) Write(p []byte) (int, error) { c.b.Add(int64(len(p))); return len(p), nil }

// CPUModel returns the processor's model name, or "" when unknown.
func CPUModel() string {
	switch runtime.GOOS {
	case "linux":
		f, err := os.Open("/proc/cpuinfo")
		if err != nil {
			return ""
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	case "darwin":
		out, err := exec.Command("sysctl", "-n", "machdep.cpu.brand_string").Output()
		if err == nil {
			return strings.TrimSpace(string(out))
		}
	}
	return ""
}

// GitRevision returns the source revision: the one stamped in the build
// (with "-dirty" for modified trees), else the HEAD of the git work tree
// the process runs in, else "".
func GitRevision() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "-dirty"
				}
			}
		}
		if rev != "" {
			return rev + dirty
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", "rev-parse", "HEAD")
	cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0")
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(out))
}
