package main

import (
	"bufio"
	"fmt"
	"os"
	"time"

	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/internal/cli"
)

// tracer writes the --trace file: one timestamped line per event, in the
// style of upstream's ds4-agent --trace. Each line starts with the local
// time ("2006-01-02 15:04:05.000") and a space; the events are
//
//	start ctx=N model=M think=T
//	user="TEXT"                               (the message of a turn)
//	prefill turn=N transcript=N cached=N suffix=N think=T
//	tokens label=prefill_suffix start=N len=N (then a token line each)
//	token index=N id=N bytes=N text="TEXT" hex=HEX
//	end turn=N generated=N stop=eos|limit|interrupt|error
//
// The prefill listing covers transcript positions start to len-1 (len is
// the transcript length, as upstream); the token lines after it, up to
// the end line, are the generated tokens. index is a token's position in
// the transcript; text escapes \, ", \n, \r, \t and other control bytes
// (\xNN). A nil tracer writes nothing.
type tracer struct {
	f   *os.File
	w   *bufio.Writer
	tok *tokenizer.Tokenizer
	err error // first write error, reported by close
}

// openTrace creates the trace file; an empty path gives a nil tracer.
func openTrace(path string, tok *tokenizer.Tokenizer) (*tracer, error) {
	if path == "" {
		return nil, nil
	}
	f, err := cli.CreatePrivate(path)
	if err != nil {
		return nil, fmt.Errorf("--trace: %w", err)
	}
	return &tracer{f: f, w: bufio.NewWriter(f), tok: tok}, nil
}

// event writes one line.
func (t *tracer) event(format string, args ...any) {
	if t == nil {
		return
	}
	t.stamp()
	fmt.Fprintf(t.w, format, args...)
	t.w.WriteByte('\n')
	t.flush()
}

// text writes a label="escaped text" line.
func (t *tracer) text(label, s string) {
	if t == nil {
		return
	}
	t.stamp()
	t.w.WriteString(label)
	t.w.WriteString(`="`)
	t.escape([]byte(s))
	t.w.WriteString("\"\n")
	t.flush()
}

// tokens writes a header and one line per token of ids, ids[0] being at
// transcript position start.
func (t *tracer) tokens(label string, start int, ids []int) {
	if t == nil {
		return
	}
	t.stamp()
	fmt.Fprintf(t.w, "tokens label=%s start=%d len=%d\n", label, start, start+len(ids))
	for i, id := range ids {
		t.writeToken(start+i, id)
	}
	t.flush()
}

// token writes the line of one generated token at transcript position index.
func (t *tracer) token(index, id int) {
	if t == nil {
		return
	}
	t.writeToken(index, id)
	t.flush()
}

func (t *tracer) writeToken(index, id int) {
	b := t.tok.TokenBytes(id)
	t.stamp()
	fmt.Fprintf(t.w, "token index=%d id=%d bytes=%d text=\"", index, id, len(b))
	t.escape(b)
	t.w.WriteString(`" hex=`)
	for _, c := range b {
		fmt.Fprintf(t.w, "%02x", c)
	}
	t.w.WriteByte('\n')
}

func (t *tracer) stamp() {
	t.w.WriteString(time.Now().Format("2006-01-02 15:04:05.000 "))
}

func (t *tracer) escape(b []byte) {
	for _, c := range b {
		switch c {
		case '\\':
			t.w.WriteString(`\\`)
		case '"':
			t.w.WriteString(`\"`)
		case '\n':
			t.w.WriteString(`\n`)
		case '\r':
			t.w.WriteString(`\r`)
		case '\t':
			t.w.WriteString(`\t`)
		default:
			if c < 0x20 || c == 0x7f {
				fmt.Fprintf(t.w, `\x%02x`, c)
			} else {
				t.w.WriteByte(c)
			}
		}
	}
}

// flush pushes the buffered lines to the file, so that the trace is
// complete up to the last event even if the process is killed.
func (t *tracer) flush() {
	if err := t.w.Flush(); err != nil && t.err == nil {
		t.err = err
	}
}

// close closes the file and returns the first error met writing it.
func (t *tracer) close() error {
	if t == nil {
		return nil
	}
	t.flush()
	if err := t.f.Close(); err != nil && t.err == nil {
		t.err = err
	}
	if t.err != nil {
		return fmt.Errorf("--trace: %w", t.err)
	}
	return nil
}
