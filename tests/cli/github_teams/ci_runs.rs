//! `prgate ci` as teams run it: merge-queue groups pinned to the queue's commit and judged
//! against the PR's last result, one comment and one check run across stages, a status
//! someone else posted, the check run's rerun button, and the comment edited on every
//! progress update.

use super::*;

/// A fixture repository with a merge queue's commit: `main` moved on by `base_change` (a path
/// and its text) after the PR branched, and the queue's merge of `pr` into it. Returns the
/// fixture, the PR's head, the PR's base, the queue's base and the merge commit.
fn queued(base_change: (&str, &str)) -> (crate::run::Fixture, [String; 4]) {
    let fixture = crate::run::Fixture::new(&crate::run::Sample::default());
    let repo = &fixture.repo;
    let rev = |name: &str| repo.git(&["rev-parse", name]).trim().to_owned();
    let (pr_head, pr_base) = (rev("pr"), rev("main"));
    repo.git(&["checkout", "-q", "main"]);
    repo.write(base_change.0, base_change.1);
    let queue_base = repo.commit("main moves on");
    repo.git(&["checkout", "-q", "-b", "gh-readonly-queue/main/pr-7", "main"]);
    repo.git(&["merge", "-q", "--no-ff", "-m", "Merge pull request #7", "pr"]);
    let merge = rev("HEAD");
    (fixture, [pr_head, pr_base, queue_base, merge])
}

/// The real merge_group payload for PR #7 at `pr_head`, merged as `merge` onto `queue_base`.
fn merge_group(pr_head: &str, queue_base: &str, merge: &str) -> Value {
    let mut event = fixture("merge_group.json");
    event["merge_group"]["head_sha"] = json!(merge);
    event["merge_group"]["base_sha"] = json!(queue_base);
    event["merge_group"]["head_ref"] =
        json!(format!("refs/heads/gh-readonly-queue/main/pr-7-{pr_head}"));
    event
}

/// The hub for a queued PR: its head and base, its files from git, and (with `passed`, its
/// creator) the `AMD PR test` success on its head among the real statuses of another context.
async fn queue_hub(
    fixture: &crate::run::Fixture,
    shas: &[String; 4],
    passed: Option<&str>,
) -> (MockServer, Hub) {
    let [pr_head, pr_base, ..] = shas;
    let (server, hub) = hub(pr_head, pr_base, "run-ci").await;
    let files = fixture.repo.git(&["diff", "--name-only", pr_base.as_str(), pr_head.as_str()]);
    hub.with(|state| {
        state.files =
            files.lines().map(|file| json!({ "filename": file, "status": "modified" })).collect();
        let mut statuses: Vec<Value> = fixture_statuses();
        if let Some(creator) = passed {
            let mut ours = statuses[0].clone();
            ours["context"] = json!("AMD PR test");
            ours["state"] = json!("success");
            ours["creator"]["login"] = json!(creator);
            statuses.insert(0, ours);
        }
        state.statuses.insert(pr_head.clone(), statuses);
    });
    (server, hub)
}

fn fixture_statuses() -> Vec<Value> {
    fixture("list-statuses.response.json").as_array().expect("a list").clone()
}

/// `prgate ci` with `args` in the fixture's repository against `server`.
async fn ci(server: &MockServer, fixture: &crate::run::Fixture, args: &[&str]) -> Run {
    let path = |path: &Path| path.to_str().expect("UTF-8").to_owned();
    let mut all: Vec<String> = vec![
        "ci".to_owned(),
        "--repository".to_owned(),
        "amd/mono".to_owned(),
        "--repo".to_owned(),
        path(fixture.repo.path()),
        "--work".to_owned(),
        path(&fixture.work.path().join("ci")),
    ];
    all.extend(args.iter().map(|arg| (*arg).to_owned()));
    prgate(server, all, &[]).await
}

fn write_event(fixture: &crate::run::Fixture, event: &Value) -> String {
    let path = fixture.work.path().join("event.json");
    std::fs::write(&path, event.to_string()).expect("the event");
    path.to_str().expect("UTF-8").to_owned()
}

fn nodes_file(fixture: &crate::run::Fixture) -> String {
    let path = fixture.work.path().join("nodes.toml");
    std::fs::write(&path, "[[node]]\nname = \"ci-node\"\nhardware = \"cpu-sim\"\n").expect("nodes");
    path.to_str().expect("UTF-8").to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_real_merge_group_payload_is_pinned_to_the_queues_commit() {
    let (fixture, shas) = queued(("docs/notes.md", "# notes\n"));
    let [pr_head, _, queue_base, merge] = &shas;
    let (server, _hub) = queue_hub(&fixture, &shas, Some("prgate-bot")).await;
    let (run, dir) = trigger(&server, &merge_group(pr_head, queue_base, merge)).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let pin = pinned(&dir);
    assert_eq!(pin["sha"], merge.as_str());
    assert_eq!(pin["base_sha"], queue_base.as_str());
    assert_eq!(pin["merge_group"]["pr_head"], pr_head.as_str());
    drop(fixture);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_queue_that_adds_nothing_in_the_prs_scope_keeps_its_result() {
    let (fixture, shas) = queued(("docs/notes.md", "# notes\n"));
    let [pr_head, _, queue_base, merge] = &shas;
    let (server, hub) = queue_hub(&fixture, &shas, Some("prgate-bot")).await;
    let event = write_event(&fixture, &merge_group(pr_head, queue_base, merge));
    let node = fixture.node.to_str().expect("UTF-8").to_owned();
    let run = ci(
        &server,
        &fixture,
        &[
            "--event",
            &event,
            "--node",
            &node,
            "--isolation",
            "host",
            "--trust-pr-code",
            "--preflight",
            "off",
        ],
    )
    .await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    hub.with(|state| {
        let status = &state.statuses.get(merge).expect("a status on the merge commit")[0];
        assert_eq!(status["state"], "success", "{status}");
        assert_eq!(status["context"], "AMD PR test");
        let description = status["description"].as_str().expect("text");
        assert!(description.contains(&format!("#7 passed at {}", &pr_head[..7])), "{description}");
        assert!(description.contains("none in the scope"), "{description}");
        assert!(state.comments.is_empty(), "nothing to say on the PR");
    });
    assert!(!fixture.work.path().join("ci/results").exists(), "nothing ran");
}

/// `prgate ci --stage start` on the merge group of `shas` (the PR passed on its head), which
/// must start; the hub and the state folder.
async fn queue_start(fixture: &crate::run::Fixture, shas: &[String; 4]) -> (Hub, PathBuf) {
    let [pr_head, _, queue_base, merge] = shas;
    let (server, hub) = queue_hub(fixture, shas, Some("prgate-bot")).await;
    let event = write_event(fixture, &merge_group(pr_head, queue_base, merge));
    let nodes = nodes_file(fixture);
    let run =
        ci(&server, fixture, &["--stage", "start", "--event", &event, "--nodes", &nodes]).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    (hub, fixture.work.path().join("ci/state"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_queue_that_touches_the_prs_models_runs_them_again_and_says_why() {
    let (fixture, shas) = queued(("pkg/models/alpha/extra.py", "# from the PR ahead\n"));
    let [_, _, _, merge] = &shas;
    let (hub, state_dir) = queue_start(&fixture, &shas).await;
    let plan: Value = serde_json::from_str(
        &std::fs::read_to_string(state_dir.join("plan.json")).expect("plan.json"),
    )
    .expect("JSON");
    assert_eq!(plan["head"]["sha"], merge.as_str());
    let warnings = plan["warnings"].to_string();
    assert!(warnings.contains("merge queue: #7 passed at"), "{warnings}");
    assert!(warnings.contains("alpha run again on the merge commit"), "{warnings}");
    let alpha = plan["models"]
        .as_array()
        .expect("models")
        .iter()
        .find(|model| model["name"] == "alpha")
        .expect("alpha");
    assert_ne!(alpha["tier"], "none", "{alpha}");
    hub.with(|state| {
        assert_eq!(state.statuses.get(merge).expect("a status")[0]["state"], "pending");
    });
    assert_eq!(
        std::fs::read_to_string(state_dir.join("nodes.json")).expect("nodes").trim(),
        "[\"ci-node\"]"
    );
    assert!(!state_dir.join("settled.txt").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_queue_that_changes_what_judges_the_pr_runs_it_again() {
    // CODEOWNERS.rules selects no model and not the common checks, but it judges the PR.
    let (fixture, shas) = queued(("CODEOWNERS.rules", "# the team's own policy: none yet\n"));
    let (_hub, state_dir) = queue_start(&fixture, &shas).await;
    let plan = std::fs::read_to_string(state_dir.join("plan.json")).expect("plan.json");
    assert!(
        plan.contains("but the queue changes CODEOWNERS.rules, which judge it: everything it changes runs again on the merge commit"),
        "{plan}"
    );
    assert!(!state_dir.join("settled.txt").exists());
    assert_eq!(
        std::fs::read_to_string(state_dir.join("nodes.json")).expect("nodes").trim(),
        "[\"ci-node\"]"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_queued_pr_without_a_passing_result_runs_in_full() {
    let (fixture, shas) = queued(("docs/notes.md", "# notes\n"));
    let [pr_head, _, queue_base, merge] = &shas;
    let (server, _hub) = queue_hub(&fixture, &shas, None).await;
    let event = write_event(&fixture, &merge_group(pr_head, queue_base, merge));
    let nodes = nodes_file(&fixture);
    let run =
        ci(&server, &fixture, &["--stage", "start", "--event", &event, "--nodes", &nodes]).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let plan =
        std::fs::read_to_string(fixture.work.path().join("ci/state/plan.json")).expect("plan");
    assert!(plan.contains("has no passing AMD PR test on its head"), "{plan}");
}

#[tokio::test(flavor = "multi_thread")]
async fn ci_with_an_app_token_keeps_one_comment_and_one_check_run_across_stages() {
    let fixture = crate::run::Fixture::new(&crate::run::Sample::default());
    let rev = |name: &str| fixture.repo.git(&["rev-parse", name]).trim().to_owned();
    let (head, base) = (rev("pr"), rev("main"));
    let (server, hub) = hub(&head, &base, "run-ci").await;
    hub.with(|state| state.app = Some("my-app".to_owned()));
    let event = write_event(&fixture, &labeled("lead", "run-ci", &head));
    let nodes = nodes_file(&fixture);
    let start = ["--stage", "start", "--event", &event, "--nodes", &nodes, "--check-run", "on"];
    let run = ci(&server, &fixture, &start).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    // The node job died: the finish stage posts error, on the same comment and check run.
    let run =
        ci(&server, &fixture, &["--stage", "finish", "--jobs", "failure", "--check-run", "on"])
            .await;
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    hub.with(|state| {
        assert_eq!(state.comments.len(), 1, "{:?}", state.comments);
        assert_eq!(state.comments[0].login, "my-app[bot]");
        assert!(
            state.comments[0].body.contains("prgate could not finish"),
            "{}",
            state.comments[0].body
        );
        assert_eq!(state.check_runs.len(), 1, "{:?}", state.check_runs);
        let bodies = state.check_runs.values().next().expect("a check run");
        assert_eq!(bodies.first().expect("created")["status"], "in_progress");
        let last = bodies.last().expect("updated");
        assert_eq!(last["conclusion"], "failure", "{last}");
        // A completed run has the button that starts the test again.
        assert_eq!(last["actions"][0]["identifier"], "prgate-rerun", "{last}");
        assert_eq!(last["actions"][0]["label"], "Re-run");
        assert_eq!(state.statuses[&head][0]["state"], "error");
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_passing_status_someone_else_posted_keeps_nothing() {
    let (fixture, shas) = queued(("docs/notes.md", "# notes\n"));
    let [pr_head, _, queue_base, merge] = &shas;
    // The real status's creator: not prgate's login.
    let (server, _hub) = queue_hub(&fixture, &shas, Some("octokit-fixture-user-a")).await;
    let event = write_event(&fixture, &merge_group(pr_head, queue_base, merge));
    let nodes = nodes_file(&fixture);
    let run =
        ci(&server, &fixture, &["--stage", "start", "--event", &event, "--nodes", &nodes]).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let plan =
        std::fs::read_to_string(fixture.work.path().join("ci/state/plan.json")).expect("plan");
    assert!(plan.contains("posted by octokit-fixture-user-a, not prgate"), "{plan}");
    assert!(!fixture.work.path().join("ci/state/settled.txt").exists());
}

/// A `check_run` `requested_action` event for prgate's "Re-run" button on `head`, by `sender`,
/// shaped as GitHub documents it (a fork's PR is not in `pull_requests`).
fn rerun_clicked(sender: &str, head: &str, identifier: &str, pull_requests: Value) -> Value {
    let mut event = json!({
        "action": "requested_action",
        "check_run": {
            "id": 9000, "name": "AMD PR test details", "head_sha": head, "status": "completed",
            "conclusion": "failure", "pull_requests": pull_requests,
        },
        "requested_action": { "identifier": identifier },
    });
    // The sender and repository as the real payloads carry them.
    let real = fixture("pull_request_labeled.payload.json");
    event["sender"] = real["sender"].clone();
    event["sender"]["login"] = json!(sender);
    event["repository"] = real["repository"].clone();
    event
}

#[tokio::test(flavor = "multi_thread")]
async fn the_check_runs_rerun_button_starts_the_test_again_for_a_maintainer() {
    let (server, hub) = hub(SHA, BASE_SHA, "run-ci").await;
    hub.with(|state| state.labels.clear());
    // A fork's PR: the event names no PR, the commit's pulls do.
    let (run, dir) = trigger(&server, &rerun_clicked("lead", SHA, "prgate-rerun", json!([]))).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(pinned(&dir)["sha"], SHA);
    assert_eq!(pinned(&dir)["number"], 7);
    assert_eq!(hub.requested("DELETE", "/repos/amd/mono/issues/7/labels"), 0, "no label to remove");

    // Someone who may not start runs, and another button: refused.
    hub.with(|state| {
        state.permissions.insert("helper".to_owned(), permission("read", "triage"));
    });
    let named = json!([{ "number": 7, "head": { "sha": SHA } }]);
    let (run, _dir) =
        trigger(&server, &rerun_clicked("helper", SHA, "prgate-rerun", named.clone())).await;
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("helper has the triage (permission read) role"), "{}", run.stderr);
    let asked = hub.with(|state| state.requests.len());
    let (run, _dir) =
        trigger(&server, &rerun_clicked("lead", SHA, "other-app-button", named)).await;
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("not prgate's re-run button"), "{}", run.stderr);
    assert_eq!(hub.with(|state| state.requests.len()), asked, "nothing asked of GitHub");
}

#[tokio::test(flavor = "multi_thread")]
async fn ci_with_an_app_token_edits_one_comment_on_every_progress_update() {
    // Slow enough tokens that the comment is edited while the run goes.
    let sample = crate::run::Sample {
        output_len: 64,
        gate: crate::run::TWO_PAIRS,
        ..crate::run::Sample::default()
    };
    let fixture = crate::run::Fixture::new(&sample);
    let rev = |name: &str| fixture.repo.git(&["rev-parse", name]).trim().to_owned();
    let (head, base) = (rev("pr"), rev("main"));
    let (server, hub) = hub(&head, &base, "run-ci").await;
    hub.with(|state| state.app = Some("my-app".to_owned()));
    let event = write_event(&fixture, &labeled("lead", "run-ci", &head));
    let node = fixture.node.to_str().expect("UTF-8").to_owned();
    let args = [
        "--event",
        &event,
        "--node",
        &node,
        "--isolation",
        "host",
        "--trust-pr-code",
        "--preflight",
        "off",
        "--update-every",
        "1s",
    ];
    let run = ci(&server, &fixture, &args).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    hub.with(|state| {
        assert_eq!(state.comments.len(), 1, "{:?}", state.comments);
        assert_eq!(state.comments[0].login, "my-app[bot]");
        // Created once with the plan; every update after (progress, the verdict) edits it.
        assert!(state.edits >= 1, "the verdict edits it: {} edits", state.edits);
        assert!(state.comments[0].body.contains("AMD PR test: pass"), "{}", state.comments[0].body);
    });
    // Asked once, then kept.
    assert_eq!(hub.requested("GET", "/user"), 1);
    assert_eq!(hub.requested("POST", "/graphql"), 1);
}
