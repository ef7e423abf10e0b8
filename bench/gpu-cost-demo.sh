#!/usr/bin/env bash
# The estimate against the run on a demo's output (bench/gpu-cost.md, "Checked against a demo
# run"): for every sample PR branch `pr/N-*` with an event stream, `prgate plan --estimate
# --history` on that PR's own events, against the GPU time its run measured
# (results/pr-N/gpu-time/<model>.json, all phases), one line per model.
#
#   bench/gpu-cost-demo.sh DEMO_DIR [PRGATE]
#
# DEMO_DIR is a `prgate demo --out DIR`; PRGATE the binary (default `prgate` on the PATH).
set -euo pipefail
demo=$1
prgate=${2:-prgate}
cd "$demo"
for branch in $(git -C repository branch --format='%(refname:short)' | grep '^pr/'); do
    n=${branch#pr/}
    n=${n%%-*}
    dir=results/pr-$n
    [[ -f $dir/events.jsonl ]] || continue
    # A run that took steps over from an earlier one (PR #126's second, which ran only the
    # failed suite again) is not a whole job: the estimate is of one.
    ! grep -q '"step-skipped"' "$dir/events.jsonl" || continue
    "$prgate" plan --repo repository --base main --head "$branch" --estimate \
        --history "$dir/events.jsonl" --node node.toml --format json 2>/dev/null |
        python3 -c '
import json, sys
for job in json.load(sys.stdin)["estimate"]["jobs"]:
    if job.get("model") and job["model"] != "(common)":
        print(job["model"], job["seconds"])' |
        while read -r model seconds; do
            file=$dir/gpu-time/$model.json
            [[ -f $file ]] || continue
            python3 - "$file" "$seconds" "pr-$n" <<'PY'
import json, sys
spent = json.load(open(sys.argv[1]))
estimate = float(sys.argv[2]) * spent["gpus"]
measured = sum(phase["gpu_seconds"] for phase in spent["phases"])
servers = spent.get("servers") or {}
change = 100 * (estimate - measured) / measured if measured else float("inf")
print("%-7s %-18s measured %6.1f GPU-s  estimate %4.0f GPU-s  %+6.1f%%  (%s: %s loads, %s wakes)" % (
    sys.argv[3], spent["model"], measured, estimate, change,
    servers.get("design"), servers.get("loads"), servers.get("wakes")))
PY
        done
done
