package tokenizer

// MaxTokenBytes returns the length in bytes of the longest token: no token
// stands for more bytes of text, so text of b bytes encodes to at least
// b/MaxTokenBytes tokens (128 for the DeepSeek V4 tables: a run of spaces
// and a run of dots).
func (t *Tokenizer) MaxTokenBytes() int {
	n := uint32(0)
	for id := 0; id < t.vocab; id++ {
		n = max(n, t.textOff[id+1]-t.textOff[id])
	}
	return int(n)
}

// AppendEncodeRenderedLimit is AppendEncodeRendered of all of text that
// stops as soon as dst holds more than limit tokens. ok reports whether
// all of text was encoded, in which case the result is
// AppendEncodeRendered's; otherwise it is a prefix of it longer than
// limit. (Client ranges covering all of text give AppendEncode without
// special tokens, none give it with them.)
func (t *Tokenizer) AppendEncodeRenderedLimit(dst []int, text string, client []Span, limit int) (out []int, ok bool) {
	e := limitEncoder{t: t, dst: dst, n: len(dst), limit: limit, keep: true}
	ok = e.encode(text, client)
	return e.dst, ok
}

// CountRenderedLimit returns the number of tokens AppendEncodeRendered
// would append for all of text, without keeping them. It stops counting as
// soon as the count passes limit and then returns a count above limit and
// ok false.
func (t *Tokenizer) CountRenderedLimit(text string, client []Span, limit int) (n int, ok bool) {
	var buf [64]int
	e := limitEncoder{t: t, dst: buf[:0], limit: limit}
	ok = e.encode(text, client)
	return e.n, ok
}

// limitEncoder encodes text as AppendEncodeRendered does while counting
// tokens against a limit.
type limitEncoder struct {
	t     *Tokenizer
	dst   []int
	n     int // tokens counted
	limit int
	keep  bool // append to dst; otherwise dst is scratch space
	sc    bpeScratch
}

// encode encodes text, recognizing the required special tokens outside the
// client ranges, and reports whether it got to the end within the limit.
func (e *limitEncoder) encode(text string, client []Span) bool {
	if e.n > e.limit {
		return false
	}
	emit := e.piece
	span, k := 0, 0
	for i := 0; i < len(text); {
		pos, id, n := e.t.nextSpecial(text, i, client, &k)
		if n == 0 {
			break
		}
		if !pretokenizeWhile(text[span:pos], emit) || !e.add(id) {
			return false
		}
		i = pos + n
		span = i
	}
	return pretokenizeWhile(text[span:], emit)
}

// piece encodes one pre-tokenized piece and reports whether the count is
// still within the limit.
func (e *limitEncoder) piece(p string) bool {
	before := len(e.dst)
	e.dst = e.t.bpe(e.dst, p, &e.sc)
	e.n += len(e.dst) - before
	if !e.keep {
		e.dst = e.dst[:0]
	}
	return e.n <= e.limit
}

// add adds the token id and reports whether the count is still within
// the limit.
func (e *limitEncoder) add(id int) bool {
	if e.keep {
		e.dst = append(e.dst, id)
	}
	e.n++
	return e.n <= e.limit
}
