package cli

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"
)

// Kind is what this build does with a flag of upstream ds4 that it does not
// implement.
type Kind int

const (
	// Accepted flags ask for what this build does anyway (--cpu).
	Accepted Kind = iota
	// Ignored flags have no meaning here and are accepted with a notice.
	Ignored
	// Refused flags ask for a feature this build lacks: without it the
	// results would differ or the feature would silently be missing, so
	// the command line is rejected.
	Refused
)

// Upstream is a flag of upstream ds4 that this build accepts without
// effect or refuses, so that command lines written for upstream never fail
// with "unknown flag".
type Upstream struct {
	Name string // long name, without dashes
	Arg  string // the value's placeholder (N, FILE); "" for a boolean flag
	Kind Kind
	// Allow, for a Refused flag with a value, is the one value accepted
	// without a word (--backend cpu).
	Allow string
	// Why says what the flag does upstream and why this build ignores or
	// lacks it.
	Why string
}

// Backends are upstream's backend flags: this build has only the CPU
// backend.
func Backends() []Upstream {
	return []Upstream{
		{Name: "cpu", Kind: Accepted, Why: "the CPU backend, the only one in this build"},
		{Name: "metal", Kind: Refused, Why: "the Metal backend is not in this build (it has only the CPU backend)"},
		{Name: "cuda", Kind: Refused, Why: "the CUDA backend is not in this build (it has only the CPU backend)"},
		{Name: "backend", Arg: "NAME", Kind: Refused, Allow: "cpu", Why: "not in this build: the only backend is cpu"},
	}
}

// Tuning are upstream's performance and memory flags, which leave the
// results unchanged and have no meaning on this build's CPU backend.
// --ssd-streaming and --ssd-streaming-cache-experts are real flags here
// (AddStreaming); the rest of upstream's SSD streaming flags are not.
func Tuning() []Upstream {
	const ssd = "ignored: this build's --ssd-streaming has no hot-expert preload and no simulated memory pressure"
	return []Upstream{
		{Name: "quality", Kind: Ignored, Why: "ignored: the CPU kernels are always the exact ones"},
		{Name: "power", Arg: "N", Kind: Ignored, Why: "ignored: it sets upstream's GPU duty cycle, and this build runs on the CPU at full speed"},
		{Name: "ssd-streaming-cold", Kind: Ignored, Why: ssd},
		{Name: "ssd-streaming-preload-experts", Arg: "N", Kind: Ignored, Why: ssd},
		{Name: "simulate-used-memory", Arg: "SIZE", Kind: Ignored, Why: ssd},
		{Name: "prefill-chunk", Arg: "N", Kind: Ignored, Why: "ignored: the CPU backend sizes its own prefill chunks"},
	}
}

// MTP are upstream's multi-token-prediction flags: speculative decoding
// with a draft model, which this build lacks.
func MTP() []Upstream {
	const why = "not in this build: MTP speculative decoding is not implemented"
	return []Upstream{
		{Name: "mtp", Arg: "FILE", Kind: Refused, Why: why},
		{Name: "mtp-draft", Arg: "N", Kind: Refused, Why: why},
		{Name: "mtp-margin", Arg: "F", Kind: Refused, Why: why},
	}
}

// AddUpstream registers flags on fs as hidden flags.
func AddUpstream(fs *pflag.FlagSet, flags ...[]Upstream) {
	for _, group := range flags {
		for _, u := range group {
			if u.Arg == "" {
				fs.Bool(u.Name, false, u.Why)
			} else {
				fs.String(u.Name, "", u.Why)
			}
			fs.MarkHidden(u.Name)
		}
	}
}

// CheckUpstream returns an error for the first refused flag of flags given
// on fs's command line, and otherwise writes to w, prefixed with prog, a
// one-line notice for each ignored flag given.
func CheckUpstream(fs *pflag.FlagSet, w io.Writer, prog string, flags ...[]Upstream) error {
	for _, group := range flags {
		for _, u := range group {
			if !fs.Changed(u.Name) {
				continue
			}
			if u.Kind == Refused && (u.Allow == "" || fs.Lookup(u.Name).Value.String() != u.Allow) {
				return upstreamError(fs, u)
			}
		}
	}
	for _, group := range flags {
		for _, u := range group {
			if fs.Changed(u.Name) && u.Kind == Ignored {
				fmt.Fprintf(w, "%s: %s\n", prog, upstreamError(fs, u))
			}
		}
	}
	return nil
}

// upstreamError names u with its value and says why.
func upstreamError(fs *pflag.FlagSet, u Upstream) error {
	if u.Arg == "" {
		return fmt.Errorf("--%s: %s", u.Name, u.Why)
	}
	return FlagError(fs, u.Name, "%s", u.Why)
}
