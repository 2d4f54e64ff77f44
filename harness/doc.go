// Package harness is the home of the benchmark, evaluation, imatrix and
// quality-scoring runners and their Parquet results.
package harness
