package main

import (
	"bufio"
	"encoding/hex"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/engine/tokenizer"
)

// traceToken is one token line of a --trace file.
type traceToken struct {
	index, id int
	text      []byte // unescaped
}

// traceFile is a parsed --trace file.
type traceFile struct {
	events []string             // the non-token lines without their time stamp
	tokens []traceToken         // in file order
	gen    map[int][]traceToken // generated tokens by turn (those after the turn's prefill listing)
}

var (
	traceLineRE  = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} (.*)$`)
	traceTokenRE = regexp.MustCompile(`^token index=(\d+) id=(\d+) bytes=(\d+) text="(.*)" hex=([0-9a-f]*)$`)
	traceListRE  = regexp.MustCompile(`^tokens label=prefill_suffix start=(\d+) len=(\d+)$`)
	prefillEvRE  = regexp.MustCompile(`^prefill turn=(\d+) `)
)

// readTrace parses path, checking every line's time stamp, that each
// token's escaped text and hex spell the same bytes, that the bytes count
// is right and that each prefill listing has the length it announces.
func readTrace(t *testing.T, path string) traceFile {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	tf := traceFile{gen: map[int][]traceToken{}}
	turn, listLeft := 0, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := traceLineRE.FindStringSubmatch(sc.Text())
		require.NotNil(t, m, "line without a time stamp: %q", sc.Text())
		line := m[1]
		if tm := traceTokenRE.FindStringSubmatch(line); tm != nil {
			index, _ := strconv.Atoi(tm[1])
			id, _ := strconv.Atoi(tm[2])
			n, _ := strconv.Atoi(tm[3])
			raw, err := hex.DecodeString(tm[5])
			require.NoError(t, err)
			require.Len(t, raw, n)
			require.Equal(t, string(raw), unescapeTrace(t, tm[4]), line)
			tok := traceToken{index: index, id: id, text: raw}
			tf.tokens = append(tf.tokens, tok)
			if listLeft > 0 {
				listLeft--
			} else {
				tf.gen[turn] = append(tf.gen[turn], tok)
			}
			continue
		}
		require.Zero(t, listLeft, "listing cut short before %q", line)
		if lm := traceListRE.FindStringSubmatch(line); lm != nil {
			start, _ := strconv.Atoi(lm[1])
			end, _ := strconv.Atoi(lm[2])
			listLeft = end - start
		}
		if pm := prefillEvRE.FindStringSubmatch(line); pm != nil {
			turn, _ = strconv.Atoi(pm[1])
		}
		tf.events = append(tf.events, line)
	}
	require.NoError(t, sc.Err())
	return tf
}

// unescapeTrace undoes the trace's text escaping.
func unescapeTrace(t *testing.T, s string) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		i++
		require.Less(t, i, len(s), "dangling backslash in %q", s)
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'x':
			v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			require.NoError(t, err)
			b.WriteByte(byte(v))
			i += 2
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func ids(toks []traceToken) []int {
	var out []int
	for _, tk := range toks {
		out = append(out, tk.id)
	}
	return out
}

func TestTraceChat(t *testing.T) {
	t.Chdir(t.TempDir())
	msg := "say \"hi\"\t\\ ok"
	out, errOut := runREPLCmd(t, msg+"\n\"\"\"\ntwo\nlines\n\"\"\"\n", "--nothink", "--trace", "chat.trace", "-sys", "")
	tf := readTrace(t, "chat.trace")
	require.Equal(t, `start ctx=512 model="" name="DS4-tiny" think=off`, tf.events[0])
	require.Equal(t, `user="say \"hi\"\t\\ ok"`, tf.events[1])
	require.Contains(t, tf.events, `user="two\nlines"`)
	ts := prefills(t, errOut)
	require.Len(t, ts, 2, errOut)
	require.Contains(t, tf.events, "prefill turn=1 transcript="+strconv.Itoa(ts[0].prefill)+" cached=0 suffix="+strconv.Itoa(ts[0].prefill)+" think=off")
	require.Contains(t, tf.events, "prefill turn=2 transcript="+strconv.Itoa(ts[1].reused+ts[1].prefill)+" cached="+strconv.Itoa(ts[1].reused)+" suffix="+strconv.Itoa(ts[1].prefill)+" think=off")
	require.Contains(t, tf.events, "end turn=1 generated=3 stop=limit")
	require.Contains(t, tf.events, "end turn=2 generated=3 stop=limit")

	// Every evaluated position appears once, in order: nothing is
	// evaluated twice.
	for i, tk := range tf.tokens {
		require.Equal(t, i, tk.index)
	}
	tok, err := tokenizer.Default()
	require.NoError(t, err)
	gen1, gen2 := string(tok.Decode(ids(tf.gen[1]))), string(tok.Decode(ids(tf.gen[2])))
	require.Len(t, tf.gen[1], 3)
	want := "<｜begin▁of▁sentence｜><｜User｜>" + msg + "<｜Assistant｜></think>" + gen1 +
		"<｜end▁of▁sentence｜><｜User｜>two\nlines<｜Assistant｜></think>" + gen2
	require.Equal(t, want, string(tok.Decode(ids(tf.tokens))))
	// What was printed is what the trace says was generated.
	require.Contains(t, out, gen1+"\n"+gen2+"\n")
}

func TestTraceOneShot(t *testing.T) {
	t.Chdir(t.TempDir())
	code, out, errOut := runCmd("", "-p", "Hello", "-n", "4", "--temp", "0", "--nothink", "--ctx", "128", "--trace", "one.trace", "-sys", "Be brief.")
	require.Equal(t, 0, code, errOut)
	tf := readTrace(t, "one.trace")
	st, err := os.Stat("one.trace")
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "the trace holds the prompt")
	require.Equal(t, []string{
		`start ctx=128 model="" name="DS4-tiny" think=off`,
		`user="Hello"`,
		"prefill turn=1 transcript=" + strconv.Itoa(len(tf.tokens)-4) + " cached=0 suffix=" + strconv.Itoa(len(tf.tokens)-4) + " think=off",
		"tokens label=prefill_suffix start=0 len=" + strconv.Itoa(len(tf.tokens)-4),
		"end turn=1 generated=4 stop=limit",
	}, tf.events)
	tok, err := tokenizer.Default()
	require.NoError(t, err)
	gen := string(tok.Decode(ids(tf.gen[1])))
	require.Equal(t, gen+"\n", out)
	require.Equal(t, "<｜begin▁of▁sentence｜>Be brief.<｜User｜>Hello<｜Assistant｜></think>"+gen, string(tok.Decode(ids(tf.tokens))))

	code, _, errOut = runCmd("", "-p", "Hello", "-n", "1", "--ctx", "64", "--trace", "missing/dir/x.trace")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--trace missing/dir/x.trace: no such directory missing/dir")
}
