#!/usr/bin/env bash
# bench/plan.sh: how fast is `prgate plan` on a large repository, compared with git itself?
#
# Run it from anywhere:   bash bench/plan.sh
#
# What it does:
#   1. builds the release binary (cargo build --release --bin prgate);
#   2. in a temporary directory (removed on exit), generates with `git fast-import` a
#      repository shaped like a per-model monokernel repository: a prgate.toml, 50,000 files
#      over 200 models (package, unit tests, kernel tests, e2e config per model), a shared
#      `sgl_amd_mono/common/` tree, docs and other files, on branch `main`; then a branch `pr`
#      with one commit changing 5,000 files (modifications, additions including a new model,
#      deletions, and renames within and across models);
#   3. checks that `prgate plan --format json` succeeds and gives a sane plan (200+ models,
#      some on full, a trusted diff), so the timing is not of an error path;
#   4. times, with hyperfine (installed with apt-get when missing and possible; otherwise a
#      bash loop taking the median), warmup 2 and $RUNS runs each:
#        (a) prgate plan --repo DIR --base main --head pr --format json > /dev/null
#        (b) the git baseline, as one command:
#              git diff --name-status -M <merge-base> pr
#              git ls-tree -r --name-only <merge-base>
#              git ls-tree -r --name-only pr
#      and reports the ratio plan/git;
#   5. measures prgate's peak memory (max RSS) with /usr/bin/time -f %M;
#   6. prints a result table with the targets: plan <= 1.5x git's time, <= 100 MB peak memory.
#
# Environment: RUNS (default 20) sets the number of timed runs; KEEP=1 keeps the temporary
# repository (its path is printed) for profiling; TOTAL_FILES (default 50000) and CHANGED_FILES
# (default 5000) size the repository and the PR. CHANGED_FILES=1 makes the PR a one-file change
# in one model (the case where only the diff is git's work: the baseline that matters is then
# `git diff -M` alone, also timed and reported).
set -euo pipefail

RUNS="${RUNS:-20}"
WARMUP=2
TOTAL_FILES="${TOTAL_FILES:-50000}"
CHANGED_FILES="${CHANGED_FILES:-5000}"
TARGET_RATIO=1.5
TARGET_MB=100

cd "$(dirname "$0")/.."
ROOT="$(pwd)"

echo "== building the release binary"
cargo build --release --bin prgate
PRGATE="${CARGO_TARGET_DIR:-$ROOT/target}/release/prgate"
[[ -x "$PRGATE" ]] || { echo "error: $PRGATE was not built" >&2; exit 1; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/prgate-bench.XXXXXX")"
cleanup() {
    if [[ "${KEEP:-0}" == 1 ]]; then
        echo "kept the benchmark repository: $WORK/repo"
    else
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT
REPO="$WORK/repo"

echo "== generating the repository in $REPO"
git init -q -b main "$REPO"
git -C "$REPO" config gc.auto 0
# The generator writes one fast-import stream: commit 1 on main (TOTAL_FILES files), commit 2
# on pr (CHANGED_FILES changes). Contents are deterministic (seeded per path) and distinct.
python3 - "$TOTAL_FILES" "$CHANGED_FILES" <<'PY' | git -C "$REPO" fast-import --quiet
import random
import sys

TOTAL, CHANGED = int(sys.argv[1]), int(sys.argv[2])
MODELS = 200
out = sys.stdout.buffer

MANIFEST = """[scope]
models = ["sgl_amd_mono/models/{model}/**", "test/unit/{model}/**",
          "test/kernels/test_{model}_*.py", "test/e2e/{model}.toml"]
shared = ["sgl_amd_mono/__init__.py", "sgl_amd_mono/common/**", "pyproject.toml"]
ignore = ["docs/**"]
codeowners = ".github/CODEOWNERS"
"""

WORDS = ("tile block warp lds vgpr sgpr wave mfma scale bias gate up down proj norm rope "
         "kv cache page head dim rank expert topk route fp8 bf16 int4 pack unpack load store "
         "sync barrier stride offset mask causal softmax gemm moe attn fused").split()


def lines_of(path):
    """The file's base content, one list of lines, deterministic per path."""
    rng = random.Random(path)
    count = rng.randint(15, 60)
    lines = [f"# {path}"]
    for i in range(count):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9)))
        lines.append(f"{'    ' * rng.randint(0, 2)}v{i}_{rng.randint(0, 99999)} = '{words}'")
    return lines


def text(lines):
    return ("\n".join(lines) + "\n").encode()


def modified(path, salt="pr"):
    """A real modification: a few lines rewritten and one added."""
    lines = lines_of(path)
    rng = random.Random(path + salt)
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(1, len(lines))
        lines[i] = lines[i] + f"  # changed {rng.randint(0, 10**9)}"
    lines.insert(rng.randrange(1, len(lines)), f"added_{rng.randint(0, 10**9)} = True")
    return text(lines)


def model_files(m):
    base = f"sgl_amd_mono/models/{m}"
    files = [f"{base}/__init__.py", f"{base}/model.py", f"{base}/config.py"]
    for sub in ("attention", "moe", "gemm", "norm", "rope"):
        files.append(f"{base}/kernels/{sub}/__init__.py")
        files += [f"{base}/kernels/{sub}/k_{i:02}.py" for i in range(15)]
    files += [f"{base}/kernels/attention/variants/var_{i:02}.py" for i in range(10)]
    files += [f"{base}/layers/layer_{i:02}.py" for i in range(25)]
    files += [f"{base}/csrc/hip/op_{i:02}.hip" for i in range(20)]
    files += [f"{base}/csrc/include/op_{i:02}.h" for i in range(12)]
    files += [f"{base}/configs/tuning/gfx942/cfg_{i:02}.json" for i in range(20)]
    files += [f"{base}/configs/tuning/gfx950/cfg_{i:02}.json" for i in range(10)]
    files += [f"test/unit/{m}/test_{i:02}.py" for i in range(30)]
    files += [f"test/unit/{m}/fixtures/fx_{i:02}.json" for i in range(10)]
    files += [f"test/kernels/test_{m}_k{i}.py" for i in range(12)]
    files.append(f"test/e2e/{m}.toml")
    return files


models = [f"model_{n:03}" for n in range(MODELS)]
per_model = {m: model_files(m) for m in models}
common = [f"sgl_amd_mono/common/{area}/{sub}/mod_{i:03}.py"
          for area in ("utils", "ops", "hip", "runtime")
          for sub in ("core", "io", "dist", "quant", "sched")
          for i in range(80)]                                   # 1,600
docs = [f"docs/models/{m}.md" for m in models]
docs += [f"docs/guides/{g}/page_{i:03}.md" for g in range(10) for i in range(100)]  # 1,200
other = ["README.md", "pyproject.toml", "sgl_amd_mono/__init__.py", ".github/CODEOWNERS"]
other += [f".github/workflows/wf_{i:02}.yml" for i in range(10)]
other += [f"scripts/tool_{i:03}.py" for i in range(60)]
files = [p for m in models for p in per_model[m]] + common + docs + other
i = 0
while len(files) + 1 < TOTAL:                                   # + prgate.toml
    files.append(f"benchmarks/suite_{i // 100:02}/case_{i % 100:02}.py")
    i += 1
assert len(files) + 1 == TOTAL and len(set(files)) == len(files), len(files)

codeowners = "".join(f"/sgl_amd_mono/models/{m}/ @team-{int(m[-3:]) % 17}\n" for m in models)
special = {"prgate.toml": MANIFEST.encode(), ".github/CODEOWNERS": codeowners.encode()}


def blob_cmd(path, data):
    out.write(f"M 100644 inline {path}\ndata {len(data)}\n".encode())
    out.write(data)
    out.write(b"\n")


def commit(ref, message, when, parent=None):
    out.write(f"commit {ref}\n".encode())
    out.write(f"committer Bench <bench@example.com> {when} +0000\n".encode())
    msg = message.encode()
    out.write(f"data {len(msg)}\n".encode() + msg + b"\n")
    if parent:
        out.write(f"from {parent}\n".encode())


# main: every file.
commit("refs/heads/main", "the monokernel repository", 1700000000)
blob_cmd("prgate.toml", special["prgate.toml"])
for path in files:
    blob_cmd(path, special.get(path) or text(lines_of(path)))
out.write(b"\n")

# pr: CHANGED changes, one commit.
if CHANGED == 1:
    commit("refs/heads/pr", "one kernel", 1700003600, parent="refs/heads/main")
    blob_cmd(per_model["model_007"][5], modified(per_model["model_007"][5]))
    out.write(b"\n")
    sys.exit(0)
rng = random.Random(42)
N_ADD, N_DEL, N_REN = 500, 250, 250
N_MOD = CHANGED - N_ADD - N_DEL - N_REN
touched = models[::5]                                           # 40 models get full
pools = {m: list(per_model[m]) for m in touched}
for pool in pools.values():
    rng.shuffle(pool)
existing = set(files) | {"prgate.toml"}

def take(pool, n):
    taken, pool[:] = pool[:n], pool[n:]
    return taken

mods = []
for m in touched:
    mods += take(pools[m], 75)                                  # 3,000
common_pool = list(common); rng.shuffle(common_pool)
docs_pool = list(docs); rng.shuffle(docs_pool)
other_pool = [p for p in files if p.startswith(("benchmarks/", "scripts/"))]
rng.shuffle(other_pool)
mods += take(common_pool, 600) + take(docs_pool, 250)
mods += ["pyproject.toml", "sgl_amd_mono/__init__.py"]
mods += take(other_pool, N_MOD - len(mods))
assert len(mods) == N_MOD

dels = []
for m in touched:
    dels += take(pools[m], 5)                                   # 200
dels += take(docs_pool, N_DEL - len(dels))

renames = []                                                    # (old, new, edited)
def suffixed(path, suffix):
    stem, ext = path.rsplit(".", 1)
    return f"{stem}{suffix}.{ext}"
for m in touched:
    for old in take(pools[m], 3):                               # within a model: 120
        renames.append((old, suffixed(old, "_v2"), False))
donors = [m for m in models if m not in touched][:26]
for n, m in enumerate(donors):                                  # across models: 130
    dest = touched[n % len(touched)]
    moved = [f"sgl_amd_mono/models/{m}/layers/layer_{i:02}.py" for i in range(3)]
    moved += [f"test/kernels/test_{m}_k0.py", f"test/unit/{m}/test_00.py"]
    for old in moved:
        new = old.replace(f"/{m}/", f"/{dest}/", 1).replace(f"_{m}_", f"_{dest}_", 1)
        renames.append((old, suffixed(new, f"_from_{m}"), len(renames) % 2 == 0))
renames = renames[:N_REN]
assert len(renames) == N_REN

adds = model_files("model_200")                                # a new model
for n in range(N_ADD - len(adds)):
    where = touched[n % len(touched)] if n % 3 else None
    adds.append(f"sgl_amd_mono/models/{where}/kernels/extra/new_{n:03}.py" if where
                else f"sgl_amd_mono/common/extra/new_{n:03}.py")
assert len(adds) == N_ADD

paths = mods + dels + [o for o, _, _ in renames] + [n for _, n, _ in renames] + adds
assert len(set(paths)) == len(paths), "overlapping changes"
assert not (set(adds) | {n for _, n, _ in renames}) & existing

commit("refs/heads/pr", "a large refactor", 1700003600, parent="refs/heads/main")
for path in mods:
    blob_cmd(path, modified(path))
for path in dels:
    out.write(f"D {path}\n".encode())
for old, new, edited in renames:
    if edited:
        out.write(f"D {old}\n".encode())
        blob_cmd(new, modified(old, "moved"))
    else:
        out.write(f"R {old} {new}\n".encode())
for path in adds:
    blob_cmd(path, text(lines_of(path + "#new")))
out.write(b"\n")
PY
# One pack, as a clone would have.
git -C "$REPO" repack -a -d -q
git -C "$REPO" symbolic-ref HEAD refs/heads/main

MB="$(git -C "$REPO" merge-base main pr)"
N_FILES="$(git -C "$REPO" ls-tree -r --name-only main | wc -l)"
N_CHANGED="$(git -C "$REPO" diff --name-status -M "$MB" pr | wc -l)"
N_RENAMED="$(git -C "$REPO" diff --name-status -M "$MB" pr | grep -c '^R' || true)"
echo "files on main: $N_FILES; changed on pr: $N_CHANGED ($N_RENAMED renames by git)"

echo "== checking the plan"
PLAN_JSON="$WORK/plan.json"
if ! "$PRGATE" plan --repo "$REPO" --base main --head pr --format json > "$PLAN_JSON"; then
    echo "error: prgate plan failed (exit status $?); not timing an error path" >&2
    exit 1
fi
git -C "$REPO" diff --name-only --no-renames "$MB" pr > "$WORK/touched.txt"
python3 - "$PLAN_JSON" "$WORK/touched.txt" <<'PY'
import collections, json, sys
plan = json.load(open(sys.argv[1]))
# Every path git's diff touches (both sides of a rename), however renames are paired.
touched = set(open(sys.argv[2]).read().split("\n")) - {""}
tiers = collections.Counter(m["tier"] for m in plan["models"])
statuses = collections.Counter(c["status"] for c in plan["changed"])
new = [m["name"] for m in plan["models"] if m["new"]]
print(f"plan: {len(plan['models'])} models {dict(tiers)}, new {new}, "
      f"{len(plan['changed'])} changed {dict(statuses)}, common selected: "
      f"{plan['common']['selected']}, diff trusted: {plan['diff']['trusted']}, "
      f"warnings: {plan['diff']['warnings'] + plan['warnings']}")
problems = []
if len(plan["models"]) < 200: problems.append("fewer than 200 models")
if tiers["full"] == 0: problems.append("no model on full")
if not plan["diff"]["trusted"]: problems.append("the diff is not trusted")
planned = {c["path"] for c in plan["changed"]} | {c["old_path"] for c in plan["changed"] if c["old_path"]}
if planned != touched:
    problems.append(f"the plan touches {len(planned)} paths, git's diff {len(touched)}")
if problems:
    sys.exit("error: the plan is not sane: " + "; ".join(problems))
PY

PLAN_CMD="'$PRGATE' plan --repo '$REPO' --base main --head pr --format json > /dev/null"
GIT_CMD="git -C '$REPO' diff --name-status -M $MB pr > /dev/null && git -C '$REPO' ls-tree -r --name-only $MB > /dev/null && git -C '$REPO' ls-tree -r --name-only pr > /dev/null"
# The same, with git looking only for exact renames: what prgate does when a PR has more than
# 10,000 (added, deleted) pairs to compare, as this one has. Shown for a like-for-like ratio.
GIT_EXACT_CMD="${GIT_CMD/-M /-M100% }"
# The git work the change itself needs: its diff alone (what a one-file change costs git).
GIT_DIFF_CMD="git -C '$REPO' diff --name-status -M $MB pr > /dev/null"

if ! command -v hyperfine > /dev/null && [[ "$(id -u)" == 0 ]] && command -v apt-get > /dev/null; then
    echo "== installing hyperfine"
    apt-get install -y -qq hyperfine > /dev/null 2>&1 || true
fi

echo "== timing (warmup $WARMUP, $RUNS runs each)"
if command -v hyperfine > /dev/null; then
    TOOL="hyperfine $(hyperfine --version | awk '{print $2}')"
    hyperfine --warmup "$WARMUP" --runs "$RUNS" --export-json "$WORK/times.json" \
        -n "prgate plan" "$PLAN_CMD" -n "git baseline" "$GIT_CMD" \
        -n "git baseline, exact renames only" "$GIT_EXACT_CMD" -n "git diff alone" "$GIT_DIFF_CMD"
    read -r PLAN_MEAN PLAN_MEDIAN GIT_MEAN GIT_MEDIAN EXACT_MEAN EXACT_MEDIAN DIFF_MEAN DIFF_MEDIAN < <(python3 - "$WORK/times.json" <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))["results"]
print(" ".join(f"{r[k] * 1000:.1f}" for r in results for k in ("mean", "median")))
PY
)
else
    TOOL="bash loop (date +%s.%N)"
    time_runs() {  # prints "mean median" in ms of RUNS runs after WARMUP runs of "$1"
        local i start end
        for ((i = 0; i < WARMUP; i++)); do bash -c "$1"; done
        for ((i = 0; i < RUNS; i++)); do
            start="$(date +%s.%N)"; bash -c "$1"; end="$(date +%s.%N)"
            echo "$start $end"
        done | python3 -c '
import statistics, sys
ms = [(float(b) - float(a)) * 1000 for a, b in (line.split() for line in sys.stdin)]
print(f"{statistics.mean(ms):.1f} {statistics.median(ms):.1f}")'
    }
    read -r PLAN_MEAN PLAN_MEDIAN < <(time_runs "$PLAN_CMD")
    read -r GIT_MEAN GIT_MEDIAN < <(time_runs "$GIT_CMD")
    read -r EXACT_MEAN EXACT_MEDIAN < <(time_runs "$GIT_EXACT_CMD")
    read -r DIFF_MEAN DIFF_MEDIAN < <(time_runs "$GIT_DIFF_CMD")
fi

echo "== peak memory"
PEAK_KB=0
for _ in 1 2 3; do  # the largest of three runs
    /usr/bin/time -f %M -o "$WORK/rss" "$PRGATE" plan --repo "$REPO" --base main --head pr \
        --format json > /dev/null
    kb="$(tail -n 1 "$WORK/rss")"
    if (( kb > PEAK_KB )); then PEAK_KB="$kb"; fi
done

python3 - <<PY
ratio = $PLAN_MEDIAN / $GIT_MEDIAN
peak = $PEAK_KB / 1024
rows = [
    ("files in repo (main)", "$N_FILES", ""),
    ("changed files (git diff -M)", "$N_CHANGED", ""),
    ("prgate plan median / mean", "$PLAN_MEDIAN ms / $PLAN_MEAN ms", ""),
    ("git baseline median / mean", "$GIT_MEDIAN ms / $GIT_MEAN ms", ""),
    ("ratio plan/git (medians)", f"{ratio:.2f}", f"<= $TARGET_RATIO: {'met' if ratio <= $TARGET_RATIO else 'NOT met'}"),
    ("git baseline with -M100% (exact renames) median / mean", "$EXACT_MEDIAN ms / $EXACT_MEAN ms", ""),
    ("ratio plan/git -M100% (medians)", f"{$PLAN_MEDIAN / $EXACT_MEDIAN:.2f}", f"<= $TARGET_RATIO: {'met' if $PLAN_MEDIAN / $EXACT_MEDIAN <= $TARGET_RATIO else 'NOT met'}"),
    ("git diff -M alone median / mean", "$DIFF_MEDIAN ms / $DIFF_MEAN ms", ""),
    ("ratio plan/git diff alone (medians)", f"{$PLAN_MEDIAN / $DIFF_MEDIAN:.2f}", ""),
    ("prgate peak memory (max RSS)", f"{peak:.1f} MB", f"<= $TARGET_MB MB: {'met' if peak <= $TARGET_MB else 'NOT met'}"),
]
print()
print("| measure | result | target |")
print("|---|---|---|")
for row in rows:
    print("| " + " | ".join(row) + " |")
print()
print("timed with $TOOL, warmup $WARMUP, $RUNS runs each")
PY
