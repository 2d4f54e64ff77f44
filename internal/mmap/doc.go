// Package mmap maps model files read-only into memory, falling back to
// reading them where the platform has no memory mapping, or reads them
// into huge-page-backed memory of their own.
package mmap
