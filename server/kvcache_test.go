package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/kvcache"
)

func TestDiskKVCache(t *testing.T) {
	tok := testTokenizer(t)
	policy := kvcache.Policy{MinTokens: 8, ColdMaxTokens: 10000}
	store, err := kvcache.Open(kvcache.Options{Dir: t.TempDir(), QuantBits: 2, Policy: policy, Detokenize: tok.Decode, Budget: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	be := cpu.New(0)
	t.Cleanup(be.Close)
	sess, err := engine.NewSession(tiny(t), be, engine.Options{Context: 1024})
	if err != nil {
		t.Fatal(err)
	}
	var srv *testServer
	mgr := kvcache.NewManager(sess, kvcache.ManagerOptions{Cache: store, Tokenizer: tok, Policy: policy, Chunk: 64,
		Tools: func(key []byte) []kvcache.ToolEntry { return srv.ToolEntries(key) }})
	srv = startServer(t, Config{Session: sess, Tokenizer: tok, KVCache: mgr, KVStore: store})

	ask := func(system string) (cached int) {
		t.Helper()
		status, _, body := post(t, srv.url+"/v1/chat/completions", `{"messages":[{"role":"system","content":"`+system+
			`"},{"role":"user","content":"Tell me more."}],"max_tokens":2,"think":false}`)
		if status != 200 {
			t.Fatal(status, body)
		}
		var r struct {
			Usage struct {
				Details struct {
					Cached int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			}
		}
		json.Unmarshal([]byte(body), &r)
		return r.Usage.Details.Cached
	}
	a := strings.Repeat("You are an expert on the history of Rome. ", 4)
	b := strings.Repeat("You are an expert on the geology of Iceland. ", 4)
	if c := ask(a); c != 0 {
		t.Errorf("first request reused %d tokens", c)
	}
	if c := ask(b); c != 0 {
		t.Errorf("other conversation reused %d tokens", c)
	}
	// Back to the first conversation: the live session holds the other
	// one, so the prefix comes from the cold checkpoint on disk.
	if c := ask(a); c < 20 {
		t.Errorf("disk checkpoint not reused: %d cached tokens", c)
	}
	if srv.stats.diskHits.Load() != 1 {
		t.Errorf("%d disk hits", srv.stats.diskHits.Load())
	}
}

func TestToolEntries(t *testing.T) {
	ts, _ := scriptServer(t, nil)
	ts.tools.put("call_a", weatherScript)
	ts.tools.put("call_b", weatherScript)
	ts.tools.put("call_c", "\n\n<｜DSML｜tool_calls>\n</｜DSML｜tool_calls>")
	got := ts.ToolEntries([]byte("<｜User｜>x<｜Assistant｜></think>" + weatherScript + "<｜end▁of▁sentence｜>"))
	if len(got) != 2 || got[0].ID != "call_a" || got[1].ID != "call_b" || got[0].DSML != weatherScript {
		t.Errorf("entries %+v", got)
	}
}
