package prompt

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/engine/tokenizer"
)

// TestOfficialCompletionBoundaries tokenizes each official completion (the
// concatenated bytes of the API's generated steps) and checks the token
// boundaries are exactly the API's per-step tokens.
func TestOfficialCompletionBoundaries(t *testing.T) {
	tok, err := tokenizer.Default()
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join("testdata", "official", "*.official.json"))
	require.NoError(t, err)
	require.Len(t, files, 5)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		// bytes is a JSON array of numbers.
		var generic struct {
			Steps []struct {
				Token struct {
					Bytes []int `json:"bytes"`
				} `json:"token"`
			} `json:"steps"`
		}
		require.NoError(t, json.Unmarshal(raw, &generic), f)
		require.NotEmpty(t, generic.Steps, f)
		var text []byte
		var want []string
		for _, s := range generic.Steps {
			b := make([]byte, len(s.Token.Bytes))
			for i, v := range s.Token.Bytes {
				b[i] = byte(v)
			}
			text = append(text, b...)
			want = append(want, string(b))
		}
		var got []string
		for _, id := range tok.Encode(string(text)) {
			got = append(got, string(tok.TokenBytes(id)))
		}
		require.Equal(t, want, got, filepath.Base(f))
	}
}
