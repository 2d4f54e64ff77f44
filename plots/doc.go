// Package plots is the home of the SVG and PNG charts drawn from harness
// results.
package plots
