package synth

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/engine/layout"
)

// TestPreset checks the presets, the layer override and the refused
// shapes.
func TestPreset(t *testing.T) {
	for _, c := range []struct {
		name         string
		layers       int
		wantLayers   int
		wantName     string
		wantErr      string
		wantCompress []int
	}{
		{name: "tiny", wantLayers: layout.Tiny().Layers, wantName: layout.Tiny().Name},
		{name: "flash", wantLayers: 43, wantName: layout.Flash().Name},
		{name: "flash", layers: 4, wantLayers: 4, wantName: "DeepSeek-V4-Flash-4L-slice"},
		{name: "tiny", layers: 3, wantLayers: 3, wantName: layout.Tiny().Name},
		{name: "huge", wantErr: `unknown preset "huge"`},
		{name: "tiny", layers: -1, wantErr: "-1 layers"},
	} {
		p, err := Preset(c.name, c.layers)
		if c.wantErr != "" {
			require.ErrorContains(t, err, c.wantErr, "%s %d", c.name, c.layers)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, c.wantLayers, p.Layers, "%s %d", c.name, c.layers)
		require.Len(t, p.CompressRatios, c.wantLayers)
		require.Equal(t, c.wantName, p.Name)
		require.NoError(t, p.Validate())
	}
}

// TestDimensionsAndBytes overrides every dimension with its own value,
// sets head-dim, and checks that TensorBytes is what Progress reports.
func TestDimensionsAndBytes(t *testing.T) {
	p, err := Preset("tiny", 2)
	require.NoError(t, err)
	names := map[string]bool{}
	for _, d := range Dimensions() {
		require.False(t, names[d.Name], d.Name)
		names[d.Name] = true
		before := p
		d.Set(&p, *d.Field(&p))
		require.Equal(t, before, p, d.Name)
	}
	for _, d := range Dimensions() {
		if d.Name == "head-dim" {
			d.Set(&p, 96)
		}
	}
	require.Equal(t, 96, p.HeadDim)
	require.Equal(t, 96, p.ValueDim)

	p, err = Preset("tiny", 2)
	require.NoError(t, err)
	r, err := layout.ParseRecipe("q2")
	require.NoError(t, err)
	var done int64
	opt := Options{Params: p, Recipe: r, Seed: 1, Progress: func(n int64) { done += n }}
	_, err = Write(new(bytes.Buffer), opt)
	require.NoError(t, err)
	require.Equal(t, TensorBytes(opt), done)
}
