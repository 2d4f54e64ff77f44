package layout

import (
	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/gguf"
)

// TokenizerKV returns the tokenizer metadata DS4 files carry: the GPT-2
// style BPE tables, token types (special tokens as control) and the
// BOS/EOS ids, as upstream and llama.cpp read them.
func TokenizerKV(t *tokenizer.Tables) []gguf.KV {
	types := make([]int32, len(t.Tokens))
	for i := range types {
		types[i] = 1 // normal
	}
	for _, s := range t.Special {
		types[s.ID] = 3 // control
	}
	return []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: gguf.String("gpt2")},
		{Key: "tokenizer.ggml.pre", Value: gguf.String("joyai-llm")},
		{Key: "tokenizer.ggml.tokens", Value: gguf.Strings(t.Tokens)},
		{Key: "tokenizer.ggml.token_type", Value: gguf.Int32s(types)},
		{Key: "tokenizer.ggml.merges", Value: gguf.Strings(t.Merges)},
		{Key: "tokenizer.ggml.bos_token_id", Value: gguf.Uint32(0)},
		{Key: "tokenizer.ggml.eos_token_id", Value: gguf.Uint32(1)},
	}
}
