//! `prgate demo`: the built-in sample, start to end — plan, run on simulated servers, gate.
//!
//! One test, as the demo runs every sample PR (minutes in a debug build). With
//! `PRGATE_TEST_DEMO_OUT=DIR` it keeps the demo's output in DIR (an earlier demo's there is
//! replaced): `.ci/run` renders those comments (`.ci/render-comments DIR`) instead of running
//! the demo a second time.

use crate::support::{plan_json, prgate, prgate_with_env, tiers};

#[test]
fn the_demo_runs_and_judges_every_sample_pr_and_keeps_its_results() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = std::env::var_os("PRGATE_TEST_DEMO_OUT")
        .map_or_else(|| dir.path().join("sample"), std::path::PathBuf::from);
    let run = prgate(dir.path(), &["demo", "--out", out.to_str().expect("UTF-8")]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let stdout = &run.stdout;

    // A verdict for every PR.
    let prs = [
        131, 133, 136, 138, 141, 95, 101, 103, 110, 112, 114, 116, 118, 120, 122, 124, 126, 128,
        130,
    ];
    for pr in prs {
        assert!(stdout.contains(&format!("=== PR #{pr}: ")), "no PR #{pr} in\n{stdout}");
        // What the PR would get on GitHub, as files.
        for file in ["verdict.json", "comment.md", "status.txt", "report.md"] {
            let path = out.join(format!("results/pr-{pr}/{file}"));
            assert!(path.is_file(), "no {}", path.display());
        }
        let comment = std::fs::read_to_string(out.join(format!("results/pr-{pr}/comment.md")))
            .expect("the comment");
        assert!(comment.starts_with("<!-- prgate:amd-pr-test -->"), "{comment}");
        let status = std::fs::read_to_string(out.join(format!("results/pr-{pr}/status.txt")))
            .expect("the status");
        assert!(status.starts_with("AMD PR test "), "{status}");
    }
    let status = |pr: u32| {
        std::fs::read_to_string(out.join(format!("results/pr-{pr}/status.txt"))).expect("status")
    };
    assert!(status(95).starts_with("AMD PR test success: "), "{}", status(95));
    assert!(status(114).starts_with("AMD PR test failure: "), "{}", status(114));
    // A history PR whose small loss measured over the 2% line is run again before it merges.
    let again =
        stdout.matches("it does not merge; its small loss measured over the 2% line").count();
    assert_eq!(stdout.matches("AMD PR test: ").count(), prs.len() + again, "{stdout}");

    // The summary table, without its measured numbers: which PR passed, which failed.
    let summary = stdout.split("=== Summary").nth(1).expect("a summary");
    // A reason's log tail keeps its lines: no escaped line break where one belongs.
    assert!(!summary.contains("\\u{a}"), "{summary}");
    assert!(
        summary.lines().any(|line| line.trim() == "last lines of the server's log:"),
        "the crashed PR's reason keeps its log's lines: {summary}"
    );
    // A speed cell whose PR runs measured noisier than base's warns (the gate is right to):
    // on simulated servers that is the machine's load, not the sample, so a PR whose only
    // warnings are those is shown as the PASS it is without them.
    let table: Vec<String> = summary
        .lines()
        .filter(|line| line.starts_with('#'))
        .map(|line| {
            let pr: u32 =
                line[1..].split_whitespace().next().and_then(|n| n.parse().ok()).expect("#N");
            if only_noise_warnings(&out.join(format!("results/pr-{pr}/verdict.json"))) {
                line.replacen("PASS (warnings)", "PASS           ", 1)
            } else {
                line.to_owned()
            }
        })
        .collect();
    insta::assert_snapshot!("demo-summary", table.join("\n"));

    // The perf PR passes on a real gain; the slowed PR fails on its TPOT; the CODEOWNERS edit
    // fails the rules.
    let section = |pr: u32| {
        let start = stdout.find(&format!("=== PR #{pr}: ")).expect("the PR's section");
        let rest = &stdout[start + 4..];
        &rest[..rest.find("=== ").unwrap_or(rest.len())]
    };
    let perf = section(95);
    assert!(perf.contains("AMD PR test: PASS"), "{perf}");
    assert!(perf.contains("[pass] gain: deepseek_v41 c=1: TPOT -"), "{perf}");
    assert!(perf.contains("[pass] deepseek_v41: routing"), "{perf}");
    let slowed = section(114);
    assert!(slowed.contains("AMD PR test: FAIL"), "{slowed}");
    assert!(slowed.contains("[FAIL] glm53_flash: speed: TPOT +"), "{slowed}");
    // A PR that drops the covered cell it would lose at: base's recipe measures it anyway,
    // and the narrowing fails on its own.
    let narrowed = section(128);
    assert!(narrowed.contains("AMD PR test: FAIL"), "{narrowed}");
    assert!(narrowed.contains("[FAIL] glm53_flash: speed: TPOT +"), "{narrowed}");
    assert!(narrowed.contains("[FAIL] glm53_flash: recipe-contract:"), "{narrowed}");
    assert!(narrowed.contains("speed.covered (narrowing)"), "{narrowed}");
    let codeowners = section(116);
    assert!(codeowners.contains("AMD PR test: FAIL"), "{codeowners}");
    assert!(codeowners.contains("[FAIL] codeowners:"), "{codeowners}");
    // A [Perf] PR without a gain fails the gain rule; an accuracy drop fails accuracy.
    let no_gain = section(118);
    assert!(no_gain.contains("AMD PR test: FAIL"), "{no_gain}");
    assert!(no_gain.contains("[FAIL] gain:"), "{no_gain}");
    let accuracy = section(120);
    assert!(accuracy.contains("AMD PR test: FAIL"), "{accuracy}");
    assert!(accuracy.contains("[FAIL] deepseek_v41: accuracy"), "{accuracy}");
    // A PR whose server crashes fails: what it broke is not a pass, and not the author's to
    // provide.
    let crashing = section(122);
    assert!(crashing.contains("AMD PR test: FAIL"), "{crashing}");
    assert!(crashing.contains("[FAIL] kimi_k3: speed"), "{crashing}");
    assert!(status(122).starts_with("AMD PR test failure: "), "{}", status(122));

    // The disaggregated model: a prefill and a decode instance behind the real sglang-router.
    // A common change runs it (smoke) and passes; a PR whose decode moves the KV cache over TCP
    // fails the transport line base's recipe requires, naming the instance.
    let common = section(101);
    assert!(common.contains("[pass] mimo_v3_pd: routing"), "{common}");
    assert!(common.contains("[pass] mimo_v3_pd: speed: TPOT"), "{common}");
    let tcp = section(130);
    assert!(tcp.contains("AMD PR test: FAIL"), "{tcp}");
    assert!(
        tcp.contains("[FAIL] mimo_v3_pd: routing:")
            && tcp.contains("decode instance 0 logged no line matching")
            && tcp.contains("transport=rdma"),
        "{tcp}"
    );
    let pd_logs = out.join("results/pr-130/logs/mimo_v3_pd.routing.base");
    for log in ["prefill-0.log", "decode-0.log", "server.log"] {
        assert!(pd_logs.join(log).is_file(), "no {log} in {}", pd_logs.display());
    }

    // A run while the fleet's second node is drained: the comment says it was left out, and
    // only that PR's (the demo strikes the node just before it).
    let drained = section(124);
    assert!(drained.contains("node demo-node-2 is drained: 3 strikes within 7d"), "{drained}");
    let comment = |pr: u32| {
        std::fs::read_to_string(out.join(format!("results/pr-{pr}/comment.md"))).expect("comment")
    };
    assert!(
        comment(124)
            .contains("| Drained | `demo-node-2` (3 strikes within 7d): left out of this run |"),
        "{}",
        comment(124)
    );
    assert!(!comment(122).contains("Drained"), "{}", comment(122));
    // PR #122's server dies after three requests: a dead server answers no memory API, and
    // that says nothing of its engine's, so the run keeps switching by SGLang's and loads it
    // again (never "refused the sglang memory API").
    let spent = std::fs::read_to_string(out.join("results/pr-122/gpu-time/kimi_k3.json"))
        .expect("the GPU-time file");
    let spent: serde_json::Value = serde_json::from_str(&spent).expect("JSON");
    assert_eq!(spent["servers"]["design"], "sglang", "{spent}");
    assert!(!comment(122).contains("refused the sglang memory API"), "{}", comment(122));
    let ledger =
        std::fs::read_to_string(out.join("cache/health/demo-node-2.jsonl")).expect("the ledger");
    assert_eq!(ledger.lines().count(), 4, "three strikes and a drain: {ledger}");

    // A PR run twice after a flaky failure: the second run takes over what the first judged
    // and runs only the failed suite, which passes; the comment says what was reused.
    let rerun = section(126);
    assert!(rerun.contains("first run: "), "{rerun}");
    assert!(rerun.contains("FAIL: glm53_flash: unit-tests:"), "{rerun}");
    assert!(rerun.contains("    ran 1 steps in "), "{rerun}");
    assert!(rerun.contains("took 13 judged steps over from the first run"), "{rerun}");
    assert!(rerun.contains("AMD PR test: PASS"), "{rerun}");
    let comment = std::fs::read_to_string(out.join("results/pr-126/comment.md")).expect("comment");
    assert!(
        comment.contains(
            "| Re-run | 13 of 14 steps reused from run results/pr-126-first-run \\(their inputs unchanged\\); the rest ran again. |"
        ),
        "{comment}"
    );
    // Every comment says what its run cost in GPU time.
    assert!(comment.contains("| GPU time | glm53\\_flash \\(2 GPUs\\): "), "{comment}");
    assert!(out.join("cache/gpu-hours.jsonl").is_file());

    // The sample's history: five 1.5% losses that each passed, merged into the ledger; the
    // anchor run; the guard that catches their sum; the page; the next PR of that model says so.
    let ledger = std::fs::read_to_string(out.join("cache/history/ledger.jsonl")).expect("ledger");
    let events: Vec<String> = ledger
        .lines()
        .map(|line| {
            let line: serde_json::Value = serde_json::from_str(line).expect("a ledger line");
            format!("{} {}", line["event"].as_str().expect("an event"), line["pr"])
        })
        .collect();
    assert_eq!(
        events,
        ["merged 131", "merged 133", "merged 136", "merged 138", "merged 141", "anchor null"],
        "{ledger}"
    );
    let guard = stdout.split("=== The drift guard").nth(1).expect("the guard's section");
    assert!(
        guard.contains("TRIPPED  qwen38_flash_next c=1: TPOT +"),
        "five small losses trip the 3% budget:\n{guard}"
    );
    // Most from the PRs, or from the anchor run when it disagreed with their chain and won.
    assert!(guard.contains("over the +3.0% budget; most from "), "{guard}");
    assert!(out.join("history/index.html").is_file());
    assert!(out.join("history/assets/chart.umd.min.js").is_file());
    let comment_of = |pr: u32| {
        std::fs::read_to_string(out.join(format!("results/pr-{pr}/comment.md"))).expect("comment")
    };
    let drift = "| Drift | ❌ over the budget since the reference: qwen38\\_flash\\_next";
    assert!(comment_of(118).contains(&format!("{drift} c=1: TPOT +")), "{}", comment_of(118));
    // A PR of another model is told in a line, and pointed to the check.
    assert!(
        comment_of(95).contains(&format!("{drift}: 1 cell over the budget")),
        "{}",
        comment_of(95)
    );

    // --out keeps the repository, the node profile and the evidence.
    assert!(stdout.contains("Everything is in"), "{stdout}");
    assert!(out.join("node.toml").is_file());
    assert!(
        out.join("results/pr-95/evidence/deepseek_v41.speed.both.concurrency-1-pair-0.json")
            .is_file()
    );
    let plan = plan_json(&out.join("repository"), &["--head", "pr/101-common-residency"]);
    assert_eq!(
        tiers(&plan),
        "deepseek_v41 smoke\nglm53_flash smoke\nkimi_k3 smoke\nkimi_k31 smoke\nmimo_v3_pd smoke\nqwen38_flash_next smoke"
    );
    // A folder that is not an earlier demo's is never replaced.
    let other = dir.path().join("other");
    std::fs::create_dir_all(&other).expect("a folder");
    std::fs::write(other.join("notes.txt"), "mine").expect("a file");
    let refused = prgate(dir.path(), &["demo", "--out", other.to_str().expect("UTF-8")]);
    assert_eq!(refused.code, 2);
    assert!(refused.stderr.contains("not an earlier demo's"), "{}", refused.stderr);
    assert!(other.join("notes.txt").is_file());
}

#[test]
fn the_demo_stops_before_it_starts_when_pytest_is_missing() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    // A python3 first on the PATH that has no site-packages: pytest does not import.
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).expect("a folder");
    let real = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", "command -v python3"])
            .output()
            .expect("sh")
            .stdout,
    )
    .expect("UTF-8");
    let wrapper = bin.join("python3");
    std::fs::write(&wrapper, format!("#!/bin/sh\nexec {} -S \"$@\"\n", real.trim()))
        .expect("the wrapper");
    let mut permissions = std::fs::metadata(&wrapper).expect("metadata").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&wrapper, permissions).expect("executable");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = dir.path().join("sample");
    let run = prgate_with_env(
        dir.path(),
        &["demo", "--out", out.to_str().expect("UTF-8")],
        &[("PATH", &path)],
    );
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("the demo needs pytest"), "{}", run.stderr);
    assert!(!run.stdout.contains("=== PR #"), "it ran anyway: {}", run.stdout);
    assert!(!out.exists(), "it wrote the sample anyway");
}

#[test]
fn the_demo_stops_before_it_starts_when_sglang_router_is_missing() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    // The PATH's python3 (with pytest), but a `sglang_router` first on its module path that
    // does not import, as where it is not installed.
    let shadow = dir.path().join("shadow/sglang_router");
    std::fs::create_dir_all(&shadow).expect("a folder");
    std::fs::write(shadow.join("__init__.py"), "raise ImportError('not installed here')\n")
        .expect("the module");
    let shadow = dir.path().join("shadow");
    let out = dir.path().join("sample");
    let run = prgate_with_env(
        dir.path(),
        &["demo", "--out", out.to_str().expect("UTF-8")],
        &[("PYTHONPATH", shadow.to_str().expect("UTF-8"))],
    );
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("the demo needs sglang-router")
            && run.stderr.contains("mimo_v3_pd")
            && run.stderr.contains("hint: bash .ci/demo"),
        "{}",
        run.stderr
    );
    assert!(!run.stdout.contains("=== PR #"), "it ran anyway: {}", run.stdout);
    assert!(!out.exists(), "it wrote the sample anyway");
}

#[test]
fn the_demo_runs_only_the_prs_it_is_told_to() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("sample");
    let out_arg = out.to_str().expect("UTF-8");
    let run = prgate(dir.path(), &["demo", "--out", out_arg, "--only", "95"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let sections: Vec<&str> =
        run.stdout.lines().filter(|line| line.starts_with("=== PR #")).collect();
    assert_eq!(sections.len(), 1, "{}", run.stdout);
    assert!(sections[0].starts_with("=== PR #95: "), "{}", run.stdout);
    assert!(out.join("results/pr-95/comment.md").is_file());
    assert!(!out.join("results/pr-114").exists(), "another PR ran");
    // The whole sample is built: every PR's branch is there to run by hand.
    let plan = plan_json(&out.join("repository"), &["--head", "pr/101-common-residency"]);
    assert!(tiers(&plan).contains("deepseek_v41 smoke"), "{plan}");

    let refused = prgate(dir.path(), &["demo", "--out", out_arg, "--only", "7"]);
    assert_eq!(refused.code, 2, "{}\n{}", refused.stdout, refused.stderr);
    assert!(
        refused.stderr.contains("--only 7: the sample has no PR #7")
            && refused.stderr.contains("95, "),
        "{}",
        refused.stderr
    );
    assert!(!refused.stdout.contains("=== PR #"), "{}", refused.stdout);
}

#[test]
fn the_demo_stops_before_it_starts_when_this_program_is_not_named_prgate() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let renamed = dir.path().join("prgate-copy");
    std::fs::copy(env!("CARGO_BIN_EXE_prgate"), &renamed).expect("a copy of prgate");
    let out = dir.path().join("sample");
    let run = std::process::Command::new(&renamed)
        .args(["demo", "--out", out.to_str().expect("UTF-8")])
        .output()
        .expect("the copy runs");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("start `prgate` by name") && stderr.contains("prgate-copy"),
        "{stderr}"
    );
    assert!(!out.exists(), "it wrote the sample anyway");
}

/// Whether every warning of the verdict in `path` is a speed cell's noise growth ("the PR's
/// runs are 1.9× as noisy as base's"), and it has one.
fn only_noise_warnings(path: &std::path::Path) -> bool {
    let text = std::fs::read_to_string(path).expect("the verdict");
    let verdict: serde_json::Value = serde_json::from_str(&text).expect("the verdict is JSON");
    let warnings: Vec<&serde_json::Value> = verdict["sections"]
        .as_array()
        .expect("sections")
        .iter()
        .flat_map(|section| section["items"].as_array().expect("items"))
        .filter(|item| item["state"] == "warn")
        .collect();
    !warnings.is_empty()
        && warnings.iter().all(|item| {
            item["check"] == "speed"
                && item["summary"].as_str().is_some_and(|text| text.contains("as noisy as base's"))
        })
}
