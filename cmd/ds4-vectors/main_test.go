package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

const caseDir = "../../vectors/testdata/oracle/tiny_w16_r16"

func TestOracleCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"oracle", caseDir}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	require.Contains(t, out.String(), "tiny_w16_r16")
	require.Contains(t, out.String(), "decode")
	require.Contains(t, out.String(), "ok")

	// A reference the engine cannot match (rows shifted by one position)
	// misses the bar and fails the command.
	bad := t.TempDir()
	entries, err := os.ReadDir(caseDir)
	require.NoError(t, err)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(caseDir, e.Name()))
		require.NoError(t, err)
		if e.Name() == "f32ref_prefill_logits.bin" {
			row := 4 * 512
			data = append(data[row:], data[:row]...)
		}
		require.NoError(t, os.WriteFile(filepath.Join(bad, e.Name()), data, 0o644))
	}
	out.Reset()
	errOut.Reset()
	require.Equal(t, 1, run([]string{"oracle", bad}, &out, &errOut))
	require.Contains(t, out.String(), "MISSED")
	require.Contains(t, errOut.String(), "bar A missed")

	require.Equal(t, 1, run([]string{"oracle", t.TempDir()}, &out, &errOut))
	require.Equal(t, 2, run([]string{"oracle", "--mode", "q3", caseDir}, &out, &errOut))
	require.Equal(t, 2, run(nil, &out, &errOut))
}
