package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/harness"
	"github.com/ds4-go/ds4/vectors"
)

const vecFile = "../../vectors/testdata/official/official.vec"

// fakeServer answers chat completions with each case's official tokens
// (and one wrong token for short_code_completion's step 2).
func fakeServer(t *testing.T) *httptest.Server {
	cases, err := vectors.ReadVecFile(vecFile)
	require.NoError(t, err)
	byPrompt := map[string]vectors.VecCase{}
	for _, c := range cases {
		p, err := vectors.ResolvePrompt(filepath.Dir(vecFile), c.PromptPath)
		require.NoError(t, err)
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		byPrompt[string(b)] = c
	}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) != 1 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		c := byPrompt[req.Messages[0].Content]
		var content []map[string]any
		for i, s := range c.Steps {
			tok := string(s.Selected)
			if c.ID == "short_code_completion" && i == 2 {
				tok = "oops"
			}
			alt := []map[string]any{{"token": tok, "logprob": -0.5}, {"token": "zz", "logprob": -2.5}}
			content = append(content, map[string]any{"token": tok, "logprob": -0.5, "top_logprobs": alt})
		}
		json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"logprobs": map[string]any{"content": content}}}})
	}))
}

func TestOfficialEndpoint(t *testing.T) {
	srv := fakeServer(t)
	defer srv.Close()
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	code := run([]string{"official", "--vec", vecFile, "--endpoint", srv.URL, "--dump", filepath.Join(dir, "dump"), "--parquet", dir}, &out, &errOut)
	require.Equal(t, 1, code, errOut.String())
	require.Contains(t, out.String(), "ds4-vectors: 3 passed, 1 failed, 1 skipped")
	require.Contains(t, out.String(), "selected token mismatch")
	require.Contains(t, out.String(), "skipped: API/official graph mismatch")
	files, err := filepath.Glob(filepath.Join(dir, "vectors", "model=deepseek-v4-flash", "date=*", "*.parquet"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	recs, err := harness.ReadRows[OfficialRecord](files[0])
	require.NoError(t, err)
	require.Len(t, recs, 4+4+1+1+4)
	require.Equal(t, "short_italian_fact", recs[0].CaseID)
	require.Equal(t, "Ada", recs[0].LocalText)
	require.Equal(t, "416461", recs[0].OfficialHex)
	require.True(t, recs[0].Match)
	require.Equal(t, srv.URL, recs[0].Source)

	// A saved run compared with itself, and with a perturbed copy.
	dump := filepath.Join(dir, "dump")
	out.Reset()
	require.Equal(t, 0, run([]string{"compare", dump, dump}, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), "short_italian_fact")
	require.Contains(t, out.String(), "100.0%")
	d, err := vectors.ReadDump(filepath.Join(dump, "long_code_audit.json"))
	require.NoError(t, err)
	d.Steps[1].TopLogprobs[0].Logprob = -3
	other := filepath.Join(dir, "other.json")
	require.NoError(t, vectors.WriteDump(other, d))
	out.Reset()
	require.Equal(t, 0, run([]string{"compare", filepath.Join(dump, "long_code_audit.json"), other,
		"--hist", filepath.Join(dir, "h.svg"), "--positions", filepath.Join(dir, "p.png"), "--parquet", dir}, &out, &errOut), errOut.String())
	require.FileExists(t, filepath.Join(dir, "h.svg"))
	require.FileExists(t, filepath.Join(dir, "p.png"))
	files, err = filepath.Glob(filepath.Join(dir, "compare", "*", "*", "*.parquet"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	crecs, err := harness.ReadRows[CompareRecord](files[0])
	require.NoError(t, err)
	require.Len(t, crecs, 4)
	require.Zero(t, crecs[0].KL)
	require.Greater(t, crecs[1].KL, 0.0)
}

func TestOfficialNoModel(t *testing.T) {
	t.Setenv("DS4_MODEL", "")
	var out, errOut bytes.Buffer
	require.Equal(t, 2, run([]string{"official", "--vec", vecFile}, &out, &errOut))
	require.Contains(t, errOut.String(), "DS4_MODEL")
	errOut.Reset()
	require.Equal(t, 2, run([]string{"official", "--vec", vecFile, "--tiny", "--only", "nope"}, &out, &errOut))
	require.Contains(t, errOut.String(), "--only nope: no such case")
}

// TestOfficialTinyAndRawCompare runs one case on the tiny model (which
// fails it), saving its logits, and compares the raw logits with
// themselves.
func TestOfficialTinyAndRawCompare(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	code := run([]string{"official", "--vec", vecFile, "--tiny", "-t", "2", "--only", "short_reasoning_plain", "--save-logits", dir}, &out, &errOut)
	require.Equal(t, 1, code, errOut.String())
	require.Contains(t, out.String(), "0 passed, 1 failed, 0 skipped")
	f32 := filepath.Join(dir, "short_reasoning_plain.f32")
	st, err := os.Stat(f32)
	require.NoError(t, err)
	require.Equal(t, int64(4*129280), st.Size())
	out.Reset()
	require.Equal(t, 0, run([]string{"compare", "--vocab", "129280", f32, f32}, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), "100.0%")
	require.Equal(t, 2, run([]string{"compare", f32, f32}, &out, &errOut))
	require.Contains(t, errOut.String(), "--vocab")
}
