package harness

import (
	"fmt"
	"strings"

	"github.com/ds4-go/ds4/engine/tokenizer"
)

// loadInstruction ends every load prompt, so that a chat model has
// something to write at length.
const loadInstruction = "\n\nRetell the text above in detail."

// LoadPrompts returns the prompts of a load run: windows of tokens DS4
// tokens of text (the whole text when tokens is 0), decoded back to text,
// followed by a request to retell them. Without fresh every request sends
// the first window; with fresh, request seq opens with its own number and
// takes the next window of text (wrapping around), so no two requests
// share more than the chat template's first tokens and no prefix cache
// can help.
func LoadPrompts(tok *tokenizer.Tokenizer, text string, tokens int, fresh bool) (func(seq int) string, error) {
	ids := tok.Encode(text)
	if len(ids) == 0 {
		return nil, fmt.Errorf("harness: load prompt text is empty")
	}
	if tokens <= 0 {
		tokens = len(ids)
	}
	window := func(seq int) string {
		w := make([]int, tokens)
		for i := range w {
			w[i] = ids[(seq*tokens+i)%len(ids)]
		}
		return strings.ToValidUTF8(string(tok.Decode(w)), "")
	}
	if !fresh {
		p := window(0) + loadInstruction
		return func(int) string { return p }, nil
	}
	return func(seq int) string {
		return fmt.Sprintf("Request %d. %s%s", seq, window(seq), loadInstruction)
	}, nil
}

// DefaultLoadText returns the built-in text of load prompts: numbered
// sentences, different from one another, about 8,000 DS4 tokens in all.
func DefaultLoadText() string {
	subjects := []string{"The miller", "A traveller", "The old priest", "Her cousin", "The boatman", "A young weaver", "The innkeeper"}
	verbs := []string{"crossed", "described", "remembered", "avoided", "painted", "counted", "followed"}
	objects := []string{"the bridge over the river", "the lake at dawn", "the road to the mountains", "a letter from Milan",
		"the bell tower", "the harvest in the valley", "a storm over the hills", "the market square"}
	var b strings.Builder
	for i := range 600 {
		fmt.Fprintf(&b, "%d. %s %s %s. ", i+1, subjects[i%len(subjects)], verbs[(i/7)%len(verbs)], objects[(i*3)%len(objects)])
		if i%6 == 5 {
			b.WriteString("\n")
		}
	}
	return b.String()
}
