#!/usr/bin/env bash
# ssd-bench.sh: decode and prefill speed of the 4-layer Flash slice under a
# memory cgroup limit, plain mapping against --ssd-streaming, interleaved.
# Needs root and the cgroup v1 memory controller.
#
#   scripts/ssd-bench.sh [-m SLICE.gguf] [-l LIMIT_BYTES] [-r ROUNDS] [-b READ_BYTES_PER_S] [-c CONFIGS]
#
# -c runs only the configurations named, comma-separated, of plain,
# ssd-default, ssd-1GiB and ssd-roofline (default: all four).
#
# -b throttles every run's reads from the model file's disk to that many
# bytes a second (the cgroup v1 blkio controller), to measure as on a
# slower disk: the disk probes of the roofline run are throttled alike.
#
# Each run starts with the page cache dropped, in a child cgroup whose
# limit is LIMIT (default 4 GiB), and measures a 64-token prompt and 64
# greedy tokens with ds4-bench (the ssd-roofline configuration: with
# ds4-bench roofline --ssd-streaming, which also gives the decode's
# fraction of the streaming speed of light). It prints one line per run and the median
# of each configuration.
set -euo pipefail
cd "$(dirname "$0")/.."
model=ds4flash-4l.gguf limit=$((4 << 30)) rounds=3 bps= only=
while getopts m:l:r:b:c: o; do
	case $o in
	b) bps=$OPTARG ;;
	c) only=$OPTARG ;;
	m) model=$OPTARG ;;
	l) limit=$OPTARG ;;
	r) rounds=$OPTARG ;;
	*) exit 2 ;;
	esac
done
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/" ./cmd/ds4-bench ./cmd/ds4-quant
if [ ! -f "$model" ]; then
	"$bin/ds4-quant" synth --preset flash --layers 4 -o "$model"
fi

# The memory cgroup of this shell, and a child of it for the runs.
parent=/sys/fs/cgroup/memory$(awk -F: '$2 == "memory" { print $3 }' /proc/self/cgroup)
[ -d "$parent" ] || { echo "ssd-bench: no cgroup v1 memory controller at $parent" >&2; exit 1; }
cg=$parent/ds4-ssd-bench
mkdir -p "$cg"

# With -b, a blkio cgroup throttles the reads of the disk under the model
# file (the whole disk, where the file lies on a partition).
blk=
if [ -n "$bps" ]; then
	blk=/sys/fs/cgroup/blkio/ds4-ssd-bench
	[ -d /sys/fs/cgroup/blkio ] || { echo "ssd-bench: no cgroup v1 blkio controller" >&2; exit 1; }
	dev=$(basename "$(df --output=source "$model" | tail -1)")
	if [ -f "/sys/class/block/$dev/partition" ]; then
		dev=$(basename "$(readlink -f "/sys/class/block/$dev/..")")
	fi
	mkdir -p "$blk"
	echo "$(cat "/sys/class/block/$dev/dev") $bps" > "$blk/blkio.throttle.read_bps_device"
	echo "reads of /dev/$dev throttled to $bps bytes/s"
fi

configs=("plain" "ssd-default" "ssd-1GiB" "ssd-roofline")
if [ -n "$only" ]; then
	IFS=, read -ra configs <<<"$only"
	for c in "${configs[@]}"; do
		case $c in
		plain | ssd-default | ssd-1GiB | ssd-roofline) ;;
		*) echo "ssd-bench: -c: unknown configuration $c" >&2; exit 2 ;;
		esac
	done
fi
args_of() {
	case $1 in
	plain) ;;
	ssd-default) echo --ssd-streaming ;;
	ssd-1GiB) echo --ssd-streaming --ssd-streaming-cache-experts 1GiB ;;
	esac
}
prompt=engine/tokenizer/testdata/promessi_sposi_excerpt.txt
results=$(mktemp)
for r in $(seq "$rounds"); do
	for c in "${configs[@]}"; do
		sync
		echo 1 > /proc/sys/vm/drop_caches
		echo "$limit" > "$cg/memory.limit_in_bytes"
		echo 0 > "$cg/memory.max_usage_in_bytes"
		kills0=$(awk '$1 == "oom_kill" { print $2 }' "$cg/memory.oom_control")
		cmd="$bin/ds4-bench -m $model --prompt-file $prompt --ctx-start 64 --ctx-max 64 -n 64 --no-progress --hash none $(args_of "$c")"
		if [ "$c" = ssd-roofline ]; then
			# The streaming speed of light: the disk probed before and
			# after the run, the fraction of it on the decode line.
			cmd="$bin/ds4-bench roofline -m $model --ssd-streaming --rounds 0 --prefill-rounds 0 --disk-mb 512 --prefill 64 --decode 64 --no-progress"
		fi
		join="echo \$\$ > $cg/cgroup.procs"
		[ -z "$blk" ] || join="$join; echo \$\$ > $blk/cgroup.procs"
		out=$(bash -c "$join; exec /usr/bin/time -f 'maxrss_kb=%M' $cmd" 2>&1) || {
			echo "ssd-bench: $c failed:"; echo "$out"; exit 1; } >&2
		kills=$(( $(awk '$1 == "oom_kill" { print $2 }' "$cg/memory.oom_control") - kills0 ))
		if [ "$c" = ssd-roofline ]; then
			prefill=$(echo "$out" | sed -n 's/^prefill: *\([0-9.]*\) tok\/s.*/\1/p')
			gen=$(echo "$out" | sed -n 's/^decode: *\([0-9.]*\) tok\/s.*/\1/p')
			ssd="ssd_fraction=$(echo "$out" | sed -n 's/^decode:.* \([0-9.]*\) of the ssd streaming limit.*/\1/p') $(echo "$out" | grep -m1 'ssd streaming limit:')"
			ssd="$ssd disk_busy=$(echo "$out" | sed -n 's/.*kept the disk busy \([0-9.]*\) of the time, at \([0-9.]*\) GB.*/\1 read_gbs=\2/p')"
		else
			row=$(echo "$out" | grep -E '^64,64,')
			prefill=$(echo "$row" | cut -d, -f3) gen=$(echo "$row" | cut -d, -f5)
			ssd=$(echo "$out" | sed -n 's/^ds4-bench: ctx [0-9]*: \(ssd hit rate.*\)/\1/p')
		fi
		rss=$(echo "$out" | sed -n 's/.*maxrss_kb=\([0-9]*\).*/\1/p')
		printf '%s round=%d prefill_tps=%s gen_tps=%s peak_rss_mib=%d cgroup_peak_mib=%d oom_kills=%d %s\n' \
			"$c" "$r" "$prefill" "$gen" $((rss / 1024)) $(( $(cat "$cg/memory.max_usage_in_bytes") >> 20 )) "$kills" "$ssd" | tee -a "$results"
	done
done
echo "medians over $rounds rounds (limit $((limit >> 20)) MiB):"
for c in "${configs[@]}"; do
	for k in prefill_tps gen_tps ssd_fraction disk_busy read_gbs; do
		grep "^$c " "$results" | sed -n "s/.* $k=\([0-9.]*\).*/\1/p" | sort -g | awk -v c="$c" -v k="$k" '{ v[NR] = $1 } END { if (NR == 0) exit; m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%s %s %.2f\n", c, k, m }'
	done
done
rm -f "$results"
rmdir "$cg" 2>/dev/null || true
[ -z "$blk" ] || rmdir "$blk" 2>/dev/null || true
