// Package layering holds the tests that keep the code in its shape: the
// GGUF container, the kernels and the backend know nothing of the engine,
// only commands use the server, measurement code stays out of what it
// measures, and commands only wire packages together.
package layering

import (
	"go/build"
	"io/fs"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/ds4-go/ds4"

// root returns the module's directory.
func root(t *testing.T) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// deps returns the module's packages that pkg imports, directly or not,
// outside tests.
func deps(t *testing.T, ctx *build.Context, dir, pkg string) []string {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(path string) {
		p, err := ctx.ImportDir(filepath.Join(dir, strings.TrimPrefix(strings.TrimPrefix(path, module), "/")), 0)
		if err != nil {
			t.Fatalf("import %s: %v", path, err)
		}
		for _, imp := range p.Imports {
			if (imp == module || strings.HasPrefix(imp, module+"/")) && !seen[imp] {
				seen[imp] = true
				walk(imp)
			}
		}
	}
	walk(pkg)
	var out []string
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// packages returns the import paths of the module's packages under dir.
func packages(t *testing.T, ctx *build.Context, dir string) []string {
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if name := d.Name(); path != dir && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		if _, err := ctx.ImportDir(path, 0); err == nil {
			rel, err := filepath.Rel(dir, path)
			if err != nil {
				return err
			}
			out = append(out, strings.TrimSuffix(module+"/"+filepath.ToSlash(rel), "/."))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLayers checks the import rules behind the README's package table:
// gguf, quant and backends import nothing of the engine; only commands
// import the server; the engine, backends, quant and the server import
// no harness code.
func TestLayers(t *testing.T) {
	dir := root(t)
	ctx := build.Default
	ctx.Dir = dir
	all := packages(t, &ctx, dir)
	if len(all) < 20 {
		t.Fatalf("found only %d packages under %s", len(all), dir)
	}
	under := func(p, prefix string) bool {
		return p == module+"/"+prefix || strings.HasPrefix(p, module+"/"+prefix+"/")
	}
	for _, pkg := range all {
		rel := strings.TrimPrefix(pkg, module+"/")
		for _, d := range deps(t, &ctx, dir, pkg) {
			switch {
			case (under(pkg, "gguf") || under(pkg, "quant") || under(pkg, "backends")) && under(d, "engine"):
				t.Errorf("%s imports %s: the container, kernels and backends stand below the engine", rel, d)
			case under(d, "server") && !under(pkg, "cmd") && !under(pkg, "server"):
				t.Errorf("%s imports %s: only commands use the server", rel, d)
			case under(d, "harness") && (under(pkg, "engine") || under(pkg, "backends") || under(pkg, "quant") || under(pkg, "server")):
				t.Errorf("%s imports %s: measurement code stays out of what it measures", rel, d)
			}
		}
	}
}
