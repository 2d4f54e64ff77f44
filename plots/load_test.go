package plots

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// TestLoad draws a load run and checks the panels' labels, and that it
// refuses no levels and values that are not finite.
func TestLoad(t *testing.T) {
	pts := []LoadPoint{{1, 10, 100, 120}, {2, 18, 110, 150}, {4, 30, 130, 200}}
	for _, one := range [][]LoadPoint{pts, pts[:1]} {
		ch, err := Load(one, LoadOptions{Title: "tiny load"})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := ch.WriteSVG(&buf); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"tiny load", "aggregate tokens/s", "inter-token latency (ms)", "concurrent clients", "p50", "p99"} {
			if !strings.Contains(buf.String(), want) {
				t.Errorf("%d levels: the SVG lacks %q", len(one), want)
			}
		}
	}
	for _, bad := range [][]LoadPoint{nil, {{1, math.NaN(), 1, 1}}, {{1, 1, 1, math.Inf(1)}}} {
		if _, err := Load(bad, LoadOptions{}); err == nil {
			t.Errorf("Load(%v) gives no error", bad)
		}
	}
}
