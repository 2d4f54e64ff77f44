package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxCommandFunc is the most lines a function of a command may span:
// commands parse flags, open files and wire packages together, and logic
// longer than this belongs in a package, where it is tested.
const maxCommandFunc = 80

// TestCommandsAreWiring checks that no function or function literal under
// cmd/ spans more than maxCommandFunc lines, tests aside.
func TestCommandsAreWiring(t *testing.T) {
	dir := filepath.Join(root(t), "cmd")
	fset := token.NewFileSet()
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		n++
		ast.Inspect(f, func(node ast.Node) bool {
			var name string
			switch x := node.(type) {
			case *ast.FuncDecl:
				name = x.Name.Name
			case *ast.FuncLit:
				name = "a function literal"
			default:
				return true
			}
			if lines := fset.Position(node.End()).Line - fset.Position(node.Pos()).Line + 1; lines > maxCommandFunc {
				rel, _ := filepath.Rel(dir, path)
				t.Errorf("cmd/%s:%d: %s spans %d lines, more than %d", rel, fset.Position(node.Pos()).Line, name, lines, maxCommandFunc)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 8 {
		t.Fatalf("found only %d command sources under %s", n, dir)
	}
}
