package harness

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/convert/checkpoint"
	"github.com/ds4-go/ds4/engine/tokenizer"
)

func TestParseStudyRecipes(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  []checkpoint.Mode
		err   string
	}{
		{nil, nil, ""},
		{[]string{"q2", "q4"}, []checkpoint.Mode{checkpoint.ModeQ2, checkpoint.ModeQ4}, ""},
		{[]string{"q4", "lossless"}, nil, "--recipes lossless: the lossless conversion is always measured"},
		{[]string{"f32"}, nil, "--recipes f32: the lossless conversion is always measured"},
		{[]string{"q3"}, nil, `unknown mode "q3"`},
	} {
		t.Run(strings.Join(tc.names, ","), func(t *testing.T) {
			got, err := ParseStudyRecipes(tc.names)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestSplitHoldout(t *testing.T) {
	tok, err := tokenizer.Default()
	require.NoError(t, err)
	var prompts []PromptCase
	for _, s := range []string{"zero", "one", "two", "three", "four"} {
		prompts = append(prompts, PromptCase{ID: s, Prompt: s})
	}
	enc := func(idx ...int) [][]int {
		var out [][]int
		for _, i := range idx {
			out = append(out, EncodeChat(tok, "", prompts[i].Prompt))
		}
		return out
	}
	for _, tc := range []struct {
		name           string
		holdout        int
		calib, heldout [][]int
	}{
		{"none held out", 0, enc(0, 1, 2, 3, 4), nil},
		{"every second", 2, enc(0, 2, 4), enc(1, 3)},
		{"every third", 3, enc(0, 1, 3, 4), enc(2)},
		{"more than there are", 9, enc(0, 1, 2, 3, 4), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calib, heldout := SplitHoldout(tok, prompts, tc.holdout)
			require.Equal(t, tc.calib, calib)
			require.Equal(t, tc.heldout, heldout)
		})
	}
}
