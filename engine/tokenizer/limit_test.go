package tokenizer

import (
	"os"
	"strings"
	"testing"
)

// limitTexts are texts for the limited encoders: prose, rendered chat
// with special tokens, long runs (heap BPE) and edge cases.
func limitTexts(t *testing.T) []string {
	t.Helper()
	prose, err := os.ReadFile("testdata/promessi_sposi_excerpt.txt")
	if err != nil {
		t.Fatal(err)
	}
	return []string{
		"",
		"a",
		string(prose),
		BOS + User + "Hello, world!" + Assistant + ThinkOpen + "hmm" + ThinkEnd + "Hi." + EOS + User + "数字 12345 <tool_result>x</tool_result>" + Assistant,
		strings.Repeat(" ", 1000) + strings.Repeat(".", 300) + strings.Repeat("a", 5000),
		"<｜User<think" + EOS + EOS + "｜DSML｜｜DSML｜",
	}
}

func TestEncodeLimitMatchesEncode(t *testing.T) {
	tok := defaultTok(t)
	for i, text := range limitTexts(t) {
		for _, special := range []bool{false, true} {
			want := tok.AppendEncode([]int{7}, text, special)
			n := len(want) - 1
			// At or above the count: everything, as AppendEncode.
			for _, limit := range []int{len(want), len(want) + 100} {
				got, ok := tok.AppendEncodeRenderedLimit([]int{7}, text, plain(text, special), limit)
				if !ok || !equalInts(got, want) {
					t.Errorf("text %d special %v limit %d: ok %v, %d tokens, want %d", i, special, limit, ok, len(got), len(want))
				}
				if c, ok := tok.CountRenderedLimit(text, plain(text, special), limit-1); !ok || c != n {
					t.Errorf("text %d special %v: CountRenderedLimit %d, %v; want %d", i, special, c, ok, n)
				}
			}
			// Below it: a prefix that passes the limit, and no more.
			for _, limit := range []int{0, len(want) / 2, len(want) - 2} {
				if limit < 0 || limit >= len(want)-1 {
					continue
				}
				got, ok := tok.AppendEncodeRenderedLimit([]int{7}, text, plain(text, special), limit)
				if ok || len(got) <= limit || !equalInts(got, want[:len(got)]) {
					t.Errorf("text %d special %v limit %d: ok %v, %d tokens of %d", i, special, limit, ok, len(got), len(want))
				}
				if c, ok := tok.CountRenderedLimit(text, plain(text, special), limit); ok || c <= limit || c > n {
					t.Errorf("text %d special %v limit %d: CountRenderedLimit %d, %v", i, special, limit, c, ok)
				}
			}
		}
	}
}

// plain returns the client ranges under which the rendered-text encoders
// tokenize text as AppendEncode(text, special) does: none with special
// tokens, all of text without.
func plain(text string, special bool) []Span {
	if special {
		return nil
	}
	return []Span{{0, len(text)}}
}

// TestEncodeLimitStopsEarly checks that encoding stops near the limit: a
// text of a million short words counted up to 100 tokens takes far fewer
// pieces than the whole text.
func TestEncodeLimitStopsEarly(t *testing.T) {
	tok := defaultTok(t)
	text := strings.Repeat("word ", 1<<20)
	e := limitEncoder{t: tok, limit: 100}
	calls := 0
	ok := pretokenizeWhile(text, func(p string) bool {
		calls++
		return e.piece(p)
	})
	if ok || e.n != 101 || calls != 101 {
		t.Errorf("ok %v, %d tokens after %d pieces; want a stop at 101", ok, e.n, calls)
	}
	if n, ok := tok.CountRenderedLimit(text, plain(text, false), 100); ok || n != 101 {
		t.Errorf("CountRenderedLimit %d, %v", n, ok)
	}
	allocs := testing.AllocsPerRun(5, func() { tok.CountRenderedLimit(text, nil, 100) })
	if allocs > 2 {
		t.Errorf("CountRenderedLimit allocates %v times", allocs)
	}
}

func TestMaxTokenBytes(t *testing.T) {
	tok := defaultTok(t)
	m := tok.MaxTokenBytes()
	if m != 128 {
		t.Errorf("MaxTokenBytes %d, want 128 (DeepSeek V4 tables)", m)
	}
	for id := range tok.VocabSize() {
		if len(tok.tokenBytes(id)) > m {
			t.Fatalf("token %d has %d bytes", id, len(tok.tokenBytes(id)))
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestEncodeRenderedLimitMatches holds the limited rendered-text encoders
// to AppendEncodeRendered: with client ranges over none, all, the middle
// of the text and ranges cutting special strings, they give its tokens
// when the limit allows, and a prefix of them past the limit otherwise.
func TestEncodeRenderedLimitMatches(t *testing.T) {
	tok := defaultTok(t)
	for i, text := range limitTexts(t) {
		n := len(text)
		for j, client := range [][]Span{
			nil,
			{{0, n}},
			{{n / 3, 2 * n / 3}},
			{{0, n / 4}, {n / 4, n / 4}, {n / 2, n/2 + 3}, {3 * n / 4, n}},
		} {
			want := tok.AppendEncodeRendered(nil, text, 0, client)
			got, ok := tok.AppendEncodeRenderedLimit(nil, text, client, len(want))
			if !ok || !equalInts(got, want) {
				t.Errorf("text %d client %d: ok %v, %d tokens, want %d", i, j, ok, len(got), len(want))
			}
			if c, ok := tok.CountRenderedLimit(text, client, len(want)); !ok || c != len(want) {
				t.Errorf("text %d client %d: CountRenderedLimit %d, %v; want %d", i, j, c, ok, len(want))
			}
			if limit := len(want) / 2; limit < len(want)-1 {
				got, ok := tok.AppendEncodeRenderedLimit(nil, text, client, limit)
				if ok || len(got) <= limit || !equalInts(got, want[:len(got)]) {
					t.Errorf("text %d client %d limit %d: ok %v, %d tokens of %d", i, j, limit, ok, len(got), len(want))
				}
				if c, ok := tok.CountRenderedLimit(text, client, limit); ok || c <= limit || c > len(want) {
					t.Errorf("text %d client %d limit %d: CountRenderedLimit %d, %v", i, j, limit, c, ok)
				}
			}
		}
	}
}
