// Package steering is the home of directional activation steering: building
// directions and applying them at inference time.
package steering
