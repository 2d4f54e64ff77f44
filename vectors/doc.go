// Package vectors is the home of the logit and logprob vector fixtures and
// of the comparisons of engine outputs against them.
package vectors
