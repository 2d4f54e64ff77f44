package main

import "github.com/ds4-go/ds4/internal/cli"

// upstreamFlags are upstream ds4's flags that this build accepts without
// effect or refuses (see internal/cli): the engine's, and those of the
// modes this build has elsewhere or not at all.
func upstreamFlags() [][]cli.Upstream {
	const diag = "not in this build: upstream's engine diagnostics are not implemented"
	return [][]cli.Upstream{cli.Backends(), cli.Tuning(), cli.MTP(), {
		{Name: "inspect", Kind: cli.Refused, Why: "not in this build: ds4-quant inspect MODEL prints the model's summary"},
		{Name: "dump-tokens", Kind: cli.Refused, Why: "not in this build: ds4 tokenize --special TEXT prints the tokens"},
		{Name: "dump-logits", Arg: "FILE", Kind: cli.Refused, Why: "not in this build: --dump-logprobs FILE writes the top-k logprobs"},
		{Name: "expert-profile", Arg: "FILE", Kind: cli.Refused, Why: "not in this build: expert routing profiles are not implemented"},
		{Name: "head-test", Kind: cli.Refused, Why: diag},
		{Name: "first-token-test", Kind: cli.Refused, Why: diag},
		{Name: "metal-graph-test", Kind: cli.Refused, Why: diag},
		{Name: "metal-graph-full-test", Kind: cli.Refused, Why: diag},
		{Name: "metal-graph-prompt-test", Kind: cli.Refused, Why: diag},
		{Name: "metal-graph-generate", Kind: cli.Refused, Why: "removed upstream, and not in this build"},
		{Name: "server", Kind: cli.Refused, Why: "use ds4-server for the HTTP server"},
	}}
}
