package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// testFlags is a flag set shaped like ds4's: one-letter shorthands next to
// long names that start with the same letters.
func testFlags() *pflag.FlagSet {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.SetOutput(new(bytes.Buffer))
	fs.StringP("prompt", "p", "", "")
	fs.IntP("threads", "t", 0, "")
	fs.IntP("tokens", "n", 0, "")
	fs.StringP("model", "m", "", "")
	fs.Float32("temp", 1, "")
	fs.Float32("top-p", 1, "")
	fs.String("system", "", "")
	fs.String("sys", "", "")
	fs.BoolP("quiet", "q", false, "")
	fs.Bool("nothink", false, "")
	return fs
}

func TestNormalize(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"-temp", "0", "-p", "hi"}, []string{"--temp", "0", "-p", "hi"}},
		{[]string{"-temp=0.5"}, []string{"--temp=0.5"}},
		{[]string{"-sys", "be brief"}, []string{"--sys", "be brief"}},
		{[]string{"-top-p", "0.9", "-nothink"}, []string{"--top-p", "0.9", "--nothink"}},
		// Values are never rewritten, whoever takes them.
		{[]string{"-p", "-temp"}, []string{"-p", "-temp"}},
		{[]string{"--prompt", "-nothink"}, []string{"--prompt", "-nothink"}},
		{[]string{"-qp", "-temp"}, []string{"-qp", "-temp"}},
		{[]string{"-t", "-1"}, []string{"-t", "-1"}},
		{[]string{"--temp=0", "-nothink"}, []string{"--temp=0", "--nothink"}},
		{[]string{"-q", "-nothink"}, []string{"-q", "--nothink"}},
		// Shorthand clusters and unknown names are pflag's to judge.
		{[]string{"-t4", "-n8"}, []string{"-t4", "-n8"}},
		{[]string{"-tx"}, []string{"-tx"}},
		{[]string{"-bogus"}, []string{"-bogus"}},
		{[]string{"--", "-temp"}, []string{"--", "-temp"}},
		{[]string{"-", "x"}, []string{"-", "x"}},
	} {
		if got := Normalize(testFlags(), c.in); !slices.Equal(got, c.want) {
			t.Errorf("Normalize(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestParse(t *testing.T) {
	fs := testFlags()
	if err := Parse(fs, []string{"-temp", "0", "-p", "hi", "-sys", "x"}); err != nil {
		t.Fatal(err)
	}
	temp, _ := fs.GetFloat32("temp")
	threads, _ := fs.GetInt("threads")
	sys, _ := fs.GetString("sys")
	if temp != 0 || threads != 0 || sys != "x" {
		t.Errorf("temp %v threads %d sys %q", temp, threads, sys)
	}
}

func TestFlagError(t *testing.T) {
	fs := testFlags()
	if err := Parse(fs, []string{"-t", "-1", "-p", "two words"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, want string }{
		{"threads", "--threads -1: must not be negative"},
		{"prompt", `--prompt "two words": must not be negative`},
		{"model", `--model "": must not be negative`},
	} {
		if got := FlagError(fs, c.name, "must not be %s", "negative").Error(); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestInputFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f.txt")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{"", ""},
		{file, ""},
		{filepath.Join(dir, "nope"), "--prompt-file " + filepath.Join(dir, "nope") + ": no such file"},
		{dir, "--prompt-file " + dir + ": is a directory, not a file"},
	} {
		err := InputFile("prompt-file", c.path)
		if got := ""; err != nil {
			got = err.Error()
			if got != c.want {
				t.Errorf("%q: %q, want %q", c.path, got, c.want)
			}
		} else if c.want != "" {
			t.Errorf("%q: no error, want %q", c.path, c.want)
		}
	}
}

func TestUpstream(t *testing.T) {
	for _, c := range []struct {
		args     []string
		err      string
		notices  []string
		noNotice bool
	}{
		{args: []string{"--power", "100", "--quality"}, notices: []string{
			"prog: --quality: ignored: the CPU kernels are always the exact ones",
			"prog: --power 100: ignored: it sets upstream's GPU duty cycle",
		}},
		{args: []string{"--cpu", "--backend", "cpu"}, noNotice: true},
		{args: []string{"--backend", "metal"}, err: "--backend metal: not in this build: the only backend is cpu"},
		{args: []string{"--metal"}, err: "--metal: the Metal backend is not in this build"},
		{args: []string{"--cuda", "--power", "5"}, err: "--cuda: the CUDA backend is not in this build"},
		{args: []string{"--mtp", "mtp.gguf"}, err: "--mtp mtp.gguf: not in this build: MTP speculative decoding"},
		{args: []string{"-mtp-draft", "2"}, err: "--mtp-draft 2: not in this build"},
		{args: []string{"--mtp-margin=3"}, err: "--mtp-margin 3: not in this build"},
		{args: []string{"--ssd-streaming-cold", "--ssd-streaming-preload-experts", "20"}, notices: []string{
			"prog: --ssd-streaming-cold: ignored: this build's --ssd-streaming has no hot-expert preload",
			"prog: --ssd-streaming-preload-experts 20: ignored",
		}},
	} {
		fs := testFlags()
		AddUpstream(fs, Backends(), Tuning(), MTP())
		if err := Parse(fs, c.args); err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		var w bytes.Buffer
		err := CheckUpstream(fs, &w, "prog", Backends(), Tuning(), MTP())
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: error %v, want %q", c.args, err, c.err)
		case c.err == "" && err != nil:
			t.Errorf("%q: %v", c.args, err)
		case c.noNotice && w.Len() != 0:
			t.Errorf("%q: notices %q", c.args, w.String())
		}
		for _, n := range c.notices {
			if !strings.Contains(w.String(), n) {
				t.Errorf("%q: notices %q lack %q", c.args, w.String(), n)
			}
		}
		if got := strings.Count(w.String(), "\n"); got != len(c.notices) {
			t.Errorf("%q: %d notice lines, want %d", c.args, got, len(c.notices))
		}
	}
	// Upstream's flags stay out of the help text.
	fs := testFlags()
	AddUpstream(fs, Backends(), Tuning(), MTP())
	if u := fs.FlagUsages(); strings.Contains(u, "power") || strings.Contains(u, "mtp") {
		t.Errorf("help shows upstream's flags:\n%s", u)
	}
}

func TestOutputFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{"", ""},
		{filepath.Join(dir, "new.csv"), ""},
		{file, ""},
		{dir, "--csv " + dir + ": is a directory, not a file"},
		{filepath.Join(dir, "no", "x.csv"), "--csv " + filepath.Join(dir, "no", "x.csv") + ": no such directory " + filepath.Join(dir, "no")},
		{filepath.Join(file, "x.csv"), "--csv " + filepath.Join(file, "x.csv") + ": " + file + " is not a directory"},
	} {
		err := OutputFile("csv", c.path)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.path, err)
		case c.want != "" && (err == nil || err.Error() != c.want):
			t.Errorf("%q: %v, want %q", c.path, err, c.want)
		}
	}
}

func TestCreatePrivate(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "old.trace")
	if err := os.WriteFile(existing, []byte("old prompt"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(dir, "new.trace"), existing} {
		f, err := CreatePrivate(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString("prompt"); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", path, st.Mode().Perm())
		}
		if b, _ := os.ReadFile(path); string(b) != "prompt" {
			t.Errorf("%s: %q, want the old content replaced", path, b)
		}
	}
	if _, err := CreatePrivate(filepath.Join(dir, "no", "x")); err == nil {
		t.Error("no error for a missing directory")
	}
}

func TestContext(t *testing.T) {
	for _, c := range []struct {
		v    int
		want string // "" for no error
	}{
		{MinContext - 1, "--ctx 1: must be at least 2 (one prompt token and one generated token)"},
		{MinContext, ""},
		{1 << 20, ""},
		{1<<20 + 1, "--ctx 1048577: must be at most 1048576, the DS4 context length"},
	} {
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		fs.Int("ctx", 0, "")
		if err := fs.Set("ctx", strconv.Itoa(c.v)); err != nil {
			t.Fatal(err)
		}
		err := Context(fs, "ctx", c.v)
		if got := fmt.Sprint(err); (err == nil) != (c.want == "") || err != nil && got != c.want {
			t.Errorf("Context(%d) = %v, want %q", c.v, err, c.want)
		}
	}
}
