package tokenizer

import (
	"fmt"
	"math"
	"strings"
	"sync"
)

// Tokenizer encodes text to token ids and decodes ids to bytes. It is
// immutable after construction and safe for concurrent use.
type Tokenizer struct {
	vocab    int              // number of token ids
	ids      map[string]int32 // token string -> id
	text     []byte           // decoded bytes of all tokens, concatenated
	textOff  []uint32         // token i decodes to text[textOff[i]:textOff[i+1]]
	byteID   [256]int32       // id of the single-byte token of each byte
	pairs    pairTable        // merge rank and result by pair of ids
	required [len(RequiredSpecials)]int32
}

// byteEncoder returns the GPT-2 byte map (docs/formats/tokenizer.md#byte-map): the code point that
// represents each raw byte in token strings.
func byteEncoder() [256]rune {
	var enc [256]rune
	next := rune(256)
	for b := 0; b < 256; b++ {
		if (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255) {
			enc[b] = rune(b)
		} else {
			enc[b] = next
			next++
		}
	}
	return enc
}

// byteDecoder returns the inverse of byteEncoder: code point -> byte+1
// (0 means the code point is not in the map). All encoded points are < 324.
func byteDecoder() [324]uint16 {
	var dec [324]uint16
	for b, r := range byteEncoder() {
		dec[r] = uint16(b) + 1
	}
	return dec
}

var defaultTokenizer = sync.OnceValues(func() (*Tokenizer, error) {
	tab, err := DeepSeekV4()
	if err != nil {
		return nil, err
	}
	return New(tab)
})

// Default returns the tokenizer for the embedded DeepSeek V4 tables, built
// once and shared.
func Default() (*Tokenizer, error) { return defaultTokenizer() }

// FromTokens builds a tokenizer from the GGUF arrays tokenizer.ggml.tokens
// and tokenizer.ggml.merges; added tokens are those whose text cannot be a
// byte-level string, and the required specials are found by their text.
func FromTokens(tokens, merges []string) (*Tokenizer, error) {
	dec := byteDecoder()
	var specials []Special
	for id, tok := range tokens {
		if !isByteLevel(tok, &dec) {
			specials = append(specials, Special{ID: id, Content: tok})
		}
	}
	return New(&Tables{Tokens: tokens, Merges: merges, Special: specials})
}

// isByteLevel reports whether every code point of s is in the byte map.
func isByteLevel(s string, dec *[324]uint16) bool {
	for _, r := range s {
		if r < 0 || int(r) >= len(dec) || dec[r] == 0 {
			return false
		}
	}
	return true
}

// New builds a tokenizer from tables. It fails on duplicate tokens, missing
// single-byte tokens, malformed or duplicate merges, special entries whose id
// does not hold their text, and missing required special tokens.
func New(t *Tables) (*Tokenizer, error) {
	if t == nil || len(t.Tokens) == 0 {
		return nil, fmt.Errorf("tokenizer: empty vocabulary")
	}
	if len(t.Tokens) > math.MaxInt32 {
		return nil, fmt.Errorf("tokenizer: vocabulary of %d tokens is too large", len(t.Tokens))
	}
	tk := &Tokenizer{vocab: len(t.Tokens), ids: make(map[string]int32, len(t.Tokens))}
	for id, tok := range t.Tokens {
		if prev, dup := tk.ids[tok]; dup {
			return nil, fmt.Errorf("tokenizer: duplicate token %q at ids %d and %d", tok, prev, id)
		}
		tk.ids[tok] = int32(id)
	}

	enc := byteEncoder()
	for b, r := range enc {
		id, ok := tk.ids[string(r)]
		if !ok {
			return nil, fmt.Errorf("tokenizer: no token for byte 0x%02x (%q)", b, string(r))
		}
		tk.byteID[b] = id
	}

	var err error
	if tk.pairs, err = newPairTable(len(t.Tokens), len(t.Merges)); err != nil {
		return nil, err
	}
	for rank, m := range t.Merges {
		left, right, ok := strings.Cut(m, " ")
		if !ok || left == "" || right == "" || strings.Contains(right, " ") {
			return nil, fmt.Errorf("tokenizer: merge %d %q: want \"LEFT RIGHT\"", rank, m)
		}
		l, okL := tk.ids[left]
		r, okR := tk.ids[right]
		res, okRes := tk.ids[left+right]
		switch {
		case !okL:
			return nil, fmt.Errorf("tokenizer: merge %d %q: %q is not a token", rank, m, left)
		case !okR:
			return nil, fmt.Errorf("tokenizer: merge %d %q: %q is not a token", rank, m, right)
		case !okRes:
			return nil, fmt.Errorf("tokenizer: merge %d %q: result %q is not a token", rank, m, left+right)
		}
		if !tk.pairs.insert(l, r, uint32(rank), res) {
			return nil, fmt.Errorf("tokenizer: merge %d %q: duplicate merge", rank, m)
		}
	}

	literal := make([]bool, len(t.Tokens))
	for _, s := range t.Special {
		if s.ID < 0 || s.ID >= len(t.Tokens) || t.Tokens[s.ID] != s.Content {
			return nil, fmt.Errorf("tokenizer: special token %q: id %d does not hold it", s.Content, s.ID)
		}
		literal[s.ID] = true
	}
	for i, name := range RequiredSpecials {
		id, ok := tk.ids[name]
		if !ok {
			return nil, fmt.Errorf("tokenizer: required special token %q missing", name)
		}
		tk.required[i] = id
		literal[id] = true
	}

	// Decoded bytes (docs/formats/tokenizer.md#decoding): specials and tokens that cannot be byte-level
	// strings are their own UTF-8 text; the others map back through the
	// inverse byte map.
	dec := byteDecoder()
	size := 0
	for _, tok := range t.Tokens {
		size += len(tok)
	}
	if size > math.MaxUint32 {
		return nil, fmt.Errorf("tokenizer: token text of %d bytes is too large", size)
	}
	tk.text = make([]byte, 0, size)
	tk.textOff = make([]uint32, len(t.Tokens)+1)
	for id, tok := range t.Tokens {
		if literal[id] || !isByteLevel(tok, &dec) {
			tk.text = append(tk.text, tok...)
		} else {
			for _, r := range tok {
				tk.text = append(tk.text, byte(dec[r]-1))
			}
		}
		tk.textOff[id+1] = uint32(len(tk.text))
	}
	return tk, nil
}

// VocabSize returns the number of token ids.
func (t *Tokenizer) VocabSize() int { return t.vocab }

// Lookup returns the id of the token whose stored string is exactly text.
func (t *Tokenizer) Lookup(text string) (int, bool) {
	id, ok := t.ids[text]
	return int(id), ok
}

// Special returns the id of a required special token, named by its text
// (one of BOS, EOS, User, Assistant, ThinkOpen, ThinkEnd, DSML), or -1.
func (t *Tokenizer) Special(name string) int {
	for i, s := range RequiredSpecials {
		if s == name {
			return int(t.required[i])
		}
	}
	return -1
}

// tokenBytes returns the decoded bytes of id without copying, nil if out of range.
func (t *Tokenizer) tokenBytes(id int) []byte {
	if id < 0 || id >= t.vocab {
		return nil
	}
	return t.text[t.textOff[id]:t.textOff[id+1]:t.textOff[id+1]]
}

// TokenText returns the raw bytes of one token without copying them, or
// nil for an out-of-range id; the caller must not modify them (appending
// to them copies).
func (t *Tokenizer) TokenText(id int) []byte { return t.tokenBytes(id) }

// TokenBytes returns a copy of the raw bytes of one token, or nil for an
// out-of-range id.
func (t *Tokenizer) TokenBytes(id int) []byte {
	b := t.tokenBytes(id)
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// Decode concatenates the bytes of the tokens; out-of-range ids add nothing.
func (t *Tokenizer) Decode(ids []int) []byte {
	n := 0
	for _, id := range ids {
		n += len(t.tokenBytes(id))
	}
	out := make([]byte, 0, n)
	for _, id := range ids {
		out = append(out, t.tokenBytes(id)...)
	}
	return out
}

// Encode tokenizes plain text; special-token text is treated as ordinary text.
func (t *Tokenizer) Encode(text string) []int {
	return t.AppendEncode(make([]int, 0, len(text)/3+4), text, false)
}

// EncodeSpecial tokenizes rendered chat text: the seven required special
// tokens are recognized by exact match and the text between them is encoded
// as plain text.
func (t *Tokenizer) EncodeSpecial(text string) []int {
	return t.AppendEncode(make([]int, 0, len(text)/3+4), text, true)
}

// AppendEncode appends the tokens of text to dst (recognizing the required
// special tokens when special is true) and returns the extended slice.
// Text is pre-tokenized with the reference scanner of docs/formats/tokenizer.md#pre-tokenization; invalid
// UTF-8 bytes and NUL bytes are encoded like any other bytes (upstream stops
// at a NUL), so Decode always gives the input back.
func (t *Tokenizer) AppendEncode(dst []int, text string, special bool) []int {
	if !special {
		return t.appendText(dst, text)
	}
	return t.AppendEncodeRendered(dst, text, 0, nil)
}

// Span is the byte range [Start, End) of a text.
type Span struct{ Start, End int }

// AppendEncodeRendered appends the tokens of text[from:] to dst, where text
// is rendered chat text and client lists, sorted and disjoint, the byte
// ranges of text that hold client text: the required special tokens are
// recognized only where a whole special string lies outside client, so
// client text always becomes ordinary tokens. With no client ranges it
// tokenizes like AppendEncode with special set, and text between special
// tokens is encoded as one run whatever its ranges, so a rendering without
// special strings in client text tokenizes exactly as before.
func (t *Tokenizer) AppendEncodeRendered(dst []int, text string, from int, client []Span) []int {
	span, k := from, 0
	for i := from; i < len(text); {
		pos, id, n := t.nextSpecial(text, i, client, &k)
		if n == 0 {
			break
		}
		dst = t.appendText(dst, text[span:pos])
		dst = append(dst, id)
		i = pos + n
		span = i
	}
	return t.appendText(dst, text[span:])
}

// nextSpecial returns the position, id and length of the first required
// special token recognized in text at or after i outside the client
// ranges, or 0 length if there is none. *k is the index of the first client
// range that ends after i; calls with increasing i share it.
func (t *Tokenizer) nextSpecial(text string, i int, client []Span, k *int) (pos, id, n int) {
	for ; i < len(text); i++ {
		// Every required special starts with '<' or '｜' (EF BD 9C).
		if c := text[i]; c != '<' && c != 0xEF {
			continue
		}
		for *k < len(client) && client[*k].End <= i {
			*k++
		}
		if *k < len(client) && client[*k].Start <= i {
			i = client[*k].End - 1
			continue
		}
		id, n := t.specialAt(text[i:])
		if n == 0 || (*k < len(client) && client[*k].Start < i+n) {
			continue
		}
		return i, id, n
	}
	return len(text), 0, 0
}

// PrefixAgrees reports whether ids, decoded, are a prefix of the rendered
// text whose client ranges are client, with required special tokens exactly
// where AppendEncodeRendered recognizes them in that prefix: no special
// token stands for client text and no recognized special string is covered
// by ordinary tokens. Reusing ids as the start of text's tokenization then
// keeps every control token of the template and no other.
func (t *Tokenizer) PrefixAgrees(ids []int, text string, client []Span) bool {
	k := 0
	next, nextID, _ := t.nextSpecial(text, 0, client, &k)
	off := 0
	for _, id := range ids {
		b := t.tokenBytes(id)
		if b == nil || len(b) > len(text)-off || text[off:off+len(b)] != string(b) {
			return false
		}
		if t.isRequired(id) {
			if next != off || nextID != id {
				return false
			}
			off += len(b)
			next, nextID, _ = t.nextSpecial(text, off, client, &k)
			continue
		}
		off += len(b)
		if next < off {
			return false
		}
	}
	return true
}

// isRequired reports whether id is one of the required special tokens.
func (t *Tokenizer) isRequired(id int) bool {
	for _, r := range t.required {
		if int(r) == id {
			return true
		}
	}
	return false
}

// specialAt returns the id and length of the required special token that s
// starts with, or 0 length if none does. No required special is a prefix
// of another (docs/formats/tokenizer.md#special-tokens-in-text), so the first match is the only one.
func (t *Tokenizer) specialAt(s string) (int, int) {
	for i, sp := range RequiredSpecials {
		if strings.HasPrefix(s, sp) {
			return int(t.required[i]), len(sp)
		}
	}
	return 0, 0
}

// appendText appends the tokens of plain text: pre-tokenize, then BPE on
// each piece.
func (t *Tokenizer) appendText(dst []int, text string) []int {
	var sc bpeScratch
	pretokenize(text, func(piece string) {
		dst = t.bpe(dst, piece, &sc)
	})
	return dst
}
