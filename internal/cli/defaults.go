package cli

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/prompt"
)

// DefaultSystem is the system prompt of every command that renders a chat
// (ds4, ds4-bench --chat-prompt-file, ds4-steer): upstream ds4's CLI
// default, without a final period.
const DefaultSystem = prompt.CompletionSystem

// ModelUsage is the help text of the -m/--model flag of every command
// that opens the model with OpenModel.
const ModelUsage = "GGUF model (default ./" + engine.DefaultModel + ", else the built-in tiny model)"

// ThreadsUsage is the help text of the --threads flag.
const ThreadsUsage = "CPU worker threads (0: one per CPU)"

// Threads checks v, the value of the flag --threads of fs.
func Threads(fs *pflag.FlagSet, v int) error {
	if v < 0 {
		return FlagError(fs, "threads", "must be at least 0 (0: one thread per CPU)")
	}
	return nil
}

// OpenModel opens the model of -m as engine.OpenDefault does (path, else
// ./engine.DefaultModel, else the built-in tiny model), reading it into
// memory with inMemory, and returns it with the absolute path it came from
// ("" for the tiny model). Falling back to the tiny model is said in one
// line on stderr, prefixed with prog.
func OpenModel(path string, inMemory bool, prog string, stderr io.Writer) (*engine.Model, string, error) {
	open := engine.Open
	if inMemory {
		open = engine.OpenInMemory
	}
	m, opened, err := engine.OpenDefaultWith(path, open)
	if err != nil {
		return nil, "", err
	}
	if opened == "" {
		fmt.Fprintf(stderr, "%s: no -m and no ./%s: using the built-in tiny synthetic model (random weights, gibberish output)\n", prog, engine.DefaultModel)
		return m, "", nil
	}
	abs, err := filepath.Abs(opened)
	if err != nil {
		if m.File != nil {
			m.File.Close()
		}
		return nil, "", fmt.Errorf("model path: %w", err)
	}
	return m, abs, nil
}
