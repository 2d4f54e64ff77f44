package vectors

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/server/servertest"
)

// TestEndpointOwnServer runs the endpoint client against our own server:
// it must return logprobs with the requested top-20 alternatives.
func TestEndpointOwnServer(t *testing.T) {
	cases, err := ReadVecFile(filepath.Join(officialDir, "official.vec"))
	require.NoError(t, err)
	var c VecCase
	for _, vc := range cases {
		if vc.ID == "short_italian_fact" {
			c = vc
		}
	}
	require.NotEmpty(t, c.ID)
	ep := &Endpoint{URL: servertest.StartTiny(t, nil), Model: "deepseek-v4-flash"}
	steps, err := ep.Continue(context.Background(), c, mustPrompt(t, c), 3, 20)
	require.NoError(t, err)
	require.NotEmpty(t, steps)
	require.LessOrEqual(t, len(steps), 3)
	t.Logf("%d steps, first %q", len(steps), steps[0].Selected.Bytes)
	for i, st := range steps {
		require.Len(t, st.Top, 20, "step %d", i)
		// Greedy: the selected token is the most probable one.
		require.Equal(t, st.Top[0], st.Selected, "step %d", i)
		for j := 1; j < len(st.Top); j++ {
			require.LessOrEqual(t, st.Top[j].Logprob, st.Top[j-1].Logprob, "step %d", i)
		}
	}
}
