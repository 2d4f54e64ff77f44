// Package cpufeattest runs a test again in a child process under
// DS4_PUREGO=1, so that a default test run also checks what the kernel
// sets choose when pure Go is asked for.
package cpufeattest

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/ds4-go/ds4/internal/cpufeat"
)

// UnderPureGo reports whether this process runs under DS4_PUREGO. When it
// does not, it first runs the top-level test t again in a child process
// of the same test binary with DS4_PUREGO=1, and fails t if the child
// fails or does not run it.
func UnderPureGo(t *testing.T) bool {
	t.Helper()
	if cpufeat.Host().PureGo {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), cpufeat.PureGoEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s under %s=1: %v\n%s", t.Name(), cpufeat.PureGoEnv, err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("%s under %s=1 did not run:\n%s", t.Name(), cpufeat.PureGoEnv, out)
	}
	return false
}
