package server

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/ds4-go/ds4/engine/dsml"
	"github.com/ds4-go/ds4/engine/prompt"
)

// forceFixture returns the forced choice of any of the test tools.
func forceFixture(t *testing.T) *toolForce {
	t.Helper()
	r := &request{api: apiChat, tools: []prompt.Tool{
		{Schema: `{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}}`},
		{Schema: `{"name":"get_time","parameters":{"properties":{"zone":{"type":"string"},"opts":{"type":"object"},"ok":{"type":"boolean"},"xs":{"type":"array"},"v":{}}}}`},
		{Schema: `{"name":"search","parameters":{}}`},
	}}
	f, err := decodeToolChoice(r, json.RawMessage(`"required"`))
	if err != nil || f == nil || len(f.tools) != 3 {
		t.Fatalf("decodeToolChoice: %v %+v", err, f)
	}
	return f
}

// feedString feeds s and reports whether the grammar allows all of it.
func feedString(st *fstate, s string) bool {
	for i := 0; i < len(s); i++ {
		if !st.feed(s[i]) {
			return false
		}
	}
	return true
}

func TestForceNameMask(t *testing.T) {
	f := forceFixture(t)
	names, acts := nameCands(f.tools)
	cases := []struct {
		prefix, next string
		ok           bool
	}{
		{"", "get", true},
		{"", "get_w", true},
		{"", "search", true},
		{"", `search">`, true},
		{"", "search\">\n</", true}, // search has no parameters: the call may close
		{"", `get_weather">` + "\n<", true},
		{"", "gett", false},
		{"", "x", false},
		{"", `"`, false},
		{"", " get", false},
		{"get_", "time", true},
		{"get_", "w", true},
		{"get_", "weathe", true},
		{"get_", "weatherx", false},
		{"get_", `time"`, true},
		{"get_", `time" `, false},
		{"get_", "search", false},
		{"search", `">` + "\n" + `<｜DSML｜parameter`, false}, // no parameters to name
		{"get_weather", "\">\n</", false},                   // city is required
		{"get_weather", "\">\n<｜DSML｜parameter name=\"c", true},
	}
	for _, c := range cases {
		st := newFState(f, names, acts, false)
		if !feedString(&st, forceOpen+c.prefix) {
			t.Fatalf("prefix %q rejected", c.prefix)
		}
		if got := feedString(&st, c.next); got != c.ok {
			t.Errorf("after %q, %q: allowed %v, want %v", c.prefix, c.next, got, c.ok)
		}
	}

	// The mask over the real vocabulary keeps exactly the tokens whose
	// bytes extend the name towards an offered name, single bytes
	// included.
	ts := tinyServer(t, 1024, nil)
	g := &gen{s: ts.Server, r: &request{force: f}}
	fc := newForcer(g)
	if !feedString(&fc.st, forceOpen+"get_") {
		t.Fatal("prefix rejected")
	}
	logits := make([]float32, ts.tok.VocabSize())
	fc.mask(logits)
	targets := []string{"weather\">\n", "time\">\n"}
	allowed := 0
	for id, l := range fc.masked {
		b := string(ts.tok.TokenText(id))
		got := !math.IsInf(float64(l), -1)
		prefix := slices.ContainsFunc(targets, func(s string) bool { return strings.HasPrefix(s, b) })
		longer := slices.ContainsFunc(targets, func(s string) bool { return strings.HasPrefix(b, s) })
		switch {
		case got && !prefix && !longer, b == "" && got, id == ts.eos && got:
			t.Errorf("token %d %q allowed", id, b)
		case prefix && b != "" && id != ts.eos && !got:
			t.Errorf("token %d %q masked", id, b)
		}
		if got {
			allowed++
		}
	}
	for _, b := range []string{"w", "t"} {
		id, ok := ts.tok.Lookup(b)
		if !ok || math.IsInf(float64(fc.masked[id]), -1) {
			t.Errorf("single-byte token %q masked", b)
		}
	}
	if allowed < 2 {
		t.Errorf("%d tokens allowed", allowed)
	}
}

func TestForceJSONGrammar(t *testing.T) {
	f := forceFixture(t)
	names, acts := nameCands(f.tools)
	param := func(tool, name string) string {
		return tool + "\">\n" + dsml.ParameterOpen + ` name="` + name + `" string="false">`
	}
	cases := []struct {
		param, value string
		ok           bool
	}{
		{param("get_time", "v"), `{"a":[1,-2.5e3,true,null,"x\u00e9\n"],"b":{}}`, true},
		{param("get_time", "v"), `"a string"`, true},
		{param("get_time", "v"), `{"a" :1}`, false},
		{param("get_time", "v"), ` 1`, false},
		{param("get_time", "v"), `01`, false},
		{param("get_time", "v"), `1.` + paramClose, false},
		{param("get_time", "v"), `1.5` + paramClose, true},
		{param("get_time", "v"), `1234567890123456`, false},
		{param("get_time", "v"), `1e123`, false},
		{param("get_time", "v"), `"a` + paramClose, false},
		{param("get_time", "v"), `"a</｜DSML｜paramete"`, true},
		{param("get_time", "v"), `{"a":1,}`, false},
		{param("get_time", "v"), `[1 2]`, false},
		{param("get_time", "v"), `"\x"`, false},
		{param("get_time", "v"), "\"\t\"", false},
		{param("get_time", "v"), strings.Repeat("[", maxForceDepth) + strings.Repeat("]", maxForceDepth), true},
		{param("get_time", "v"), strings.Repeat("[", maxForceDepth+1), false},
		{param("get_weather", "days"), `12` + paramClose + "\n", true},
		{param("get_weather", "days"), `1.5`, false},
		{param("get_weather", "days"), `-0e1`, false},
		{param("get_weather", "days"), `"3"`, false},
		{param("get_time", "ok"), `true`, true},
		{param("get_time", "ok"), `null`, false},
		{param("get_time", "opts"), `[]`, false},
		{param("get_time", "xs"), `[{}]`, true},
	}
	for _, c := range cases {
		st := newFState(f, names, acts, false)
		if !feedString(&st, forceOpen+c.param) || st.ph != phJSON {
			t.Fatalf("%q rejected", c.param)
		}
		if got := feedString(&st, c.value); got != c.ok {
			t.Errorf("%s%s: allowed %v, want %v", c.param, c.value, got, c.ok)
		}
	}
}

// TestForceClosing walks the grammar at random and checks that the
// closing from every state is accepted and parses to one call of an
// offered tool with a JSON object of its parameters, typed as declared.
func TestForceClosing(t *testing.T) {
	f := forceFixture(t)
	names, acts := nameCands(f.tools)
	rng := rand.New(rand.NewPCG(1, 2))
	reached := map[uint8]int{}
	for walk := 0; walk < 3000; walk++ {
		thinking := walk%3 == 0
		st := newFState(f, names, acts, thinking)
		var text []byte
		steps := rng.IntN(200)
		for i := 0; i < steps && st.ph != phDone; i++ {
			if st.ph == phThink && rng.IntN(10) == 0 {
				text = append(text, prompt.ThinkClose...)
				feedString(&st, prompt.ThinkClose)
				continue
			}
			if lit := st.literal(); lit != "" {
				text = append(text, lit[0])
				st.feed(lit[0])
				continue
			}
			var ok []byte
			for b := 0; b < 256; b++ {
				if next := st; next.feed(byte(b)) {
					ok = append(ok, byte(b))
				}
			}
			if len(ok) == 0 {
				t.Fatalf("no byte allowed after %q", text)
			}
			b := ok[rng.IntN(len(ok))]
			text = append(text, b)
			st.feed(b)
		}
		reached[st.ph]++
		closing := appendClosing(nil, st)
		end := st
		end.closing = true
		if !feedString(&end, string(closing)) || end.ph != phDone {
			t.Fatalf("closing %q after %q not accepted", closing, text)
		}
		full := string(text) + string(closing)
		res, err := dsml.Parse(full, thinking)
		if err != nil || len(res.Calls) != 1 {
			t.Fatalf("%q: %v %+v", full, err, res)
		}
		c := res.Calls[0]
		i := slices.IndexFunc(f.tools, func(ft forceTool) bool { return ft.name == c.Name })
		if i < 0 {
			t.Fatalf("%q: tool %q", full, c.Name)
		}
		var args map[string]any
		if err := json.Unmarshal([]byte(c.CompactArguments()), &args); err != nil {
			t.Fatalf("%q: arguments %s: %v", full, c.CompactArguments(), err)
		}
		for k, v := range args {
			j := slices.IndexFunc(f.tools[i].params, func(p forceParam) bool { return p.name == k })
			if j < 0 {
				t.Fatalf("%q: argument %q not a parameter", full, k)
			}
			p := f.tools[i].params[j]
			ok := true
			switch p.kind {
			case 'i':
				n, isNum := v.(float64)
				ok = isNum && n == math.Trunc(n)
			case 'b':
				_, ok = v.(bool)
			case 'o':
				_, ok = v.(map[string]any)
			case 'a':
				_, ok = v.([]any)
			case 0:
				if !p.json {
					_, ok = v.(string)
				}
			}
			if !ok {
				t.Fatalf("%q: argument %q = %#v, want kind %q", full, k, v, p.kind)
			}
		}
	}
	t.Logf("final phases: %v", reached)
	for _, ph := range []uint8{phThink, phName, phParam, phRaw, phJSON} {
		if reached[ph] == 0 {
			t.Errorf("no walk ended in phase %d: %v", ph, reached)
		}
	}
}

// TestForceBudget checks that the bound of a closing is never below its
// token count.
func TestForceBudget(t *testing.T) {
	ts := tinyServer(t, 1024, nil)
	f := forceFixture(t)
	for _, thinking := range []bool{false, true} {
		g := &gen{s: ts.Server, r: &request{force: f}, thinking: thinking}
		fc := newForcer(g)
		for _, prefix := range []string{"", "ab</th", forceOpen, forceOpen + "get_", forceOpen + "get_weather\">\n<",
			forceOpen + "get_time\">\n" + dsml.ParameterOpen + ` name="opts" string="false">{"a":[1,"x`} {
			switch {
			case !thinking && prefix == "ab</th":
				continue
			case thinking && prefix != "" && prefix[0] == '\n':
				prefix = "</think>" + prefix
			}
			st := fc.st
			if !feedString(&st, prefix) {
				t.Fatalf("%q rejected", prefix)
			}
			closing := appendClosing(nil, st)
			n, bound := len(ts.tok.EncodeSpecial(string(closing))), fc.closingBound(st)
			if n > bound || bound > n+len(closing)/2 {
				t.Errorf("thinking=%v %q: closing %q has %d tokens, bound %d", thinking, prefix, closing, n, bound)
			}
		}
	}
}

// BenchmarkForceMask measures one grammar mask over the vocabulary in a
// string value, a JSON value and the parameter choice.
func BenchmarkForceMask(b *testing.B) {
	ts := tinyServer(b, 1024, nil)
	r := &request{api: apiChat, tools: []prompt.Tool{{Schema: `{"name":"f","parameters":{"properties":{"s":{"type":"string"},"j":{}}}}`}}}
	f, err := decodeToolChoice(r, json.RawMessage(`"required"`))
	if err != nil {
		b.Fatal(err)
	}
	logits := make([]float32, ts.tok.VocabSize())
	for _, c := range []struct{ name, text string }{
		{"string", "f\">\n" + dsml.ParameterOpen + ` name="s" string="true">abc`},
		{"json", "f\">\n" + dsml.ParameterOpen + ` name="j" string="false">{"a":[1,`},
		{"choice", "f\">\n"},
	} {
		b.Run(c.name, func(b *testing.B) {
			fc := newForcer(&gen{s: ts.Server, r: &request{force: f}})
			if !feedString(&fc.st, forceOpen+c.text) {
				b.Fatal("rejected")
			}
			for b.Loop() {
				fc.mask(logits)
			}
		})
	}
}
