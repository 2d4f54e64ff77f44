package tokenizer

import (
	"unicode/utf8"
)

// StreamDecoder turns a token stream into text without ever splitting a
// UTF-8 character. It holds back an incomplete trailing character until the
// bytes that complete it arrive; a byte that cannot start or continue a
// valid UTF-8 sequence is emitted as U+FFFD, one per byte (the bytes
// utf8.DecodeRune reports as errors of width 1). For a token stream whose
// bytes are valid UTF-8 the concatenated output is exactly those bytes.
// A StreamDecoder is not safe for concurrent use.
type StreamDecoder struct {
	t       *Tokenizer
	pending []byte
}

// NewStreamDecoder returns a decoder with nothing buffered.
func (t *Tokenizer) NewStreamDecoder() *StreamDecoder { return &StreamDecoder{t: t} }

// Push adds one token and returns the complete UTF-8 text now available,
// which may be empty; out-of-range ids add nothing.
func (d *StreamDecoder) Push(id int) string {
	d.pending = append(d.pending, d.t.tokenBytes(id)...)
	cut := completeLen(d.pending)
	out := validString(d.pending[:cut])
	d.pending = d.pending[:copy(d.pending, d.pending[cut:])]
	return out
}

// Flush returns the buffered bytes, with an incomplete trailing character
// replaced by U+FFFD per byte, and leaves the decoder empty.
func (d *StreamDecoder) Flush() string {
	out := validString(d.pending)
	d.pending = d.pending[:0]
	return out
}

// completeLen returns the length of the longest prefix of b that does not
// end inside a character which later bytes could still complete: a trailing
// valid-but-incomplete UTF-8 sequence (at most 3 bytes) is held back.
func completeLen(b []byte) int {
	for i := max(0, len(b)-utf8.UTFMax+1); i < len(b); i++ {
		if !utf8.FullRune(b[i:]) {
			return i
		}
	}
	return len(b)
}

// validString converts b to a string, replacing each invalid byte by U+FFFD.
func validString(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b)+8)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, b[:n]...)
		}
		b = b[n:]
	}
	return string(out)
}
