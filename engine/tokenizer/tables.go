// Package tokenizer implements the DeepSeek V4 byte-level BPE tokenizer
// (docs/formats/tokenizer.md): the embedded tables, the reference pre-tokenizer,
// BPE encoding with special-token recognition for rendered prompts, and
// decoding, including streaming decoding that never splits a UTF-8
// character.
package tokenizer

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/json"
	"fmt"
)

//go:embed deepseek-v4-tokenizer.json.gz
var deepSeekV4JSON []byte

// Tables are the vocabulary and merges as GGUF stores them: tokens are
// GPT-2 byte-level strings (special tokens as literal text), merges are
// "LEFT RIGHT" pairs whose index is their rank.
type Tables struct {
	Tokens  []string
	Merges  []string
	Special []Special
}

// Special is an added (special) token.
type Special struct {
	ID      int    `json:"id"`
	Content string `json:"content"`
}

// Required special tokens the engine locates by string.
const (
	BOS       = "<｜begin▁of▁sentence｜>"
	EOS       = "<｜end▁of▁sentence｜>"
	User      = "<｜User｜>"
	Assistant = "<｜Assistant｜>"
	ThinkOpen = "<think>"
	ThinkEnd  = "</think>"
	DSML      = "｜DSML｜"
)

// RequiredSpecials lists the special tokens a DS4 vocabulary must contain.
var RequiredSpecials = [...]string{BOS, EOS, User, Assistant, ThinkOpen, ThinkEnd, DSML}

// DeepSeekV4 decodes the embedded DeepSeek V4 tables.
func DeepSeekV4() (*Tables, error) {
	zr, err := gzip.NewReader(bytes.NewReader(deepSeekV4JSON))
	if err != nil {
		return nil, fmt.Errorf("tokenizer: embedded tables: %w", err)
	}
	var raw struct {
		Format  string    `json:"format"`
		Tokens  []string  `json:"tokens"`
		Merges  []string  `json:"merges"`
		Special []Special `json:"special_tokens"`
	}
	if err := json.NewDecoder(zr).Decode(&raw); err != nil {
		return nil, fmt.Errorf("tokenizer: embedded tables: %w", err)
	}
	if raw.Format != "ds4-go-tokenizer-v1" {
		return nil, fmt.Errorf("tokenizer: embedded tables: unknown format %q", raw.Format)
	}
	t := &Tables{Tokens: raw.Tokens, Merges: raw.Merges, Special: raw.Special}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return t, nil
}

// Validate checks that every required special token is present and that
// special ids point at their text.
func (t *Tables) Validate() error {
	ids := make(map[string]int, len(t.Special))
	for _, s := range t.Special {
		if s.ID < 0 || s.ID >= len(t.Tokens) || t.Tokens[s.ID] != s.Content {
			return fmt.Errorf("tokenizer: special token %q: id %d does not hold it", s.Content, s.ID)
		}
		ids[s.Content] = s.ID
	}
	for _, want := range RequiredSpecials {
		if _, ok := ids[want]; !ok {
			return fmt.Errorf("tokenizer: required special token %q missing", want)
		}
	}
	return nil
}
