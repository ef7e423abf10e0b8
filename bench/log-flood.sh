#!/usr/bin/env bash
# bench/log-flood.sh: what a log flood costs through prgate's capped log, against a plain file.
#
# Run it from anywhere:   bash bench/log-flood.sh            (BYTES=N to change the flood)
#
# What it does:
#   1. builds the example (cargo build --release -p prgate-runner --example log_flood);
#   2. runs it RUNS times (default 3) in each mode, alternating, in a temporary folder on the
#      same file system as the target directory (TMPDIR to choose another):
#        capped: a child printing BYTES (default 1 GiB) of 100-byte log lines
#                (`yes LINE | head -c BYTES`) through ChildGroup: a pipe, the log's pump, the
#                file keeps its first and last MiB (sandbox/src/process/capped_log.rs);
#        plain:  the same child with its output opened on the file itself;
#      each under /usr/bin/time -v;
#   3. prints, per mode, the median wall time, the log's size on disk, prgate's own peak RSS
#      (VmHWM of the example's process, without the child) and /usr/bin/time's maximum resident
#      set size (the largest of the example and the processes it waited for), the ratio of the
#      capped median to the plain one, and the machine's load average and cores.
set -euo pipefail

BYTES="${BYTES:-1073741824}"
RUNS="${RUNS:-3}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"

cargo build --quiet --release -p prgate-runner --example log_flood --manifest-path "$root/Cargo.toml"
example="$target/release/examples/log_flood"
work="$(mktemp -d "${TMPDIR:-$target}/log-flood.XXXXXX")"
trap 'rm -rf "$work"' EXIT

declare -A seconds rss hwm disk
for run in $(seq 1 "$RUNS"); do
  for mode in capped plain; do
    line="$(/usr/bin/time -v -o "$work/time.$mode" "$example" "$mode" "$BYTES" "$work")"
    echo "run $run: $line"
    seconds[$mode]+="$(sed -E 's/.* in ([0-9.]+) s;.*/\1/' <<<"$line") "
    disk[$mode]="$(sed -E 's/.*; log ([0-9]+) bytes on disk;.*/\1/' <<<"$line")"
    hwm[$mode]+="$(sed -E 's/.*peak RSS ([0-9]+) KiB.*/\1/' <<<"$line") "
    rss[$mode]+="$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$work/time.$mode") "
  done
done

median() { tr ' ' '\n' | grep . | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
max() { tr ' ' '\n' | grep . | sort -n | tail -1; }

echo
echo "| mode | bytes printed | median time (s) | log on disk (bytes) | prgate's peak RSS, VmHWM (max, KiB) | /usr/bin/time max RSS (max, KiB) |"
echo "|---|---:|---:|---:|---:|---:|"
for mode in capped plain; do
  echo "| $mode | $BYTES | $(median <<<"${seconds[$mode]}") | ${disk[$mode]} | $(max <<<"${hwm[$mode]}") | $(max <<<"${rss[$mode]}") |"
done
capped="$(median <<<"${seconds[capped]}")"
plain="$(median <<<"${seconds[plain]}")"
echo
echo "capped / plain time: $(awk -v c="$capped" -v p="$plain" 'BEGIN { printf "%.2f", c / p }')x"
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(uname -sr)"
