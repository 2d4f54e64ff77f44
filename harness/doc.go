// Package harness runs the measurement side of ds4-go: the ds4-bench
// frontier sweep (docs/formats/harness.md#bench-sweep) with its upstream CSV, the run
// metadata every result carries, and Parquet results laid out as one file
// per run in hive-style partitioned directories. RedTeam replays the
// server red-team's attacks against a local ds4-server and reports how it
// held up. Load drives any OpenAI-compatible chat completions endpoint
// with concurrent streaming clients and measures aggregate throughput,
// time to first token and inter-token latency per concurrency level.
package harness
