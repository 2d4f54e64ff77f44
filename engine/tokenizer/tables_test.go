package tokenizer

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDeepSeekV4Tables(t *testing.T) {
	tab, err := DeepSeekV4()
	require.NoError(t, err)
	require.Len(t, tab.Tokens, 129280)
	require.Len(t, tab.Merges, 127741)
	require.Equal(t, BOS, tab.Tokens[0])
	require.Equal(t, EOS, tab.Tokens[1])
	require.Equal(t, User, tab.Tokens[128803])
	require.Equal(t, DSML, tab.Tokens[128825])
	require.Equal(t, "Ġ t", tab.Merges[0])

	bad := *tab
	bad.Special = append([]Special{{ID: 5, Content: "<think>"}}, tab.Special...)
	require.ErrorContains(t, bad.Validate(), "does not hold it")
	bad.Special = nil
	require.ErrorContains(t, bad.Validate(), "missing")
}
