package harness

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// maxSSELine bounds one line of a server-sent event stream.
const maxSSELine = 16 << 20

// SSEReader reads the data lines of a server-sent event stream.
type SSEReader struct {
	r    *bufio.Reader
	line []byte
}

// NewSSEReader returns a reader of the event stream r.
func NewSSEReader(r io.Reader) *SSEReader {
	return &SSEReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// Next returns the payload of the next "data:" line, without the one
// space that may follow the colon; comments, other fields and blank lines
// are skipped. The payload is valid until the next call. It returns
// io.EOF at the end of the stream and io.ErrUnexpectedEOF for a last
// line cut short.
func (s *SSEReader) Next() ([]byte, error) {
	for {
		line, err := s.readLine()
		if err != nil {
			return nil, err
		}
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue // blank line, comment, event:, id: or retry:
		}
		return bytes.TrimPrefix(data, []byte(" ")), nil
	}
}

// readLine returns the next line without its line ending (LF or CRLF).
func (s *SSEReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		frag, err := s.r.ReadSlice('\n')
		s.line = append(s.line, frag...)
		switch {
		case err == nil:
			return bytes.TrimSuffix(bytes.TrimSuffix(s.line, []byte("\n")), []byte("\r")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			if len(s.line) > maxSSELine {
				return nil, fmt.Errorf("event stream line over %d bytes", maxSSELine)
			}
		case err == io.EOF && len(s.line) > 0:
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}
