package tokenizer

import (
	"sync"
	"unicode"
	"unicode/utf8"
)

// Character classes used by the pre-tokenizer (docs/formats/tokenizer.md#pre-tokenization).
// Unicode general categories come from Go's unicode package (see
// unicode.Version); \s is the White_Space property (unicode.IsSpace).
const (
	cL   uint16 = 1 << iota // \p{L}
	cM                      // \p{M}
	cN                      // \p{N}
	cP                      // \p{P}
	cS                      // \p{S}
	cWS                     // \s (White_Space)
	cNL                     // CR or LF
	cAP                     // one of the 32 ASCII punctuation/symbol characters
	cAL                     // ASCII letter
	cCJK                    // stage-2 range: U+4E00–U+9FA5, U+3040–U+309F, U+30A0–U+30FF
)

// classTableSize bounds the precomputed class table: it covers Latin, Greek,
// Cyrillic, Arabic, Indic scripts, general punctuation and kana.
const classTableSize = 0x3100

// classTable holds the class of every code point below classTableSize. It is
// built once, on first use, and never modified afterwards.
var classTable = sync.OnceValue(func() *[classTableSize]uint16 {
	var t [classTableSize]uint16
	for r := rune(0); r < classTableSize; r++ {
		t[r] = computeClass(r)
	}
	return &t
})

// computeClass classifies one code point from the unicode tables.
func computeClass(r rune) uint16 {
	var c uint16
	switch {
	case unicode.IsLetter(r):
		c = cL
	case unicode.IsMark(r):
		c = cM
	case unicode.IsNumber(r):
		c = cN
	case unicode.IsPunct(r):
		c = cP
	case unicode.IsSymbol(r):
		c = cS
	}
	if unicode.IsSpace(r) {
		c |= cWS
	}
	if r == '\r' || r == '\n' {
		c |= cNL
	}
	if r < 0x80 {
		switch {
		case r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
			c |= cAL
		case r >= '!' && r <= '/', r >= ':' && r <= '@', r >= '[' && r <= '`', r >= '{' && r <= '~':
			c |= cAP
		}
	}
	if (r >= 0x4E00 && r <= 0x9FA5) || (r >= 0x3040 && r <= 0x30FF) {
		c |= cCJK
	}
	return c
}

// scanner classifies the characters of a string. An undecodable byte is a
// character of its own with no class (docs/formats/tokenizer.md#pre-tokenization, invalid UTF-8).
type scanner struct {
	tab *[classTableSize]uint16
}

// at returns the class and byte length of the character starting at s[i].
func (sc scanner) at(s string, i int) (uint16, int) {
	c := s[i]
	if c < utf8.RuneSelf {
		return sc.tab[c], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	switch {
	case n == 1: // invalid byte (a valid U+FFFD has n == 3)
		return 0, 1
	case r < classTableSize:
		return sc.tab[r], n
	case r >= 0x4E00 && r <= 0x9FA5:
		return cL | cCJK, n
	case r >= 0x9FA6 && r <= 0x9FFF, r >= 0xAC00 && r <= 0xD7A3:
		return cL, n // CJK ideographs outside the stage-2 range, Hangul syllables
	}
	return computeClass(r), n
}

// run returns the end of the maximal run of characters with a class in mask
// starting at byte offset i.
func (sc scanner) run(s string, i int, mask uint16) int {
	for i < len(s) {
		c, n := sc.at(s, i)
		if c&mask == 0 {
			break
		}
		i += n
	}
	return i
}

// pretokenize cuts text into pieces per the reference pre-tokenizer (docs/formats/tokenizer.md#pre-tokenization)
// and calls emit for each non-empty piece in order.
func pretokenize(text string, emit func(piece string)) {
	pretokenizeWhile(text, func(piece string) bool {
		emit(piece)
		return true
	})
}

// pretokenizeWhile is pretokenize with an emit that reports whether to go
// on: it stops at the first piece for which emit returns false and then
// returns false.
func pretokenizeWhile(text string, emit func(piece string) bool) bool {
	sc := scanner{tab: classTable()}
	start := 0 // start of the pending stretch that is neither number nor CJK
	for i := 0; i < len(text); {
		c, n := sc.at(text, i)
		if c&(cN|cCJK) == 0 {
			i += n
			continue
		}
		if start < i && !sc.stage3(text[start:i], emit) {
			return false
		}
		if c&cN != 0 {
			// Stage 1: a run of \p{N} in chunks of three from its left end.
			// Stage 3 leaves a chunk whole (no rule matches digits alone).
			j := i + n
			for k := 1; k < 3 && j < len(text); k++ {
				c2, n2 := sc.at(text, j)
				if c2&cN == 0 {
					break
				}
				j += n2
			}
			if !emit(text[i:j]) {
				return false
			}
			i = j
		} else {
			// Stage 2: a maximal CJK/kana run, then stage 3 within it.
			j := sc.run(text, i+n, cCJK)
			if !sc.stage3(text[i:j], emit) {
				return false
			}
			i = j
		}
		start = i
	}
	if start < len(text) {
		return sc.stage3(text[start:], emit)
	}
	return true
}

// stage3 applies the third split of docs/formats/tokenizer.md#pre-tokenization to one stage-2 piece: every match
// is a piece, and adjacent unmatched characters form one piece. It stops
// and returns false when emit does.
func (sc scanner) stage3(s string, emit func(piece string) bool) bool {
	pending := -1
	for p := 0; p < len(s); {
		m := sc.match(s, p)
		if m == 0 {
			if pending < 0 {
				pending = p
			}
			_, n := sc.at(s, p)
			p += n
			continue
		}
		if pending >= 0 {
			if !emit(s[pending:p]) {
				return false
			}
			pending = -1
		}
		if !emit(s[p : p+m]) {
			return false
		}
		p += m
	}
	if pending >= 0 {
		return emit(s[pending:])
	}
	return true
}

// match returns the byte length of the stage-3 regex match starting at s[p],
// or 0 if none of the alternatives matches there (docs/formats/tokenizer.md#pre-tokenization rules 1–6).
func (sc scanner) match(s string, p int) int {
	x, xn := sc.at(s, p)
	q := p + xn
	// Rule 1: ASCII punctuation followed by ASCII letters.
	if x&cAP != 0 && q < len(s) && s[q] < utf8.RuneSelf && sc.tab[s[q]]&cAL != 0 {
		j := q + 1
		for j < len(s) && s[j] < utf8.RuneSelf && sc.tab[s[j]]&cAL != 0 {
			j++
		}
		return j - p
	}
	// Rules 2 and 3: an optional non-letter prefix, then a run of L/M. A
	// mark as prefix gives the same result as the run starting at it.
	if x&(cL|cM) != 0 {
		return sc.run(s, q, cL|cM) - p
	}
	if x&(cNL|cP|cS) == 0 && q < len(s) {
		if y, yn := sc.at(s, q); y&(cL|cM) != 0 {
			return sc.run(s, q+yn, cL|cM) - p
		}
	}
	// Rule 4: optional space, a run of P/S, then a run of CR/LF.
	j := -1
	if x&(cP|cS) != 0 {
		j = q
	} else if s[p] == ' ' && q < len(s) {
		if y, yn := sc.at(s, q); y&(cP|cS) != 0 {
			j = q + yn
		}
	}
	if j >= 0 {
		j = sc.run(s, j, cP|cS)
		for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j - p
	}
	// Rule 5: whitespace.
	if x&cWS == 0 {
		return 0
	}
	afterNL, last, k := -1, p, 1
	if x&cNL != 0 {
		afterNL = q
	}
	for j = q; j < len(s); k++ {
		c, n := sc.at(s, j)
		if c&cWS == 0 {
			break
		}
		if c&cNL != 0 {
			afterNL = j + n
		}
		last = j
		j += n
	}
	switch {
	case afterNL >= 0: // \s*[\r\n]+
		return afterNL - p
	case j == len(s) || k == 1: // \s+(?!\S) at the end, or \s+ of one character
		return j - p
	default: // \s+(?!\S): leave the last character for what follows
		return last - p
	}
}
