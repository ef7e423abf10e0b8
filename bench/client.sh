#!/usr/bin/env bash
# The built-in speed client (`prgate bench`) against the simulated server (`prgate sim-server`)
# with a known time per output token: how close the measured median TPOT comes to it, at a few
# concurrencies. Run: bash bench/client.sh   (TPOT_MS, OUTPUT_LEN and REQUESTS can be set).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --bin prgate >/dev/null 2>&1
prgate=target/release/prgate
TPOT_MS="${TPOT_MS:-20}"
OUTPUT_LEN="${OUTPUT_LEN:-128}"
REQUESTS="${REQUESTS:-32}"
work="$(mktemp -d)"
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
"$prgate" sim-server --tpot-ms "$TPOT_MS" --ttft-ms 50 --address-file "$work/address" --log-file "$work/log" >/dev/null &
server=$!
for _ in $(seq 100); do [[ -s "$work/address" ]] && break; sleep 0.1; done
url="$(cat "$work/address")"
echo "| concurrency | requests | failed | server TPOT ms | measured median TPOT ms | error | client peak RSS MB | client CPU |"
echo "|---|---|---|---|---|---|---|---|"
for concurrency in ${CONCURRENCIES:-1 8 64 512}; do
    # The client's own resources, by the kernel's accounting (GNU time: max RSS in KB, CPU %).
    python3 - "$prgate" "$work/usage" "$work/result.json" bench --url "$url" --input-len 64 \
        --output-len "$OUTPUT_LEN" --concurrency "$concurrency" \
        --requests "$((REQUESTS > concurrency ? REQUESTS : concurrency))" --warmup 2 <<'PY'
import resource, subprocess, sys, time
prgate, usage, out, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
start = time.monotonic()
with open(out, "w") as f:
    subprocess.run([prgate, *args], stdout=f, check=True)
wall = time.monotonic() - start
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
open(usage, "w").write(f"{ru.ru_maxrss / 1024:.1f} {100 * (ru.ru_utime + ru.ru_stime) / wall:.0f}%")
PY
    python3 - "$work/result.json" "$TPOT_MS" "$concurrency" "$(cat "$work/usage")" <<'PY'
import json, sys
result = json.load(open(sys.argv[1]))
expected = float(sys.argv[2])
measured = result["median_tpot_ms"]
rss, cpu = sys.argv[4].split()
print(f"| {sys.argv[3]} | {result['completed']} | {result['failed']} | {expected:.1f} | {measured:.2f} | {100 * (measured - expected) / expected:+.2f}% | {rss} | {cpu} |")
PY
done
