package tokenizer

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func pieces(s string) []string {
	var out []string
	pretokenize(s, func(p string) { out = append(out, p) })
	return out
}

// refPretokenize is an independent, literal transcription of the reference
// pre-tokenizer (docs/formats/tokenizer.md#pre-tokenization) for valid UTF-8: stages 1 and 2 with Go's
// regexp (which can express them), stage 3 by trying each regex alternative
// in order with explicit backtracking over []rune.
func refPretokenize(s string) []string {
	var out []string
	for _, p1 := range refIsolated([]string{s}, refStage1) {
		for _, p2 := range refIsolated([]string{p1}, refStage2) {
			out = append(out, refStage3(p2)...)
		}
	}
	return out
}

var (
	refStage1 = regexp.MustCompile(`\p{N}{1,3}`)
	refStage2 = regexp.MustCompile(`[一-龥぀-ゟ゠-ヿ]+`)
)

// refIsolated is a split with HF "Isolated" behaviour.
func refIsolated(in []string, re *regexp.Regexp) []string {
	var out []string
	for _, s := range in {
		last := 0
		for _, m := range re.FindAllStringIndex(s, -1) {
			if m[0] > last {
				out = append(out, s[last:m[0]])
			}
			out = append(out, s[m[0]:m[1]])
			last = m[1]
		}
		if last < len(s) {
			out = append(out, s[last:])
		}
	}
	return out
}

func refStage3(s string) []string {
	rs := []rune(s)
	n := len(rs)
	is := func(r rune, tabs ...*unicode.RangeTable) bool { return unicode.In(r, tabs...) }
	isNL := func(r rune) bool { return r == '\r' || r == '\n' }
	runLen := func(p int, f func(rune) bool) int {
		k := 0
		for p+k < n && f(rs[p+k]) {
			k++
		}
		return k
	}
	asciiAlpha := func(r rune) bool { return r < 0x80 && unicode.IsLetter(r) }
	lm := func(r rune) bool { return is(r, unicode.L, unicode.M) }
	ps := func(r rune) bool { return is(r, unicode.P, unicode.S) }
	alts := []func(p int) int{
		// [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+
		func(p int) int {
			if !strings.ContainsRune("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", rs[p]) {
				return 0
			}
			if k := runLen(p+1, asciiAlpha); k > 0 {
				return 1 + k
			}
			return 0
		},
		// [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
		func(p int) int {
			if r := rs[p]; !isNL(r) && !is(r, unicode.L, unicode.P, unicode.S) {
				if k := runLen(p+1, lm); k > 0 {
					return 1 + k
				}
			}
			return runLen(p, lm)
		},
		// ' ?[\p{P}\p{S}]+[\r\n]*'
		func(p int) int {
			if rs[p] == ' ' {
				if k := runLen(p+1, ps); k > 0 {
					return 1 + k + runLen(p+1+k, isNL)
				}
			}
			if k := runLen(p, ps); k > 0 {
				return k + runLen(p+k, isNL)
			}
			return 0
		},
		// \s*[\r\n]+
		func(p int) int {
			for a := runLen(p, unicode.IsSpace); a >= 0; a-- {
				if k := runLen(p+a, isNL); k > 0 {
					return a + k
				}
			}
			return 0
		},
		// \s+(?!\S)
		func(p int) int {
			for a := runLen(p, unicode.IsSpace); a >= 1; a-- {
				if p+a == n || unicode.IsSpace(rs[p+a]) {
					return a
				}
			}
			return 0
		},
		// \s+
		func(p int) int { return runLen(p, unicode.IsSpace) },
	}
	var out []string
	pending := -1
	for p := 0; p < n; {
		m := 0
		for _, alt := range alts {
			if m = alt(p); m > 0 {
				break
			}
		}
		if m == 0 {
			if pending < 0 {
				pending = p
			}
			p++
			continue
		}
		if pending >= 0 {
			out = append(out, string(rs[pending:p]))
			pending = -1
		}
		out = append(out, string(rs[p:p+m]))
		p += m
	}
	if pending >= 0 {
		out = append(out, string(rs[pending:]))
	}
	return out
}

// mixedAlphabet covers every class the scanner distinguishes, in several
// scripts, plus the boundary cases of the stage-2 ranges.
var mixedAlphabet = []rune(
	"aZxq" + "0129" + "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~" +
		"    \t\n\r\v\f\u0085\u00a0\u3000\u2028\u2029\ufeff\u200b\u200d" +
		"\x00\x01\x1f\x7f\u0080\u00ad" +
		"èàòïÉßµ" + "\u0300\u0301\u0308\u20dd\u0903" + "αβΩ" + "жЯ" + "عربي" + "١٢٣" + "²³¼Ⅻ" + "１２３" +
		"中文日本語龥\u9fa6\u4e00\u3400" + "あア・゠ー\u3099\u309b\u3040\u30ff\u3097" + "한국" +
		"«»—–“”‘’…¿¡" + "€$¢→±©°^`" + "😀👍\U0001F3FD\ufe0f" + "\ue000\ufffd" + "ｶﾞ",
)

func randomMixed(r *rand.Rand, maxLen int) string {
	var b strings.Builder
	n := r.IntN(maxLen + 1)
	for i := 0; i < n; i++ {
		c := mixedAlphabet[r.IntN(len(mixedAlphabet))]
		reps := 1
		if r.IntN(4) == 0 {
			reps = 1 + r.IntN(5) // runs make the quantifiers matter
		}
		for ; reps > 0; reps-- {
			b.WriteRune(c)
		}
	}
	return b.String()
}

func TestPretokenizeExamples(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"Hello world", []string{"Hello", " world"}},
		{"   中", []string{"   ", "中"}},
		{"ok.»\n\nNext", []string{"ok", ".»\n\n", "Next"}},
		{"a—\nb", []string{"a", "—\n", "b"}},
		{"  \x01x", []string{" ", " ", "\x01x"}},
		{"   \n\n  x", []string{"   \n\n", " ", " x"}},
		{"foo   ", []string{"foo", "   "}},
		{"x \n y", []string{"x", " \n", " y"}},
		{"12345678", []string{"123", "456", "78"}},
		{"$var->{key}", []string{"$var", "->{", "key", "}"}},
		{"hello中文world", []string{"hello", "中文", "world"}},
		{"カタ・カナ", []string{"カタ", "・", "カナ"}},
		{"a\u3099", []string{"a", "\u3099"}}, // stage 2 isolates the kana mark
		{"\x01\x02", []string{"\x01\x02"}},
		{"\xff\xfe abc\xed\xa0\x80x", []string{"\xff\xfe", " abc", "\xed\xa0", "\x80x"}},
		{"", nil},
	} {
		require.Equal(t, tc.want, pieces(tc.in), "%q", tc.in)
		if utf8.ValidString(tc.in) {
			require.Equal(t, tc.want, refPretokenize(tc.in), "ref %q", tc.in)
		}
	}
}

func TestPretokenizeMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for i := 0; i < n; i++ {
		s := randomMixed(r, 24)
		require.Equal(t, refPretokenize(s), pieces(s), "%q", s)
	}
	for _, tc := range cases(t).TextCases {
		require.Equal(t, refPretokenize(tc.Text), pieces(tc.Text), "%q", tc.Text)
	}
}

// Pieces always cover the input exactly, whatever the bytes.
func TestPretokenizeCoversInput(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 5000; i++ {
		b := []byte(randomMixed(r, 16))
		for k := r.IntN(4); k > 0 && len(b) > 0; k-- {
			b[r.IntN(len(b))] = byte(r.IntN(256))
		}
		s := string(b)
		ps := pieces(s)
		for _, p := range ps {
			require.NotEmpty(t, p)
		}
		require.Equal(t, s, strings.Join(ps, ""))
	}
}

// The class table must agree with the unicode package everywhere it is used
// instead of it.
func TestClassTable(t *testing.T) {
	tab := classTable()
	sc := scanner{tab: tab}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue
		}
		want := computeClass(r)
		got, n := sc.at(string(r), 0)
		if got != want || n != utf8.RuneLen(r) {
			t.Fatalf("U+%04X: class %b, want %b", r, got, want)
		}
	}
}
