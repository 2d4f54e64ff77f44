package harness

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// LoadSetup describes the load of a run, in every row of its tables.
type LoadSetup struct {
	Endpoint           string `parquet:"endpoint"`
	ModelID            string `parquet:"model_id"` // as sent in the requests
	RequestsPerClient  int64  `parquet:"requests_per_client"`
	MaxTokens          int64  `parquet:"max_tokens"`
	PromptFile         string `parquet:"prompt_file"`          // "" for the built-in text
	PromptTargetTokens int64  `parquet:"prompt_target_tokens"` // DS4 tokens of text per prompt (0: the whole text)
	FreshPrompts       bool   `parquet:"fresh_prompts"`
}

// LoadLevelRecord is one row of a load run's load table: the run, the
// load and one concurrency level.
type LoadLevelRecord struct {
	RunMeta
	LoadSetup
	LoadLevel
}

// LoadRequestRecord is one row of a load run's load_requests table: the
// run, the load and one request.
type LoadRequestRecord struct {
	RunMeta
	LoadSetup
	LoadRequest
}

// Tables of load runs under a results root.
const (
	LoadTable         = "load"
	LoadRequestsTable = "load_requests"
)

// WriteLoadRun writes a load run as two Parquet files under root, its
// levels in the load table and its requests in the load_requests table,
// and returns their paths.
func WriteLoadRun(root string, meta RunMeta, setup LoadSetup, levels []LoadLevel, reqs []LoadRequest) ([]string, error) {
	lr := make([]LoadLevelRecord, len(levels))
	for i, l := range levels {
		lr[i] = LoadLevelRecord{RunMeta: meta, LoadSetup: setup, LoadLevel: l}
	}
	rr := make([]LoadRequestRecord, len(reqs))
	for i, q := range reqs {
		rr[i] = LoadRequestRecord{RunMeta: meta, LoadSetup: setup, LoadRequest: q}
	}
	p1, err := WriteRun(root, LoadTable, meta, lr)
	if err != nil {
		return nil, err
	}
	p2, err := WriteRun(root, LoadRequestsTable, meta, rr)
	if err != nil {
		return nil, err
	}
	return []string{p1, p2}, nil
}

// WriteLoadTable writes one line per level: clients, requests, errors,
// tokens, wall time, aggregate decode tokens/s, its ratio to the first
// level's, requests/s and the latency percentiles in milliseconds.
func WriteLoadTable(w io.Writer, levels []LoadLevel) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "clients\trequests\terrors\ttokens\twall_s\ttok/s\tx\tprompt_tok/s\treq/s\tttft_p50\tttft_p99\titl_p50\titl_p99\t")
	for _, l := range levels {
		ratio := 0.0
		if base := levels[0].DecodeTPS; base > 0 {
			ratio = l.DecodeTPS / base
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.1f\t%.2f\t%.1f\t%.1f\t%.1f\t%.1f\t\n",
			l.Clients, l.Requests, l.Errors, l.CompletionTokens, l.WallS, l.DecodeTPS, ratio, l.PrefillTPS, l.RequestsPerS,
			l.TTFTP50MS, l.TTFTP99MS, l.ITLP50MS, l.ITLP99MS)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("harness: %w", err)
	}
	return nil
}
