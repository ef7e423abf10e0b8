//! `prgate ci` end to end: a real repository, the runner on simulated servers, and a stand-in
//! for GitHub's API (wiremock) that keeps the PR's comments and statuses as GitHub would, so
//! the test reads their history: pending, progress, final; and a run killed midway ends as
//! `error`, not pending.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wiremock::matchers::{method, path, path_regex};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::run::{Fixture, Sample, TWO_PAIRS, settle, signal, wait_at_most};

/// What the stand-in GitHub holds: the PR's comments and every status and comment change.
#[derive(Debug, Default)]
pub(crate) struct Repository {
    pub(crate) comments: Vec<(u64, String)>,
    /// `created` or `edited`, and the body.
    pub(crate) comment_history: Vec<(&'static str, String)>,
    /// The states posted, in order, with their descriptions.
    pub(crate) statuses: Vec<(String, String)>,
}

#[derive(Clone, Default)]
pub(crate) struct GitHub(Arc<Mutex<Repository>>);

impl GitHub {
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut Repository) -> T) -> T {
        f(&mut self.0.lock().expect("the stand-in's state"))
    }
}

struct ListComments(GitHub);
impl Respond for ListComments {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        // The first page is asked without `page=` (later ones through the `Link` header).
        let first_page =
            request.url.query_pairs().all(|(key, value)| key != "page" || value == "1");
        let comments: Vec<Value> = if first_page {
            self.0.with(|repo| {
                repo.comments
                    .iter()
                    .map(|(id, body)| json!({ "id": id, "body": body, "user": { "login": "prgate-bot" } }))
                    .collect()
            })
        } else {
            Vec::new()
        };
        ResponseTemplate::new(200).set_body_json(Value::Array(comments))
    }
}

struct CreateComment(GitHub);
impl Respond for CreateComment {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).expect("JSON");
        let text = body["body"].as_str().expect("a body").to_owned();
        let id = self.0.with(|repo| {
            let id = 1000 + repo.comments.len() as u64;
            repo.comments.push((id, text.clone()));
            repo.comment_history.push(("created", text.clone()));
            id
        });
        ResponseTemplate::new(201)
            .set_body_json(json!({ "id": id, "body": text, "user": { "login": "prgate-bot" } }))
    }
}

struct EditComment(GitHub);
impl Respond for EditComment {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let id: u64 =
            request.url.path().rsplit('/').next().and_then(|id| id.parse().ok()).expect("an id");
        let body: Value = serde_json::from_slice(&request.body).expect("JSON");
        let text = body["body"].as_str().expect("a body").to_owned();
        self.0.with(|repo| {
            if let Some(comment) = repo.comments.iter_mut().find(|(known, _)| *known == id) {
                comment.1 = text.clone();
            }
            repo.comment_history.push(("edited", text.clone()));
        });
        ResponseTemplate::new(200)
            .set_body_json(json!({ "id": id, "body": text, "user": { "login": "prgate-bot" } }))
    }
}

struct SetStatus(GitHub);
impl Respond for SetStatus {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).expect("JSON");
        let state = body["state"].as_str().expect("a state").to_owned();
        let description = body["description"].as_str().unwrap_or_default().to_owned();
        self.0.with(|repo| repo.statuses.push((state, description)));
        ResponseTemplate::new(201).set_body_json(body)
    }
}

/// The stand-in for PR #7 of amd/mono, whose head is the fixture's PR commit.
pub(crate) async fn stand_in(fixture: &Fixture) -> (MockServer, GitHub, String) {
    let server = MockServer::start().await;
    let github = GitHub::default();
    let head = fixture.repo.git(&["rev-parse", "pr"]).trim().to_owned();
    let base = fixture.repo.git(&["rev-parse", "main"]).trim().to_owned();
    let get = |route: &str, body: Value| {
        Mock::given(method("GET"))
            .and(path(route.to_owned()))
            .respond_with(ResponseTemplate::new(200).set_body_json(body))
    };
    get(
        "/repos/amd/mono/collaborators/lead/permission",
        json!({ "permission": "write", "role_name": "maintain" }),
    )
    .mount(&server)
    .await;
    get(
        "/repos/amd/mono/pulls/7",
        json!({
            "number": 7, "title": "[Fix] alpha: bounds-check every row",
            "head": { "ref": "pr", "sha": head }, "base": { "ref": "main", "sha": base },
            "changed_files": 1,
        }),
    )
    .mount(&server)
    .await;
    get(
        "/repos/amd/mono/pulls/7/files",
        json!([{ "filename": "pkg/models/alpha/layer.py", "status": "modified" }]),
    )
    .mount(&server)
    .await;
    get("/user", json!({ "login": "prgate-bot" })).mount(&server).await;
    Mock::given(method("DELETE"))
        .and(path("/repos/amd/mono/issues/7/labels/run-ci"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([])))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/repos/amd/mono/issues/7/comments"))
        .respond_with(ListComments(github.clone()))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/repos/amd/mono/issues/7/comments"))
        .respond_with(CreateComment(github.clone()))
        .mount(&server)
        .await;
    Mock::given(method("PATCH"))
        .and(path_regex(r"^/repos/amd/mono/issues/comments/[0-9]+$"))
        .respond_with(EditComment(github.clone()))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("/repos/amd/mono/statuses/{head}")))
        .respond_with(SetStatus(github.clone()))
        .mount(&server)
        .await;
    (server, github, head)
}

/// `prgate ci` on the labelled event, started and left running.
pub(crate) fn spawn_ci(
    fixture: &Fixture,
    server: &MockServer,
    head: &str,
    extra: &[&str],
) -> Child {
    let work = fixture.work.path();
    let event = json!({
        "action": "labeled", "label": { "name": "run-ci" }, "sender": { "login": "lead" },
        "pull_request": { "number": 7, "head": { "sha": head } },
    });
    let event_path = work.join("event.json");
    std::fs::write(&event_path, event.to_string()).expect("the event");
    let path = |path: &Path| path.to_str().expect("UTF-8").to_owned();
    Command::new(env!("CARGO_BIN_EXE_prgate"))
        .args([
            "ci",
            "--event",
            &path(&event_path),
            "--repository",
            "amd/mono",
            "--repo",
            &path(fixture.repo.path()),
            "--node",
            &path(&fixture.node),
            "--work",
            &path(&work.join("ci")),
            "--isolation",
            "host",
            "--trust-pr-code",
            "--preflight",
            "off",
            "--update-every",
            "1s",
            "--run-url",
            "https://github.com/amd/mono/actions/runs/1",
        ])
        .args(extra)
        .env("GITHUB_API_URL", server.uri())
        .env("GITHUB_TOKEN", "test-token")
        .env("PRGATE_RETRY_BACKOFF_MS", "10")
        .env_remove("GITHUB_ACTIONS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("prgate ci starts")
}

pub(crate) fn output(child: Child) -> (i32, String) {
    let output = child.wait_with_output().expect("prgate ci ends");
    (output.status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stderr).into_owned())
}

#[tokio::test(flavor = "multi_thread")]
async fn ci_posts_pending_then_progress_then_the_verdict_on_one_comment() {
    // Slow enough tokens that the comment is edited while the run goes.
    let fixture = Fixture::new(&Sample { output_len: 64, gate: TWO_PAIRS, ..Sample::default() });
    let (server, github, head) = stand_in(&fixture).await;
    let child = spawn_ci(&fixture, &server, &head, &[]);
    let (code, stderr) = tokio::task::spawn_blocking(move || output(child)).await.expect("joined");
    assert_eq!(code, 0, "{stderr}");

    github.with(|repo| {
        // The status: pending at once, then the verdict; never anything after it.
        let states: Vec<&str> = repo.statuses.iter().map(|(state, _)| state.as_str()).collect();
        assert_eq!(states.first(), Some(&"pending"), "{states:?}");
        assert_eq!(states.last(), Some(&"success"), "{:?}", repo.statuses);
        assert!(states[..states.len() - 1].iter().all(|state| *state == "pending"), "{states:?}");
        // One comment, created once with everything waiting, edited as checks finished.
        assert_eq!(repo.comments.len(), 1);
        let history = &repo.comment_history;
        assert_eq!(history[0].0, "created");
        assert!(history[0].1.contains("AMD PR test: running"), "{}", history[0].1);
        assert!(
            history[0].1.contains("0 of 7 steps done, 0 running, 7 waiting."),
            "{}",
            history[0].1
        );
        assert!(history.len() >= 3, "no progress between the first and the last: {history:#?}");
        let middle = &history[1..history.len() - 1];
        assert!(
            middle.iter().any(|(kind, body)| *kind == "edited"
                && body.contains("AMD PR test: running")
                && !body.contains("0 of 7 steps done")),
            "no comment showed finished checks: {middle:#?}"
        );
        let last = &history.last().expect("a final comment").1;
        assert!(last.contains("✅ AMD PR test: pass"), "{last}");
        assert!(!last.contains("### Progress"), "{last}");
        assert_eq!(repo.comments[0].1, *last);
    });
    let work = fixture.work.path().join("ci");
    for file in ["state/trigger.json", "state/plan.json", "verdict.json", "prgate-report.md"] {
        assert!(work.join(file).is_file(), "no {file}");
    }
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_ci_run_killed_midway_ends_as_error_not_pending() {
    let fixture = Fixture::new(&Sample { output_len: 256, ..Sample::default() });
    let (server, github, head) = stand_in(&fixture).await;
    let mut child = spawn_ci(&fixture, &server, &head, &[]);
    // Wait until the run is measuring speed, then cancel it as Actions does (SIGTERM).
    let events = fixture.work.path().join("ci/events.jsonl");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let text = std::fs::read_to_string(&events).unwrap_or_default();
        if text.contains("\"step-started\"") && text.contains("\"speed\"") {
            break;
        }
        assert!(child.try_wait().expect("try_wait").is_none(), "prgate ci ended early");
        assert!(Instant::now() < deadline, "the run never reached speed:\n{text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    signal(&child, "TERM");
    let status = tokio::task::spawn_blocking(move || {
        let status = wait_at_most(&mut child, Duration::from_secs(60));
        (status, child)
    })
    .await
    .expect("joined");
    assert!(!status.0.success(), "{:?}", status.0);

    github.with(|repo| {
        let (state, description) = repo.statuses.last().expect("a status");
        assert_eq!(state, "error", "{:?}", repo.statuses);
        assert!(description.contains("SIGTERM"), "{description}");
        let last = &repo.comment_history.last().expect("a comment").1;
        assert!(last.contains("AMD PR test: error"), "{last}");
        assert!(last.contains("prgate could not finish"), "{last}");
        // What was done and what was not.
        assert!(last.contains("### Progress"), "{last}");
    });
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

/// `prgate ci --stage ...` with the stand-in's environment; returns the exit code and stderr.
fn stage(fixture: &Fixture, server: &MockServer, args: &[&str]) -> (i32, String) {
    let work = fixture.work.path().join("ci");
    let output = Command::new(env!("CARGO_BIN_EXE_prgate"))
        .arg("ci")
        .args(args)
        .args(["--repository", "amd/mono", "--work", work.to_str().expect("UTF-8")])
        .args(["--repo", fixture.repo.path().to_str().expect("UTF-8")])
        .current_dir(fixture.work.path())
        .env("GITHUB_API_URL", server.uri())
        .env("GITHUB_TOKEN", "test-token")
        .env("PRGATE_RETRY_BACKOFF_MS", "10")
        .env_remove("GITHUB_ACTIONS")
        .stdin(Stdio::null())
        .output()
        .expect("prgate ci runs");
    (output.status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stderr).into_owned())
}

/// The labelled event of PR #7 at `head`, written into the fixture's folder.
fn event_file(fixture: &Fixture, head: &str) -> String {
    let event = json!({
        "action": "labeled", "label": { "name": "run-ci" }, "sender": { "login": "lead" },
        "pull_request": { "number": 7, "head": { "sha": head } },
    });
    let path = fixture.work.path().join("event.json");
    std::fs::write(&path, event.to_string()).expect("the event");
    path.to_str().expect("UTF-8").to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_two_node_stages_start_run_and_finish_post_one_verdict() {
    let fixture = Fixture::new(&Sample { gate: TWO_PAIRS, ..Sample::default() });
    let (server, github, head) = stand_in(&fixture).await;
    let event = event_file(&fixture, &head);
    // Two nodes; the second cannot run the sample's recipe (other hardware).
    let nodes = fixture.work.path().join("nodes.toml");
    std::fs::write(
        &nodes,
        "[[node]]\nname = \"ci-node\"\nhardware = \"cpu-sim\"\n\n[[node]]\nname = \"gpu-box\"\nhardware = \"mi355x\"\n",
    )
    .expect("nodes.toml");
    let node = fixture.node.to_str().expect("UTF-8").to_owned();
    let server_ref = &server;
    let fixture_ref = &fixture;
    let run = |args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        stage(fixture_ref, server_ref, &args)
    };
    let owned = |args: &[&str]| args.iter().map(|arg| (*arg).to_owned()).collect::<Vec<_>>();

    let (code, stderr) = tokio::task::block_in_place(|| {
        run(owned(&[
            "--stage",
            "start",
            "--event",
            &event,
            "--nodes",
            nodes.to_str().expect("UTF-8"),
        ]))
    });
    assert_eq!(code, 0, "{stderr}");
    let state = fixture.work.path().join("ci/state");
    let names: Value = serde_json::from_str(
        &std::fs::read_to_string(state.join("nodes.json")).expect("nodes.json"),
    )
    .expect("JSON");
    assert_eq!(names, json!(["ci-node"]), "only the node with work");
    github.with(|repo| {
        assert_eq!(repo.statuses.last().map(|(state, _)| state.as_str()), Some("pending"));
        assert_eq!(repo.comment_history.len(), 1);
        let first = &repo.comment_history[0].1;
        // The nodes file gives no GPU count: the estimate counts one server at a time (the
        // upper bound: 2 + 2n loads, 2n + 1 blocks of 2 runs a cell, no memory API named) and
        // three repeats of its accuracy benchmark a side (two reloads for the rounds after the
        // first). The sample's speed runs ask 32 tokens (5h24m when they asked 8).
        assert!(first.contains("| Estimate | about 5h25m"), "{first}");
        assert!(first.contains("on 1 node"), "{first}");
    });

    // The node job: no GitHub call.
    let before = server.received_requests().await.map(|requests| requests.len());
    let (code, stderr) = tokio::task::block_in_place(|| {
        run(owned(&[
            "--stage",
            "run",
            "--node",
            &node,
            "--isolation",
            "host",
            "--trust-pr-code",
            "--preflight",
            "off",
        ]))
    });
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(server.received_requests().await.map(|requests| requests.len()), before);
    let results = fixture.work.path().join("ci/results/ci-node");
    assert!(results.join("evidence/alpha.routing.pr.json").is_file());

    let (code, stderr) = tokio::task::block_in_place(|| {
        run(owned(&[
            "--stage",
            "finish",
            "--evidence",
            results.to_str().expect("UTF-8"),
            "--jobs",
            "success",
        ]))
    });
    assert_eq!(code, 0, "{stderr}");
    github.with(|repo| {
        assert_eq!(repo.statuses.last().map(|(state, _)| state.as_str()), Some("success"));
        let last = &repo.comment_history.last().expect("a comment").1;
        assert!(last.contains("✅ AMD PR test: pass"), "{last}");
        assert_eq!(repo.comments.len(), 1, "one comment, edited");
    });

    // A node job that failed: the finish stage posts error, never a verdict of half the run.
    let (code, stderr) =
        tokio::task::block_in_place(|| run(owned(&["--stage", "finish", "--jobs", "failure"])));
    assert_eq!(code, 2, "{stderr}");
    github.with(|repo| {
        let (state, description) = repo.statuses.last().expect("a status");
        assert_eq!(state, "error", "{description}");
        assert!(description.contains("failure"), "{description}");
        let last = &repo.comment_history.last().expect("a comment").1;
        assert!(last.contains("prgate could not finish"), "{last}");
    });
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

#[tokio::test(flavor = "multi_thread")]
async fn ci_runs_on_the_configured_executor_slurm() {
    crate::slurm::require_slurm();
    let fixture = Fixture::new(&Sample { gate: TWO_PAIRS, ..Sample::default() });
    let (server, github, head) = stand_in(&fixture).await;
    let child = spawn_ci(&fixture, &server, &head, &["--executor", "slurm"]);
    let (code, stderr) = tokio::task::spawn_blocking(move || output(child)).await.expect("joined");
    assert_eq!(code, 0, "{stderr}");
    let results = fixture.work.path().join("ci/results");
    // The model ran as a SLURM job, and its evidence was gathered.
    assert!(results.join("slurm/run-id").is_file(), "no SLURM run");
    assert!(results.join("evidence/alpha.routing.pr.json").is_file());
    github.with(|repo| {
        assert_eq!(repo.statuses.last().map(|(state, _)| state.as_str()), Some("success"));
        let last = &repo.comment_history.last().expect("a comment").1;
        assert!(last.contains("✅ AMD PR test: pass"), "{last}");
    });
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_run_ci_on_the_same_commits_reuses_what_the_first_judged_and_says_so() {
    let fixture = Fixture::new(&Sample { gate: TWO_PAIRS, ..Sample::default() });
    let (server, github, head) = stand_in(&fixture).await;
    let child = spawn_ci(&fixture, &server, &head, &[]);
    let (code, stderr) = tokio::task::spawn_blocking(move || output(child)).await.expect("joined");
    assert_eq!(code, 0, "{stderr}");
    let first = github.with(|repo| repo.comments[0].1.clone());
    assert!(!first.contains("Re-run"), "{first}");
    assert!(first.contains("| GPU time | alpha \\(2 GPUs\\): "), "{first}");
    // The workflow's next job starts in an empty work folder; the node keeps its store.
    std::fs::remove_dir_all(fixture.work.path().join("ci")).expect("the work folder is gone");
    let child = spawn_ci(&fixture, &server, &head, &[]);
    let (code, stderr) = tokio::task::spawn_blocking(move || output(child)).await.expect("joined");
    assert_eq!(code, 0, "{stderr}");
    github.with(|repo| {
        assert_eq!(repo.comments.len(), 1, "the one comment is edited");
        let last = &repo.comments[0].1;
        assert!(last.contains("✅ AMD PR test: pass"), "{last}");
        // The run's page is shown as text, made inert as a link (text from the node is data).
        let row = last.lines().find(|line| line.starts_with("| Re-run | ")).expect("a Re-run row");
        assert!(row.starts_with("| Re-run | 14 of 14 steps reused from run https"), "{row}");
        assert!(row.contains("//github.com/amd/mono/actions/runs/1 "), "{row}");
        assert!(row.ends_with("\\(their inputs unchanged\\); nothing ran again. |"), "{row}");
        assert_eq!(repo.statuses.last().map(|(state, _)| state.as_str()), Some("success"));
    });
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_start_stage_schedules_around_a_drained_node_and_the_comment_says_so() {
    let fixture = Fixture::new(&Sample { gate: TWO_PAIRS, ..Sample::default() });
    let (server, github, head) = stand_in(&fixture).await;
    let event = event_file(&fixture, &head);
    // Two nodes that could both run it; the health ledger (the profile's cache-dir/health)
    // drained the first.
    let nodes = fixture.work.path().join("nodes.toml");
    std::fs::write(
        &nodes,
        "[[node]]\nname = \"ci-node\"\nhardware = \"cpu-sim\"\n\n[[node]]\nname = \"ci-node-2\"\nhardware = \"cpu-sim\"\n",
    )
    .expect("nodes.toml");
    let node = fixture.node.to_str().expect("UTF-8").to_owned();
    let drain = crate::support::prgate(
        fixture.work.path(),
        &["node", "drain", "--node", &node, "--name", "ci-node", "--reason", "3 strikes within 7d"],
    );
    assert_eq!(drain.code, 0, "{}", drain.stderr);
    // The workflow's step: the nodes file without the drained node.
    let filter = crate::support::prgate(
        fixture.work.path(),
        &["node", "filter", "--node", &node, "--nodes", nodes.to_str().expect("UTF-8")],
    );
    assert_eq!(filter.code, 0, "{}", filter.stderr);
    let filtered = fixture.work.path().join("prgate-nodes.toml");
    std::fs::write(&filtered, &filter.stdout).expect("the filtered nodes");

    let args = [
        "--stage",
        "start",
        "--event",
        &event,
        "--nodes",
        filtered.to_str().expect("UTF-8"),
        "--node",
        &node,
    ];
    let (code, stderr) = tokio::task::block_in_place(|| stage(&fixture, &server, &args));
    assert_eq!(code, 0, "{stderr}");
    let state = fixture.work.path().join("ci/state");
    let names: Value = serde_json::from_str(
        &std::fs::read_to_string(state.join("nodes.json")).expect("nodes.json"),
    )
    .expect("JSON");
    assert_eq!(names, json!(["ci-node-2"]), "the work goes to the node that is not drained");
    github.with(|repo| {
        let first = &repo.comment_history[0].1;
        assert!(
            first.contains("| Drained | `ci-node` (3 strikes within 7d): left out of this run |"),
            "{first}"
        );
    });
}

/// The sample, after which main tightens the recipe of the model the PR runs: a file that
/// judges the PR moved on the base branch since it branched.
fn base_moved_fixture() -> Fixture {
    let fixture = Fixture::new(&Sample { gate: TWO_PAIRS, ..Sample::default() });
    tighten_main(&fixture);
    fixture
}

/// Main tightens alpha's recipe (the working tree stays on the PR).
fn tighten_main(fixture: &Fixture) {
    fixture.repo.git(&["checkout", "-q", "main"]);
    let recipe = std::fs::read_to_string(fixture.repo.path().join("test/e2e/alpha.toml"))
        .expect("alpha's recipe");
    fixture.repo.write("test/e2e/alpha.toml", &format!("{recipe}\n# stricter\n"));
    fixture.repo.commit("main tightens alpha");
    fixture.repo.git(&["checkout", "-q", "pr"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pr_whose_judging_files_moved_on_base_is_not_run_and_fails_saying_update_the_branch() {
    let fixture = base_moved_fixture();
    let (server, github, head) = stand_in(&fixture).await;
    let child = spawn_ci(&fixture, &server, &head, &[]);
    let (code, stderr) = tokio::task::spawn_blocking(move || output(child)).await.expect("joined");
    assert_eq!(code, 1, "{stderr}");
    // No GPU work: no server started, no step of the run recorded.
    let work = fixture.work.path().join("ci");
    assert!(!work.join("events.jsonl").exists(), "the run started");
    assert!(!work.join("results/evidence").exists(), "the run recorded steps");
    let verdict: Value = serde_json::from_str(
        &std::fs::read_to_string(work.join("verdict.json")).expect("the verdict"),
    )
    .expect("JSON");
    assert_eq!(verdict["result"], "fail", "{verdict:#}");
    github.with(|repo| {
        let (state, description) = repo.statuses.last().expect("a status");
        assert_eq!(state, "failure", "{:?}", repo.statuses);
        assert!(description.contains("base-moved"), "{description}");
        let last = &repo.comment_history.last().expect("a comment").1;
        assert!(last.contains("test/e2e/alpha.toml changed on the base branch"), "{last}");
        assert!(last.contains("update the branch"), "{last}");
        assert!(last.contains("not started"), "{last}");
    });
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_two_node_stages_schedule_a_pr_whose_base_moved_on_no_node_and_fail_it() {
    let fixture = base_moved_fixture();
    let (server, github, head) = stand_in(&fixture).await;
    let event = event_file(&fixture, &head);
    let nodes = fixture.work.path().join("nodes.toml");
    std::fs::write(&nodes, "[[node]]\nname = \"ci-node\"\nhardware = \"cpu-sim\"\n")
        .expect("nodes.toml");
    let args = ["--stage", "start", "--event", &event, "--nodes", nodes.to_str().expect("UTF-8")];
    let (code, stderr) = tokio::task::block_in_place(|| stage(&fixture, &server, &args));
    assert_eq!(code, 0, "{stderr}");
    let state = fixture.work.path().join("ci/state");
    let names = std::fs::read_to_string(state.join("nodes.json")).expect("nodes.json");
    assert_eq!(names.trim(), "[]", "no node has work");
    // The workflow skips the node jobs and finishes with what it has.
    let args = ["--stage", "finish", "--jobs", "skipped"];
    let (code, stderr) = tokio::task::block_in_place(|| stage(&fixture, &server, &args));
    assert_eq!(code, 1, "{stderr}");
    github.with(|repo| {
        let (state, description) = repo.statuses.last().expect("a status");
        assert_eq!(state, "failure", "{description}");
        assert!(description.contains("base-moved"), "{description}");
        let last = &repo.comment_history.last().expect("a comment").1;
        assert!(last.contains("not started"), "{last}");
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_base_moved_after_githubs_base_sha_is_read_from_the_checkouts_base_branch() {
    let fixture = Fixture::new(&Sample { gate: TWO_PAIRS, ..Sample::default() });
    // GitHub's base.sha is main as the PR last saw it; main moved on after.
    let (server, github, head) = stand_in(&fixture).await;
    let stale = fixture.repo.git(&["rev-parse", "main"]).trim().to_owned();
    tighten_main(&fixture);
    let child = spawn_ci(&fixture, &server, &head, &[]);
    let (code, stderr) = tokio::task::spawn_blocking(move || output(child)).await.expect("joined");
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains(&format!("past GitHub's base.sha {stale}")), "{stderr}");
    let plan: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture.work.path().join("ci/state/plan.json")).expect("plan"),
    )
    .expect("JSON");
    let tip = fixture.repo.git(&["rev-parse", "main"]).trim().to_owned();
    assert_eq!(plan["base"]["sha"], tip.as_str(), "{plan:#}");
    github.with(|repo| {
        let (state, description) = repo.statuses.last().expect("a status");
        assert_eq!(state, "failure", "{description}");
        assert!(description.contains("base-moved"), "{description}");
    });
}
