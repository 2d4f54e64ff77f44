package main

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"unicode/utf8"

	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/sample"
	"github.com/ds4-go/ds4/engine/tokenizer"
)

// maxDumpTopK caps --logprobs-top-k, as upstream does.
const maxDumpTopK = 128

// dumpLogprobs continues the prefilled session greedily and writes, for
// each step, the selected token and the top-k alternatives with their
// logits and log-probabilities, in upstream's --dump-logprobs layout
// (docs/cli.md#logprob-dump); the EOS step is recorded and ends the dump.
func dumpLogprobs(path string, s *engine.Session, tok *tokenizer.Tokenizer, promptTokens, maxTokens, k int) error {
	if k <= 0 {
		k = 20
	}
	k = min(k, maxDumpTopK)
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--dump-logprobs: %w", err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "{\n  \"source\":\"ds4\",\n  \"prompt_tokens\":%d,\n  \"ctx\":%d,\n  \"top_k\":%d,\n  \"steps\":[\n", promptTokens, s.Context(), k)
	room := s.Context() - s.Pos()
	steps := 0
	if room > 1 {
		steps = min(maxTokens, room-1)
	}
	eos := tok.Special(tokenizer.EOS)
	var top []sample.TokenLogprob
	// The EOS step is recorded, so EOS is a token that stops generation
	// rather than Generate's EOS, which it would not show.
	_, err = s.Generate(context.Background(), engine.GenerateOptions{
		MaxTokens: steps,
		EOS:       -1,
		Choose: func(logits []float32, step int) int {
			lse := sample.LogSumExp(logits)
			top = sample.TopLogprobs(logits, k, top[:0])
			selected := sample.Argmax(logits)
			if step > 0 {
				w.WriteString(",\n")
			}
			fmt.Fprintf(w, "    {\"step\":%d,\"selected\":", step)
			writeDumpToken(w, tok, selected)
			w.WriteString(",\"top_logprobs\":[")
			for i, t := range top {
				if i > 0 {
					w.WriteByte(',')
				}
				w.WriteString("{\"token\":")
				writeDumpToken(w, tok, t.ID)
				logit := logits[t.ID]
				fmt.Fprintf(w, ",\"logit\":%s,\"logprob\":%s}", cFloat(float64(logit)), cFloat(float64(logit)-lse))
			}
			w.WriteString("]}")
			return selected
		},
		Token: func(selected, _ int) bool { return selected == eos },
	})
	if err != nil {
		f.Close()
		return fmt.Errorf("--dump-logprobs: %w", err)
	}
	w.WriteString("\n  ]\n}\n")
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("--dump-logprobs: %w", err)
	}
	return f.Close()
}

// cFloat formats x like C's "%.9g" (infinities as inf/-inf).
func cFloat(x float64) string {
	switch {
	case math.IsInf(x, 1):
		return "inf"
	case math.IsInf(x, -1):
		return "-inf"
	case math.IsNaN(x):
		return "nan"
	}
	return fmt.Sprintf("%.9g", x)
}

// writeDumpToken writes {"id":N,"text":"…","bytes":[…]}. The text escapes
// every byte ≥ 0x80 as \u00XX when the token's bytes are not valid UTF-8
// (token pieces can split characters; the bytes array is authoritative).
func writeDumpToken(w *bufio.Writer, tok *tokenizer.Tokenizer, id int) {
	b := tok.TokenBytes(id)
	valid := utf8.Valid(b)
	fmt.Fprintf(w, "{\"id\":%d,\"text\":\"", id)
	for _, c := range b {
		switch {
		case c == '"' || c == '\\':
			w.WriteByte('\\')
			w.WriteByte(c)
		case c == '\n':
			w.WriteString(`\n`)
		case c == '\r':
			w.WriteString(`\r`)
		case c == '\t':
			w.WriteString(`\t`)
		case c < 0x20 || (!valid && c >= 0x80):
			fmt.Fprintf(w, `\u%04x`, c)
		default:
			w.WriteByte(c)
		}
	}
	w.WriteString("\",\"bytes\":[")
	for i, c := range b {
		if i > 0 {
			w.WriteByte(',')
		}
		fmt.Fprintf(w, "%d", c)
	}
	w.WriteString("]}")
}
