// Package mmap maps model files read-only into memory, falling back to
// reading them where the platform has no memory mapping.
package mmap
