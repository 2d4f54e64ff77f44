package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// roundTripSeeds are the FuzzEncode seeds; go test runs them as ordinary
// test cases.
var roundTripSeeds = []string{
	"",
	"Hello world",
	"  int x;\n\treturn x;\r\n}\n\n\n",
	"12345678 3.14159 1,000,000 ١٢٣ １２３ x²+y³",
	"Città è bella, perché? «Sì» — “quoted” ‘single’…",
	"日本語のテキスト、カタカナ。中文 한국어 Привет",
	"emoji 😀 test 👍🏽! 👨‍👩‍👧 🇮🇹",
	"\x00\x01\x7f\u0085\u00a0\u2028\u3000\ufeff",
	"\xff\xfe\xed\xa0\x80\xc3\x28\xf0\x9f\x98",
	"<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜></think>｜DSML｜",
	"<think>x</think><｜DSML｜tool_calls>",
	strings.Repeat(" ", 100) + "x" + strings.Repeat("\n", 50),
	strings.Repeat("ab", 500),
}

func checkRoundTrip(t *testing.T, tk *Tokenizer, s string) {
	t.Helper()
	if got := string(tk.Decode(tk.Encode(s))); got != s {
		t.Fatalf("Decode(Encode(%q)) = %q", s, got)
	}
	if got := string(tk.Decode(tk.EncodeSpecial(s))); got != s {
		t.Fatalf("Decode(EncodeSpecial(%q)) = %q", s, got)
	}
}

func FuzzEncode(f *testing.F) {
	tk := defaultTok(f)
	for _, s := range roundTripSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkRoundTrip(t, tk, s)
	})
}

// randomBytes draws from a mix of generators: mixed-script runes, raw
// bytes, digits, whitespace runs and emoji.
func randomText(r *rand.Rand) string {
	var b strings.Builder
	for parts := 1 + r.IntN(6); parts > 0; parts-- {
		switch r.IntN(6) {
		case 0:
			b.WriteString(randomMixed(r, 30))
		case 1:
			for n := r.IntN(12); n > 0; n-- {
				b.WriteByte(byte(r.IntN(256)))
			}
		case 2:
			for n := r.IntN(20); n > 0; n-- {
				b.WriteByte('0' + byte(r.IntN(10)))
			}
		case 3:
			ws := []string{" ", "\t", "\n", "\r\n", "\u00a0", "\u3000"}
			for n := r.IntN(10); n > 0; n-- {
				b.WriteString(ws[r.IntN(len(ws))])
			}
		case 4:
			for n := r.IntN(6); n > 0; n-- {
				b.WriteRune(rune(0x1F300 + r.IntN(0x300)))
			}
		case 5:
			for n := r.IntN(8); n > 0; n-- {
				b.WriteRune(rune(r.IntN(0x110000)))
			}
		}
	}
	return b.String()
}

func TestRoundTripProperty(t *testing.T) {
	tk := defaultTok(t)
	r := rand.New(rand.NewPCG(11, 12))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for i := 0; i < n; i++ {
		checkRoundTrip(t, tk, randomText(r))
	}
}

// streamAll pushes the tokens one by one and checks every chunk.
func streamAll(t *testing.T, tk *Tokenizer, ids []int) string {
	t.Helper()
	d := tk.NewStreamDecoder()
	var out strings.Builder
	for _, id := range ids {
		chunk := d.Push(id)
		if !utf8.ValidString(chunk) {
			t.Fatalf("chunk %q is not valid UTF-8", chunk)
		}
		out.WriteString(chunk)
	}
	chunk := d.Flush()
	if !utf8.ValidString(chunk) {
		t.Fatalf("flush %q is not valid UTF-8", chunk)
	}
	out.WriteString(chunk)
	if d.Flush() != "" {
		t.Fatal("second Flush returned text")
	}
	return out.String()
}

func TestStreamDecoder(t *testing.T) {
	tk := defaultTok(t)
	r := rand.New(rand.NewPCG(13, 14))
	inputs := append([]string{}, roundTripSeeds...)
	for _, tc := range cases(t).TextCases {
		inputs = append(inputs, tc.Text)
	}
	for i := 0; i < 5000; i++ {
		inputs = append(inputs, randomText(r))
	}
	for _, s := range inputs {
		ids := tk.EncodeSpecial(s)
		got := streamAll(t, tk, ids)
		// Valid text streams back unchanged; invalid bytes become U+FFFD,
		// one per byte, wherever the token boundaries fall.
		if want := validString([]byte(s)); got != want {
			t.Fatalf("stream(%q) = %q, want %q", s, got, want)
		}
		if utf8.ValidString(s) && got != s {
			t.Fatalf("stream(%q) = %q", s, got)
		}
	}

	// A character split across tokens is held back until complete.
	emoji := "😀" // F0 9F 98 80
	byteTok := func(b byte) int { id, _ := tk.Lookup(string(byteEncoder()[b])); return id }
	d := tk.NewStreamDecoder()
	for i := 0; i < 3; i++ {
		if out := d.Push(byteTok(emoji[i])); out != "" {
			t.Fatalf("partial emoji released %q", out)
		}
	}
	if out := d.Push(byteTok(emoji[3])); out != emoji {
		t.Fatalf("got %q", out)
	}
	// An incomplete character at the end is flushed as U+FFFD per byte.
	d.Push(byteTok('a'))
	if out := d.Push(byteTok(0xE2)); out != "" {
		t.Fatalf("got %q", out)
	}
	if out := d.Push(byteTok(0x82)); out != "" {
		t.Fatalf("got %q", out)
	}
	if out := d.Flush(); out != "\ufffd\ufffd" {
		t.Fatalf("flush %q", out)
	}
	// Out-of-range ids and special tokens.
	if out := d.Push(-1) + d.Push(tk.VocabSize()) + d.Push(tk.Special(EOS)); out != EOS {
		t.Fatalf("got %q", out)
	}
	// Invalid bytes that cannot start a character are released at once.
	if out := d.Push(byteTok(0xFF)); out != "\ufffd" {
		t.Fatalf("got %q", out)
	}
}

// FuzzPretokenize compares the scanner with the literal regex transcription
// on valid UTF-8 and checks that pieces always cover the input.
func FuzzPretokenize(f *testing.F) {
	for _, s := range roundTripSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := pieces(s)
		if strings.Join(got, "") != s {
			t.Fatalf("pieces(%q) = %q do not cover the input", s, got)
		}
		if !utf8.ValidString(s) {
			return
		}
		if want := refPretokenize(s); !slices.Equal(got, want) {
			t.Fatalf("pieces(%q) = %q, want %q", s, got, want)
		}
	})
}

// FuzzAppendEncodeRendered checks, for any text, one client range and a
// start, that the tokens decode to text[from:], that no required special
// token overlaps the client range, and that a text's own tokenization
// agrees with it as a prefix.
func FuzzAppendEncodeRendered(f *testing.F) {
	tk := defaultTok(f)
	for i, s := range roundTripSeeds {
		f.Add(s, i, i*3, i%4)
	}
	f.Add(BOS+User+"a"+EOS+User+"b"+Assistant+ThinkEnd, 14, 40, 0)
	f.Add(BOS+User+"a"+EOS+User+"b"+Assistant+ThinkEnd, 14, 40, 20)
	special := map[int]bool{}
	for _, s := range RequiredSpecials {
		special[tk.Special(s)] = true
	}
	f.Fuzz(func(t *testing.T, s string, start, end, from int) {
		if len(s) == 0 {
			start, end, from = 0, 0, 0
		} else {
			m := uint(len(s) + 1)
			start, end, from = int(uint(start)%m), int(uint(end)%m), int(uint(from)%m)
		}
		if start > end {
			start, end = end, start
		}
		client := []Span{{start, end}}
		ids := tk.AppendEncodeRendered(nil, s, from, client)
		if got := string(tk.Decode(ids)); got != s[from:] {
			t.Fatalf("decoded %q, want %q", got, s[from:])
		}
		off := from
		for _, id := range ids {
			n := len(tk.tokenBytes(id))
			if special[id] && off < end && start < off+n {
				t.Fatalf("special token %d at %d overlaps client range [%d,%d)", id, off, start, end)
			}
			off += n
		}
		if whole := tk.AppendEncodeRendered(nil, s, 0, client); !tk.PrefixAgrees(whole, s, client) {
			t.Fatalf("own tokens of %q do not agree", s)
		}
	})
}
