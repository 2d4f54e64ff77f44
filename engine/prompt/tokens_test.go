package prompt

import (
	"slices"
	"testing"

	"github.com/ds4-go/ds4/engine/tokenizer"
)

func defaultTokenizer(t *testing.T) *tokenizer.Tokenizer {
	t.Helper()
	tok, err := tokenizer.Default()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestExampleTokens checks the token ids of every example (prompt.md §10):
// rendered prompts tokenize with special-token recognition.
func TestExampleTokens(t *testing.T) {
	tok := defaultTokenizer(t)
	f, ex := loadExamples(t)
	for _, e := range f.Examples {
		got := tok.EncodeSpecial(e.Text)
		if len(got) != e.TokenCount {
			t.Errorf("%s: %d tokens, want %d", e.ID, len(got), e.TokenCount)
		}
		if e.IDs != nil && !slices.Equal(got, e.IDs) {
			t.Errorf("%s: ids\n%v\nwant\n%v", e.ID, got, e.IDs)
		}
	}
	// A rendering tokenizes to a prefix of any longer rendering that
	// extends it at a special-token boundary (prompt.md §9).
	for _, c := range [][2]string{
		{"ex1_turn1_prompt", "ex1_turn2_prompt"},
		{"ex3_turn1_prompt", "ex3_turn2_prompt"},
		{"ex3_turn2_prompt", "ex3_turn3_prompt"},
	} {
		a, b := tok.EncodeSpecial(ex[c[0]].Text), tok.EncodeSpecial(ex[c[1]].Text)
		if !slices.Equal(a, b[:min(len(a), len(b))]) {
			t.Errorf("%s tokens are not a prefix of %s tokens", c[0], c[1])
		}
	}
	// Sizes of the fixed blocks (prompt.md §9).
	if n := len(tok.EncodeSpecial(ToolsBlock([]Tool{{Schema: f.ToolSchemaLine}}))); n != 332 {
		t.Errorf("tools block: %d tokens, want 332", n)
	}
	if n := len(tok.EncodeSpecial(ThinkMaxPrefix)); n != 79 {
		t.Errorf("ThinkMaxPrefix: %d tokens, want 79", n)
	}
}

// TestOfficialPromptTokens checks the five official prompts against the
// prompt token counts the DeepSeek API reported for them.
func TestOfficialPromptTokens(t *testing.T) {
	tok := defaultTokenizer(t)
	for _, o := range loadOfficial(t) {
		if n := len(tok.EncodeSpecial(o.rendered)); n != o.tokens {
			t.Errorf("%s: %d tokens, the API counted %d", o.vec.ID, n, o.tokens)
		}
	}
}
