package harness

import (
	"fmt"
	"os"

	"github.com/ds4-go/ds4/engine/tokenizer"
)

// ReadBenchPrompt reads the sweep's token sequence from the file path:
// with chat, its text rendered as one non-thinking chat user message under
// the system text (EncodeChat); without, the text tokenized as plain text
// (no BOS, no template). It returns the sequence and its description.
func ReadBenchPrompt(tok *tokenizer.Tokenizer, path string, chat bool, system string) (BenchInput, []int, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return BenchInput{}, nil, err
	}
	in := BenchInput{PromptFile: path, PromptMode: "raw"}
	var ids []int
	if chat {
		in.PromptMode = "chat"
		ids = EncodeChat(tok, system, string(text))
	} else {
		ids = tok.Encode(string(text))
	}
	in.PromptTokens = int64(len(ids))
	return in, ids, nil
}

// CheckVocab returns an error naming the first of ids outside a
// vocabulary of vocab tokens.
func CheckVocab(ids []int, vocab int) error {
	for _, id := range ids {
		if id < 0 || id >= vocab {
			return fmt.Errorf("prompt token %d is outside the model's vocabulary (%d)", id, vocab)
		}
	}
	return nil
}
