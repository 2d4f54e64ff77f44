package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/harness"
	"github.com/ds4-go/ds4/internal/cli"
)

// redteamDoc describes the redteam subcommand in its help; %s is the list
// of cases.
const redteamDoc = `Replays the red team's attacks on a running ds4-server on this machine
(loopback only) and prints one row per case: the outcomes (HTTP status,
timeout, closed, sent), the 99th-percentile latency, the server's RSS
before and after (from /proc/PID/status with --pid) and the server-side
connections of its port before, at most during and after the case (from
/proc/net/tcp). Counts and times are bounded; the default run takes well
under a minute on the tiny model.

Cases (--case):
%s`

// runRedteam is the redteam subcommand.
func runRedteam(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := harness.DefaultRedTeamConfig()
	fs := pflag.NewFlagSet("ds4-bench redteam", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	fs.StringVar(&cfg.URL, "url", cfg.URL, "the server (a loopback address)")
	fs.StringVar(&cfg.APIKey, "api-key", "", "API key of the server, if it has one")
	fs.IntVar(&cfg.PID, "pid", 0, "the server's process id, for its RSS (0: not reported)")
	fs.StringSliceVar(&cfg.Cases, "case", nil, "run only these cases (repeatable or comma-separated)")
	fs.IntVar(&cfg.Count, "count", cfg.Count, "requests of each light case")
	fs.IntVar(&cfg.HeavyCount, "heavy-count", cfg.HeavyCount, "requests of the oversize-body, huge-prompt and tool-call-ids cases")
	fs.IntVar(&cfg.Storm, "storm", cfg.Storm, "connections of the disconnect storm")
	fs.IntVar(&cfg.Slow, "slow", cfg.Slow, "slow-body connections held at once")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "requests in flight at once within a case")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound on one request")
	fs.DurationVar(&cfg.SlowWait, "slow-wait", cfg.SlowWait, "how long a slow body waits for the server to answer or close")
	fs.DurationVar(&cfg.CaseTimeout, "case-timeout", cfg.CaseTimeout, "bound on one case")
	fs.IntVar(&cfg.OversizeBytes, "oversize-bytes", cfg.OversizeBytes, "body size of oversize-body (the server's --max-body-mb limit + 1)")
	fs.IntVar(&cfg.HugeBytes, "huge-bytes", cfg.HugeBytes, "prompt size of huge-prompt")
	fs.IntVar(&cfg.ToolItems, "tool-items", cfg.ToolItems, "function_call items (and as many outputs) sharing one call_id")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usage(fmt.Errorf("redteam: unexpected argument %q", fs.Arg(0)))
	}
	res, err := harness.RedTeam(ctx, cfg)
	if err != nil {
		return err
	}
	return harness.WriteRedTeamTable(stdout, res)
}

// wrapList joins names with commas in lines of at most width bytes, each
// indented by two spaces.
func wrapList(names []string, width int) string {
	var b, line strings.Builder
	for i, n := range names {
		if i < len(names)-1 {
			n += ","
		}
		if line.Len() > 0 && line.Len()+1+len(n) > width-2 {
			b.WriteString("  " + line.String() + "\n")
			line.Reset()
		}
		if line.Len() > 0 {
			line.WriteByte(' ')
		}
		line.WriteString(n)
	}
	b.WriteString("  " + line.String())
	return b.String()
}
