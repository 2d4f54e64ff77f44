package engine

import (
	"bytes"
	"fmt"
	"os"

	"github.com/ds4-go/ds4/convert/synth"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/gguf"
)

// Open maps the DS4 GGUF at path and binds it; Close the model's File when
// done.
func Open(path string) (*Model, error) { return open(path, gguf.Open) }

// OpenInMemory reads the DS4 GGUF at path into memory of its own
// (gguf.ReadFile) and binds it; Close the model's File when done.
func OpenInMemory(path string) (*Model, error) { return open(path, gguf.ReadFile) }

func open(path string, read func(string) (*gguf.File, error)) (*Model, error) {
	f, err := read(path)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	m, err := Load(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// DefaultModel is the GGUF the commands look for in the working directory
// when no model is named.
const DefaultModel = "ds4flash.gguf"

// OpenDefault opens path, or ./DefaultModel when path is empty and that
// file exists, or else the built-in tiny model; it returns the path it
// opened, "" for the tiny model.
func OpenDefault(path string) (*Model, string, error) { return OpenDefaultWith(path, Open) }

// OpenDefaultWith is OpenDefault opening a file with open (Open or
// OpenInMemory).
func OpenDefaultWith(path string, open func(string) (*Model, error)) (*Model, string, error) {
	if path == "" {
		if _, err := os.Stat(DefaultModel); err == nil {
			path = DefaultModel
		}
	}
	if path == "" {
		m, err := OpenTiny()
		return m, "", err
	}
	m, err := open(path)
	return m, path, err
}

// TinySeed is the seed of the built-in tiny model.
const TinySeed = 1

// OpenTiny builds the tiny synthetic DS4 model (the `tiny` preset of
// ds4-quant synth, seed TinySeed) in memory and binds it: the model the
// commands use when no GGUF is given.
func OpenTiny() (*Model, error) {
	var buf bytes.Buffer
	_, err := synth.Write(&buf, synth.Options{Params: layout.Tiny(), Recipe: layout.RecipeQ2, Seed: TinySeed})
	if err != nil {
		return nil, fmt.Errorf("engine: tiny model: %w", err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("engine: tiny model: %w", err)
	}
	return Load(f)
}
