//! `prgate history` end to end: a real `prgate ci` run (the runner on simulated servers, a
//! stand-in for GitHub's API) saves its measurements; the merge event records them once; the
//! guard over a ledger of small losses speaks in the next PR's comment and in `prgate history
//! check`; a reset silences it; the run, as an anchor, is recorded against the reference; the
//! page is written.

use std::path::Path;

use serde_json::{Value, json};

use crate::ci::{output, spawn_ci, stand_in};
use crate::run::{Fixture, Sample, TWO_PAIRS, settle};
use crate::support::{prgate, prgate_with_env};

/// A merged PR's line of a 1.5% loss at alpha's covered concurrency, measured precisely.
fn small_loss(pr: u64) -> String {
    json!({
        "version": 1, "event": "merged", "at": "2026-12-01T15:00:00Z", "pr": pr,
        "title": format!("[Fix] alpha: small fix {pr}"),
        "url": format!("https://github.com/amd/mono/pull/{pr}"),
        "merge_commit": format!("{pr:040x}"), "head_commit": format!("{pr:040x}"),
        "base_commit": null, "run": null, "verdict": "pass",
        "speed": [{
            "model": "alpha", "concurrency": 1, "covered": true, "provenance": {
                "node": "ci-node", "image": null, "recipe_hash": null,
                "base_commit": null, "pr_commit": null },
            "change": 0.015, "interval": [0.009, 0.021], "log_ratio": 0.014889,
            "standard_error": 0.003, "degrees_of_freedom": 9.0, "pairs": 5 }],
        "accuracy": [], "note": null,
    })
    .to_string()
}

fn history(dir: &Path, args: &[&str], history: &Path) -> crate::support::Run {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--history", history.to_str().expect("UTF-8")]);
    prgate(dir, &all)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_merged_prs_result_is_recorded_once_and_the_guard_speaks_until_a_reset() {
    let fixture = Fixture::new(&Sample { gate: TWO_PAIRS, ..Sample::default() });
    let dir = fixture.work.path().join("history");
    std::fs::create_dir_all(&dir).expect("the history folder");
    let ledger = dir.join("ledger.jsonl");
    // Five earlier merges of 1.5% each: the chain is +7.7%, over the 3% budget.
    let earlier: Vec<String> = (1..=5).map(small_loss).collect();
    std::fs::write(&ledger, earlier.join("\n") + "\n").expect("the ledger");

    let (server, github, head) = stand_in(&fixture).await;
    let history_flag = ["--history", dir.to_str().expect("UTF-8")];
    let child = spawn_ci(&fixture, &server, &head, &history_flag);
    let (code, stderr) = tokio::task::spawn_blocking(move || output(child)).await.expect("joined");
    assert_eq!(code, 0, "{stderr}");
    // The PR's comment names the drift of the model it runs, and the PRs behind it.
    github.with(|repo| {
        let last = &repo.comment_history.last().expect("a comment").1;
        let row = last.lines().find(|line| line.starts_with("| Drift |")).expect("a Drift row");
        assert!(row.contains("alpha c=1: TPOT +7.7%"), "{row}");
        assert!(row.contains("over the +3.0% budget; most from"), "{row}");
        // The verdict is the PR's own: the drift is not its doing.
        assert!(last.contains("✅ AMD PR test: pass"), "{last}");
    });
    // Its measurements wait for the merge.
    assert!(stderr.contains("saved this run's 2 speed cell(s)"), "{stderr}");
    let saved = std::fs::read_to_string(dir.join(format!("runs/{head}.jsonl"))).expect("the run");
    assert_eq!(saved.lines().count(), 1, "{saved}");
    let saved: Value = serde_json::from_str(&saved).expect("JSON");
    assert_eq!(saved["pr"], 7);
    assert_eq!(saved["speed"][0]["provenance"]["node"], "ci-node", "{saved}");

    // The scheduled check, before the merge: tripped, exit 1, naming the PRs.
    let work = fixture.work.path();
    let repo = fixture.repo.path().to_str().expect("UTF-8");
    let check = history(
        work,
        &["history", "check", "--repo", repo, "--at", "main", "--format", "markdown"],
        &dir,
    );
    assert_eq!(check.code, 1, "{}\n{}", check.stdout, check.stderr);
    assert!(check.stdout.contains("❌ **1 guard(s) tripped:**"), "{}", check.stdout);
    assert!(check.stdout.contains("most from \\#"), "{}", check.stdout);

    // The merge event: recorded once, however often it comes.
    let event = |merged: bool| {
        let path = work.join(format!("closed-{merged}.json"));
        let event = json!({ "action": "closed", "pull_request": {
            "number": 7, "title": "[Fix] alpha: <b>bounds</b>-check every row",
            "html_url": "https://github.com/amd/mono/pull/7", "merged": merged,
            "merge_commit_sha": head, "head": { "sha": head } } });
        std::fs::write(&path, event.to_string()).expect("the event");
        path.to_str().expect("UTF-8").to_owned()
    };
    let closed = history(work, &["history", "record", "--event", &event(false)], &dir);
    assert_eq!(closed.code, 0, "{}", closed.stderr);
    assert!(closed.stderr.contains("closed without a merge"), "{}", closed.stderr);
    let merged = event(true);
    let first = history(work, &["history", "record", "--event", &merged], &dir);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(first.stderr.contains("recorded PR #7"), "{}", first.stderr);
    let again = history(work, &["history", "record", "--event", &merged], &dir);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(again.stderr.contains("in the ledger already"), "{}", again.stderr);
    let text = std::fs::read_to_string(&ledger).expect("the ledger");
    assert_eq!(text.lines().count(), 6, "{text}");
    let line: Value = serde_json::from_str(text.lines().last().expect("a line")).expect("JSON");
    assert_eq!(line["pr"], 7);
    assert_eq!(line["speed"][0]["model"], "alpha");

    // The page.
    let page = work.join("page");
    let written = history(
        work,
        &[
            "history",
            "page",
            "--repo",
            repo,
            "--at",
            "main",
            "--out",
            page.to_str().expect("UTF-8"),
        ],
        &dir,
    );
    assert_eq!(written.code, 0, "{}", written.stderr);
    let html = std::fs::read_to_string(page.join("index.html")).expect("the page");
    assert!(
        html.contains("&lt;b&gt;bounds&lt;&#47;b&gt;")
            || html.contains("&lt;b&gt;bounds&lt;/b&gt;"),
        "{html}"
    );
    assert!(!html.contains("<b>bounds"), "a title is text");
    for asset in ["chart.umd.min.js", "chart.js-LICENSE.md", "history.js", "history.css"] {
        assert!(page.join("assets").join(asset).is_file(), "no {asset}");
    }

    // A maintainer accepts main as the new reference: the chain starts again, within budget.
    let reset = history(
        work,
        &[
            "history",
            "reset",
            "--repo",
            repo,
            "--reference",
            "main",
            "--reason",
            "accepted",
            "--by",
            "lead",
        ],
        &dir,
    );
    assert_eq!(reset.code, 0, "{}", reset.stderr);
    let main = fixture.repo.git(&["rev-parse", "main"]).trim().to_owned();
    let reference = history(work, &["history", "reference"], &dir);
    assert_eq!(reference.stdout.trim(), main);
    let check = history(work, &["history", "check", "--repo", repo, "--at", "main"], &dir);
    assert_eq!(check.code, 0, "{}\n{}", check.stdout, check.stderr);
    assert!(check.stdout.starts_with("reference main ("), "{}", check.stdout);

    // The run, recorded as an anchor from that reference (main) to its head, which holds PR 7.
    let ci = work.join("ci");
    let anchor = history(
        work,
        &[
            "history",
            "anchor",
            "--repo",
            repo,
            "--plan",
            ci.join("state/plan.json").to_str().expect("UTF-8"),
            "--results",
            ci.join("results").to_str().expect("UTF-8"),
        ],
        &dir,
    );
    assert_eq!(anchor.code, 0, "{}", anchor.stderr);
    assert!(anchor.stderr.contains("1 merged PR(s) held"), "{}", anchor.stderr);
    let json = history(work, &["history", "check", "--repo", repo, "--format", "json"], &dir);
    let state: Value = serde_json::from_str(&json.stdout).expect("JSON");
    // One check a cell it measured: the speed cell and the accuracy benchmark.
    assert_eq!(state["history"]["anchors"].as_array().map(Vec::len), Some(2), "{state}");

    // An anchor from another reference is refused.
    let other = history(
        work,
        &["history", "reset", "--repo", repo, "--reference", "pr", "--reason", "another"],
        &dir,
    );
    assert_eq!(other.code, 0, "{}", other.stderr);
    let refused = history(
        work,
        &[
            "history",
            "anchor",
            "--repo",
            repo,
            "--plan",
            ci.join("state/plan.json").to_str().expect("UTF-8"),
            "--results",
            ci.join("results").to_str().expect("UTF-8"),
        ],
        &dir,
    );
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains("but the reference is"), "{}", refused.stderr);
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

#[test]
fn a_ledger_that_cannot_be_read_is_an_error_never_no_drift() {
    let work = tempfile::tempdir().expect("a temporary directory");
    let dir = work.path().join("history");
    std::fs::create_dir_all(&dir).expect("the folder");
    std::fs::write(dir.join("ledger.jsonl"), format!("{}\n{{\"version\":2}}\n", small_loss(1)))
        .expect("the ledger");
    let run = history(work.path(), &["history", "reference"], &dir);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(run.stderr.contains("ledger.jsonl, line 2:"), "{}", run.stderr);
    // Nothing recorded on top of it.
    let record = history(
        work.path(),
        &["history", "record", "--pr", "9", "--head", &"a".repeat(40), "--merge", &"b".repeat(40)],
        &dir,
    );
    assert_eq!(record.code, 2, "{}", record.stderr);
    // PRGATE_HISTORY_DIR names the folder; empty (an unset repository variable) it names none.
    let named = prgate_with_env(
        work.path(),
        &["history", "reference", "--node", "/nonexistent/node.toml"],
        &[("PRGATE_HISTORY_DIR", dir.to_str().expect("UTF-8"))],
    );
    assert!(named.stderr.contains("ledger.jsonl, line 2:"), "{}", named.stderr);
    let empty = prgate_with_env(
        work.path(),
        &["history", "reference", "--node", "/nonexistent/node.toml"],
        &[("PRGATE_HISTORY_DIR", "")],
    );
    assert_eq!(empty.code, 2);
    assert!(
        empty.stderr.contains("reading the node profile /nonexistent/node.toml"),
        "{}",
        empty.stderr
    );
    let bad = history(
        work.path(),
        &["history", "record", "--pr", "9", "--head", "abc", "--merge", "abc"],
        &dir,
    );
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("--merge \"abc\" is not a full commit SHA"), "{}", bad.stderr);
}

#[test]
fn a_reference_that_names_no_commit_is_refused_by_its_flag() {
    let repo = crate::support::Repo::standard();
    let path = repo.path().to_str().expect("UTF-8");
    let work = tempfile::tempdir().expect("a temporary directory");
    let dir = work.path().join("history");
    let reset = history(
        work.path(),
        &["history", "reset", "--repo", path, "--reference", "v9", "--reason", "a release"],
        &dir,
    );
    assert_eq!(reset.code, 2, "{}", reset.stderr);
    assert!(reset.stderr.contains("--reference 'v9': no such commit in"), "{}", reset.stderr);
    assert!(!dir.join("ledger.jsonl").exists(), "nothing written");
    let check = history(work.path(), &["history", "check", "--repo", path, "--at", "v9"], &dir);
    assert_eq!(check.code, 2, "{}", check.stderr);
    assert!(check.stderr.contains("--at 'v9': no such commit in"), "{}", check.stderr);
    // A tag names its commit: the reset is written with the tag's name.
    repo.git(&["tag", "v9"]);
    let tagged = history(
        work.path(),
        &["history", "reset", "--repo", path, "--reference", "v9", "--reason", "a release"],
        &dir,
    );
    assert_eq!(tagged.code, 0, "{}", tagged.stderr);
    let ledger = std::fs::read_to_string(dir.join("ledger.jsonl")).expect("the ledger");
    assert!(ledger.contains(r#""reference_name":"v9""#), "{ledger}");
}
