#!/usr/bin/env bash
# load-bench.sh: aggregate decode and prefill throughput of ds4-server's
# parallel slots against the number of concurrent clients.
#
#   scripts/load-bench.sh [-m SLICE.gguf] [-p SLOTS] [-r ROUNDS] [-o DIR]
#
# Starts ds4-server on SLICE (default: the 2-layer Flash slice, made with
# ds4-quant synth when missing) with --parallel SLOTS (default 8), then
# runs ds4-bench serve ROUNDS times (default 3) over N = 1, 2, 4, 8
# clients, two loads a round, interleaved: decode-heavy (one shared
# 64-token prompt, 128 greedy tokens, --model deepseek-chat so replies are
# not thought and temperature 0 is greedy) and prefill-heavy (a fresh
# 1,024-token prompt per request, 16 tokens). Results (Parquet, SVG, the
# tables) go to DIR (default load-bench.out); the medians of each level's
# aggregate tokens/s and inter-token latency are printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
model=ds4flash-2l.gguf slots=8 rounds=3 out=load-bench.out
while getopts m:p:r:o: o; do
	case $o in
	m) model=$OPTARG ;;
	p) slots=$OPTARG ;;
	r) rounds=$OPTARG ;;
	o) out=$OPTARG ;;
	*) exit 2 ;;
	esac
done
bin=$(mktemp -d)
go build -o "$bin/" ./cmd/ds4-server ./cmd/ds4-bench ./cmd/ds4-quant
if [ ! -f "$model" ]; then
	"$bin/ds4-quant" synth --preset flash --layers 2 -o "$model"
fi
mkdir -p "$out"
port=$((20000 + RANDOM % 10000))
"$bin/ds4-server" -m "$model" --parallel "$slots" --ctx 4096 --port "$port" --queue 64 >"$out/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$bin"' EXIT
url=http://127.0.0.1:$port
for _ in $(seq 600); do
	curl -fs "$url/v1/models" >/dev/null 2>&1 && break
	kill -0 $server 2>/dev/null || { cat "$out/server.log" >&2; exit 1; }
	sleep 1
done

run() { # run NAME ROUND ARGS...: one ds4-bench serve sweep
	local name=$1 r=$2
	shift 2
	"$bin/ds4-bench" serve --endpoint "$url" --model deepseek-chat --clients 1,2,4,8 --no-progress \
		--parquet "$out/parquet" --svg "$out/$name-$r.svg" --title "ds4-server --parallel $slots, $name" "$@" \
		| tee "$out/$name-$r.txt"
}
# One request first, so that no level pays for faulting in the weights.
"$bin/ds4-bench" serve --endpoint "$url" --model deepseek-chat --clients 1 --requests 1 --max-tokens 8 \
	--no-progress >/dev/null
for r in $(seq "$rounds"); do
	run decode "$r" --requests 2 --prompt-tokens 64 --max-tokens 128
	run prefill "$r" --requests 1 --prompt-tokens 1024 --fresh-prompts --max-tokens 16
done

# Medians over the rounds of each level's columns, by load.
for name in decode prefill; do
	echo "== $name: median over $rounds rounds"
	grep -h -m1 '^ *clients' "$out/$name-1.txt"
	cat "$out/$name"-*.txt | awk '$1 ~ /^[0-9]+$/ && NF > 4 { for (i = 2; i <= NF; i++) print $1, i, $i }' |
		sort -k1,1n -k2,2n -k3,3g |
		awk '{ k = $1 " " $2; v[k, ++n[k]] = $3; if (!(k in seen)) { seen[k] = 1; keys[++nk] = k } }
			END {
				for (j = 1; j <= nk; j++) {
					split(keys[j], f, " ")
					if (f[1] != c) { if (line != "") print line; c = f[1]; line = c }
					line = line "\t" v[keys[j], int((n[keys[j]] + 1) / 2)]
				}
				print line
			}'
	grep -h '^outputs:' "$out/$name"-*.txt
done
