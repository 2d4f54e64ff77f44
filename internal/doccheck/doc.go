// Package doccheck holds the test that keeps the documents under docs/ and
// the code that cites them in step: every docs/ link in a Go comment, and
// every relative link between the documents, must name an existing file
// and heading.
package doccheck
