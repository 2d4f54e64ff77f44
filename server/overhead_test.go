package server

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/prompt"
	"github.com/ds4-go/ds4/engine/sample"
)

// BenchmarkStreamOverhead measures the server's overhead per streamed
// token: the time per token a client observes through HTTP and SSE
// (streaming chat completions, thinking off) minus the time per token of
// the same decode loop run directly on the session (sample, token bytes,
// evaluate). "fake" uses a scripted session whose forward pass costs
// nothing, so the difference is the server's own work and is not lost in
// the model's noise; "tiny" uses the embedded tiny model.
//
//	go test -run '^$' -bench StreamOverhead -benchtime 3x ./server
//
// DS4_OVERHEAD_TOKENS sets the tokens per run (200) and
// DS4_OVERHEAD_THREADS the tiny model's CPU threads (0: one per CPU).
func BenchmarkStreamOverhead(b *testing.B) {
	tokens := 200
	if n, err := strconv.Atoi(os.Getenv("DS4_OVERHEAD_TOKENS")); err == nil && n > 1 {
		tokens = n
	}
	b.Run("fake", func(b *testing.B) {
		script := strings.Repeat("tok ", tokens+10)
		httpNs, engNs := measureOverhead(b, tokens, func() Session {
			s := newScriptSession(b, 8192, script)
			s.loop = true
			return s
		})
		report(b, httpNs, engNs)
	})
	b.Run("tiny", func(b *testing.B) {
		threads, _ := strconv.Atoi(os.Getenv("DS4_OVERHEAD_THREADS")) // 0: one per CPU
		be := cpu.New(threads)
		defer be.Close()
		httpNs, engNs := measureOverhead(b, tokens, func() Session {
			s, err := engine.NewSession(tiny(b), be, engine.Options{Context: 2048})
			if err != nil {
				b.Fatal(err)
			}
			return s
		})
		report(b, httpNs, engNs)
	})
}

func report(b *testing.B, httpNs, engNs float64) {
	b.ReportMetric(httpNs, "http-ns/token")
	b.ReportMetric(engNs, "engine-ns/token")
	b.ReportMetric(httpNs-engNs, "overhead-ns/token")
	b.ReportMetric(0, "ns/op")
}

// measureOverhead returns the median time per token through HTTP+SSE and
// directly on a session, alternating the two b.N times.
func measureOverhead(b *testing.B, tokens int, newSession func() Session) (httpNs, engNs float64) {
	tok := testTokenizer(b)
	msgs := []prompt.Message{{Role: prompt.RoleUser, Content: "Count slowly from one to a thousand."}}
	text, err := prompt.Render(msgs, prompt.Options{Think: prompt.ThinkOff})
	if err != nil {
		b.Fatal(err)
	}
	ids := tok.EncodeSpecial(text)
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":%q}],"think":false,"stream":true,"max_tokens":%d,"seed":7}`, msgs[0].Content, tokens)

	var hs, es []float64
	for range b.N {
		// Directly on the session: the server's decode loop minus the server.
		sess := newSession()
		if err := sess.Prefill(ids); err != nil {
			b.Fatal(err)
		}
		sm := sample.New(sample.Params{Temperature: 1, TopP: 1, MinP: 0.05, Seed: 7})
		p := sm.Params()
		start := time.Now()
		for range tokens {
			t := sm.SampleWith(sess.Logits(), p)
			_ = tok.TokenBytes(t)
			if err := sess.Decode(t); err != nil {
				b.Fatal(err)
			}
		}
		es = append(es, float64(time.Since(start).Nanoseconds())/float64(tokens))

		// Through the server.
		ts := startServer(b, Config{Session: newSession(), Tokenizer: tok})
		resp, err := http.Post(ts.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		r := bufio.NewReader(resp.Body)
		var first, last time.Time
		n := 0
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				break
			}
			if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"delta":{"content"`) {
				last = time.Now()
				if n == 0 {
					first = last
				}
				n++
			}
		}
		resp.Body.Close()
		if n < tokens/2 {
			b.Fatalf("only %d content events", n)
		}
		hs = append(hs, float64(last.Sub(first).Nanoseconds())/float64(n-1))
	}
	return median(hs), median(es)
}

func median(x []float64) float64 {
	sort.Float64s(x)
	return x[len(x)/2]
}
