// Package plots draws the harness charts with gonum/plot: upstream's speed
// chart (context on x, prefill tokens/s on the left axis, generation
// tokens/s on the right) for one or several ds4-bench runs, and the KL
// divergence histogram and per-position chart of vector comparisons, the
// throughput and latency of a load run against its clients, as
// SVG or PNG. Fonts, sizes and colors are fixed so that the SVG output is
// byte-for-byte reproducible.
package plots
