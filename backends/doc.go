// Package backends is the home of the engine's compute backends: the
// operation interface and its implementations (backends/cpu first) arrive
// with the forward pass.
package backends
