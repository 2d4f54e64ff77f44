package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/gguf"
	"github.com/ds4-go/ds4/internal/cli"
)

func runInspect(args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("inspect", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	quiet := fs.BoolP("quiet", "q", false, "print only the summary and the layout check")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return cli.Usage(fmt.Errorf("need exactly one GGUF file"))
	}
	if st, err := os.Stat(fs.Arg(0)); err != nil {
		return cli.Usage(fmt.Errorf("%s: no such file", fs.Arg(0)))
	} else if st.IsDir() {
		return cli.Usage(fmt.Errorf("%s: is a directory, not a GGUF file", fs.Arg(0)))
	}
	f, err := gguf.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()

	fmt.Fprintf(stdout, "file: %s\nGGUF v%d, %d bytes, %d metadata entries, %d tensors, alignment %d, data at %d\n",
		fs.Arg(0), f.Version, f.Size(), len(f.KV), len(f.Tensors), f.Alignment, f.DataOffset)
	if !*quiet {
		fmt.Fprintln(stdout, "\nmetadata:")
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		for _, kv := range f.KV {
			typ := kv.Value.Type().String()
			if a, ok := kv.Value.Array(); ok {
				typ = "ARRAY[" + a.Elem.String() + "]"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", kv.Key, typ, kv.Value)
		}
		tw.Flush()
		fmt.Fprintln(stdout, "\ntensors:")
		tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "  name\ttype\tshape\tbytes\t")
		for _, t := range f.Tensors {
			fmt.Fprintf(tw, "  %s\t%v\t%s\t%d\t\n", t.Name, t.Type, shape(t.Dims), t.Size)
		}
		tw.Flush()
	}
	var total uint64
	for _, t := range f.Tensors {
		total += t.Size
	}
	fmt.Fprintf(stdout, "\ntensor bytes: %d (%.2f GiB)\n", total, float64(total)/(1<<30))

	rep := layout.Check(f)
	p := rep.Params
	fmt.Fprintln(stdout, "\nDS4 layout check:")
	if len(rep.Problems) == 0 || p.Layers > 0 {
		fmt.Fprintf(stdout, "  shape: %s\n  layers %d, embd %d, vocab %d, heads %d×%d, experts %d (top %d), window %d, ratios %v\n",
			shapeName(p), p.Layers, p.Embd, p.Vocab, p.Heads, p.HeadDim, p.Experts, p.ExpertsUsed, p.Window, p.CompressRatios)
	}
	if rep.Recipe.Name != "" {
		fmt.Fprintf(stdout, "  routed experts: %s (gate/up %v, down %v); published types: %v\n",
			rep.Recipe.Name, rep.Recipe.GateUp, rep.Recipe.Down, rep.Published)
	}
	for _, w := range rep.Warnings {
		fmt.Fprintf(stdout, "  warning: %s\n", w)
	}
	for _, e := range rep.Problems {
		fmt.Fprintf(stdout, "  problem: %v\n", e)
	}
	if err := rep.Err(); err != nil {
		return fmt.Errorf("%s: not a valid DS4 file (%d problems)", fs.Arg(0), len(rep.Problems))
	}
	fmt.Fprintln(stdout, "  ok")
	return nil
}

// shapeName names the released model p has the shape of, "flash" or
// "pro", with the layer count of a slice; for any other shape it lists the
// keys in which p differs from the nearest released model.
func shapeName(p layout.Params) string {
	if m, ok := p.Model(); ok {
		name := strings.ToLower(strings.TrimPrefix(m.Name, "DeepSeek-V4-"))
		if p.Layers != m.Layers {
			name += fmt.Sprintf(" slice (%d of %d layers)", p.Layers, m.Layers)
		}
		return name
	}
	var near layout.Params
	var diff []string
	for _, m := range layout.Released() {
		if d := p.Diff(m); near.Name == "" || len(d) < len(diff) {
			near, diff = m, d
		}
	}
	return fmt.Sprintf("custom (differs from %s in %d keys: %s)", near.Name, len(diff), strings.Join(diff, ", "))
}

func shape(dims []uint64) string {
	s := make([]string, len(dims))
	for i, d := range dims {
		s[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(s, ", ") + "]"
}
