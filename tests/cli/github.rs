//! prgate against a real HTTP server standing in for GitHub's API (wiremock), with payloads
//! shaped like GitHub's documented responses: the trigger's checks, pagination, retries.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use wiremock::matchers::{method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::{Run, prgate_with_env};

const SHA: &str = "1111111111111111111111111111111111111111";
const MOVED: &str = "2222222222222222222222222222222222222222";
const BASE_SHA: &str = "3333333333333333333333333333333333333333";

fn pull_request(head: &str, changed_files: usize) -> Value {
    json!({
        "number": 7, "state": "open", "title": "[Perf] [MI355X] kimi_k31: faster",
        "user": { "login": "author" },
        "head": { "ref": "topic", "sha": head, "repo": { "full_name": "fork/repo" } },
        "base": { "ref": "main", "sha": BASE_SHA, "repo": { "full_name": "amd/mono" } },
        "changed_files": changed_files,
    })
}

fn labeled_event(sender: &str, label: &str) -> Value {
    json!({
        "action": "labeled",
        "label": { "name": label },
        "sender": { "login": sender },
        "pull_request": { "number": 7, "head": { "sha": SHA, "ref": "topic" } },
        "repository": { "full_name": "amd/mono" },
    })
}

fn permission(role: &str) -> Value {
    let permission = match role {
        "admin" => "admin",
        "maintain" | "write" => "write",
        _ => "read",
    };
    json!({ "permission": permission, "role_name": role, "user": { "login": "someone" } })
}

async fn mount_get(server: &MockServer, route: &str, body: Value) {
    Mock::given(method("GET"))
        .and(path(route))
        .respond_with(ResponseTemplate::new(200).set_body_json(body))
        .mount(server)
        .await;
}

async fn mount_files(server: &MockServer, files: Vec<Value>) {
    Mock::given(method("GET"))
        .and(path("/repos/amd/mono/pulls/7/files"))
        .respond_with(ResponseTemplate::new(200).set_body_json(Value::Array(files)))
        .mount(server)
        .await;
}

async fn mount_label_removal(server: &MockServer) {
    Mock::given(method("DELETE"))
        .and(path("/repos/amd/mono/issues/7/labels/run-ci"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([])))
        .expect(1)
        .mount(server)
        .await;
}

/// Runs `prgate trigger` on `event` against `server`, writing into a temporary folder.
async fn trigger(server: &MockServer, event: &Value) -> (Run, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let event_path = dir.path().join("event.json");
    std::fs::write(&event_path, event.to_string()).expect("write the event");
    let uri = server.uri();
    let out: PathBuf = dir.path().join("out");
    let run = tokio::task::spawn_blocking(move || {
        let out = out.to_str().expect("UTF-8").to_owned();
        prgate_with_env(
            Path::new("."),
            &[
                "trigger",
                "--event",
                event_path.to_str().expect("UTF-8"),
                "--repository",
                "amd/mono",
                "--out",
                &out,
            ],
            &[
                ("GITHUB_API_URL", uri.as_str()),
                ("GITHUB_TOKEN", "test-token"),
                ("PRGATE_RETRY_BACKOFF_MS", "10"),
            ],
        )
    })
    .await
    .expect("prgate ran");
    (run, dir)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_maintainer_label_starts_a_run_pinned_to_the_labelled_sha() {
    let server = MockServer::start().await;
    mount_get(&server, "/repos/amd/mono/collaborators/lead/permission", permission("maintain"))
        .await;
    mount_get(&server, "/repos/amd/mono/pulls/7", pull_request(SHA, 2)).await;
    mount_files(&server, vec![
        json!({ "filename": "sgl_amd_mono/models/kimi_k31/layer.py", "status": "modified" }),
        json!({ "filename": "sgl_amd_mono/models/kimi_k31/new.py", "status": "renamed", "previous_filename": "sgl_amd_mono/models/kimi_k3/old.py" }),
    ]).await;
    mount_label_removal(&server).await;

    let (run, dir) = trigger(&server, &labeled_event("lead", "run-ci")).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let pinned: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out/trigger.json")).expect("trigger.json"),
    )
    .expect("JSON");
    assert_eq!(pinned["sha"], SHA);
    assert_eq!(pinned["base_sha"], BASE_SHA);
    assert_eq!(pinned["triggered_by"], "lead");
    assert_eq!(pinned["files_truncated"], false);
    let files = std::fs::read_to_string(dir.path().join("out/files.txt")).expect("files.txt");
    assert_eq!(
        files,
        "sgl_amd_mono/models/kimi_k31/layer.py\nsgl_amd_mono/models/kimi_k31/new.py\nsgl_amd_mono/models/kimi_k3/old.py\n"
    );
    let requests = server.received_requests().await.expect("requests are recorded");
    assert!(requests.iter().all(|request| {
        request
            .headers
            .get("authorization")
            .is_some_and(|auth| auth.to_str().unwrap_or_default().contains("test-token"))
    }));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_labeller_with_triage_only_is_refused_and_the_label_removed() {
    let server = MockServer::start().await;
    mount_get(&server, "/repos/amd/mono/collaborators/helper/permission", permission("triage"))
        .await;
    mount_label_removal(&server).await;
    let (run, _dir) = trigger(&server, &labeled_event("helper", "run-ci")).await;
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr
            .contains("helper has the triage (permission read) role; starting a run needs write, maintain or admin"),
        "{}",
        run.stderr
    );
    let requests = server.received_requests().await.expect("requests are recorded");
    assert!(
        !requests.iter().any(|request| request.url.path() == "/repos/amd/mono/pulls/7"),
        "the PR is not read"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_head_that_moved_after_the_label_stops_the_run() {
    let server = MockServer::start().await;
    mount_get(&server, "/repos/amd/mono/collaborators/lead/permission", permission("admin")).await;
    mount_get(&server, "/repos/amd/mono/pulls/7", pull_request(MOVED, 1)).await;
    mount_label_removal(&server).await;
    let (run, dir) = trigger(&server, &labeled_event("lead", "run-ci")).await;
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains(&format!("the head of #7 moved from {SHA} to {MOVED}")),
        "{}",
        run.stderr
    );
    assert!(!dir.path().join("out/trigger.json").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn other_labels_and_events_start_nothing() {
    let server = MockServer::start().await;
    let (run, _dir) = trigger(&server, &labeled_event("lead", "documentation")).await;
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("the label added is 'documentation', not 'run-ci'"),
        "{}",
        run.stderr
    );
    // GitHub's "Re-run all checks": a check_suite event (the fields GitHub documents for
    // `rerequested`) is no run, not an error.
    let suite = json!({
        "action": "rerequested",
        "check_suite": {"id": 118578147, "head_branch": "changes", "head_sha": SHA, "status": "completed", "pull_requests": [{"number": 7}]},
        "repository": {"full_name": "amd/mono"},
        "sender": {"login": "lead", "type": "User"}
    });
    let (run, _dir) = trigger(&server, &suite).await;
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("prgate: no run: the check_suite event is 'rerequested'"),
        "{}",
        run.stderr
    );
    assert!(
        server.received_requests().await.expect("recorded").is_empty(),
        "nothing asked of GitHub"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn more_files_than_the_api_lists_are_marked_truncated() {
    let server = MockServer::start().await;
    mount_get(&server, "/repos/amd/mono/collaborators/lead/permission", permission("write")).await;
    mount_get(&server, "/repos/amd/mono/pulls/7", pull_request(SHA, 3500)).await;
    // Every page is full: the API stops at 30 pages of 100.
    let page: Vec<Value> = (0..100)
        .map(|n| json!({ "filename": format!("f/{n}.py"), "status": "modified" }))
        .collect();
    let next = format!(
        "<{}/repos/amd/mono/pulls/7/files?per_page=100&page=2>; rel=\"next\"",
        server.uri()
    );
    Mock::given(method("GET"))
        .and(path("/repos/amd/mono/pulls/7/files"))
        .and(query_param("per_page", "100"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(Value::Array(page))
                .insert_header("link", next.as_str()),
        )
        .expect(30)
        .mount(&server)
        .await;
    mount_label_removal(&server).await;
    let (run, dir) = trigger(&server, &labeled_event("lead", "run-ci")).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("plan with --files-truncated"), "{}", run.stdout);
    let pinned: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out/trigger.json")).expect("trigger.json"),
    )
    .expect("JSON");
    assert_eq!(pinned["files_truncated"], true);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_secondary_rate_limit_is_waited_out_as_retry_after_says() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/repos/amd/mono/collaborators/lead/permission"))
        .respond_with(
            ResponseTemplate::new(403)
                .insert_header("retry-after", "1")
                .set_body_json(json!({ "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.", "documentation_url": "https://docs.github.com/rest" })),
        )
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    mount_get(&server, "/repos/amd/mono/collaborators/lead/permission", permission("write")).await;
    mount_get(&server, "/repos/amd/mono/pulls/7", pull_request(SHA, 1)).await;
    mount_files(&server, vec![json!({ "filename": "a.py", "status": "added" })]).await;
    mount_label_removal(&server).await;
    let started = std::time::Instant::now();
    let (run, _dir) = trigger(&server, &labeled_event("lead", "run-ci")).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(started.elapsed() >= std::time::Duration::from_secs(1), "retry-after was honoured");
    assert!(run.stderr.contains("GitHub answered 403 Forbidden to GET"), "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dispatch_names_the_pr_and_the_expected_sha() {
    let server = MockServer::start().await;
    mount_get(&server, "/repos/amd/mono/collaborators/lead/permission", permission("admin")).await;
    mount_get(&server, "/repos/amd/mono/pulls/7", pull_request(SHA, 1)).await;
    mount_files(&server, vec![json!({ "filename": "a.py", "status": "added" })]).await;
    let event = json!({ "inputs": { "pr": "7", "sha": SHA }, "sender": { "login": "lead" } });
    let (run, dir) = trigger(&server, &event).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(dir.path().join("out/trigger.json").exists());
    let requests = server.received_requests().await.expect("recorded");
    assert!(
        !requests.iter().any(|request| request.method.as_str() == "DELETE"),
        "no label to remove"
    );

    let bad = json!({ "inputs": { "pr": "7", "sha": "abc" }, "sender": { "login": "lead" } });
    let (run, _dir) = trigger(&server, &bad).await;
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("the expected head SHA (40 hex digits)"), "{}", run.stderr);
}

/// A plan and a verdict of a real repository, written as files, for `prgate publish`.
struct Published {
    _repo: crate::support::Repo,
    dir: tempfile::TempDir,
    head: String,
}

fn plan_and_verdict() -> Published {
    let repo = crate::support::Repo::standard();
    repo.branch("pr", "main").write("pkg/models/alpha/layer.py", "# faster\n");
    let head = repo.commit("pr");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let plan = crate::support::prgate(
        repo.path(),
        &["plan", "--base", "main", "--head", "pr", "--format", "json"],
    );
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    std::fs::write(dir.path().join("plan.json"), plan.stdout).expect("write the plan");
    std::fs::create_dir(dir.path().join("evidence")).expect("an evidence folder");
    let plan_path = dir.path().join("plan.json");
    let evidence = dir.path().join("evidence");
    let verdict = crate::support::prgate(
        repo.path(),
        &[
            "gate",
            "--plan",
            plan_path.to_str().expect("UTF-8"),
            "--evidence",
            evidence.to_str().expect("UTF-8"),
            "--format",
            "json",
            "--in-progress",
        ],
    );
    // No evidence: not a pass (pending while a run goes; `error` once it is judged final).
    assert!(matches!(verdict.code, 1 | 2), "not a pass: {}", verdict.stderr);
    let parsed: Value = serde_json::from_str(&verdict.stdout).expect("a verdict");
    assert_ne!(parsed["result"], "pass", "{parsed}");
    std::fs::write(dir.path().join("verdict.json"), verdict.stdout).expect("write the verdict");
    Published { _repo: repo, dir, head }
}

fn publish_args(published: &Published) -> Vec<String> {
    let dir = published.dir.path();
    [
        "publish",
        "--repository",
        "amd/mono",
        "--pr",
        "7",
        "--sha",
        &published.head,
        "--bot-login",
        "prgate-bot",
        "--plan",
        dir.join("plan.json").to_str().expect("UTF-8"),
        "--verdict",
        dir.join("verdict.json").to_str().expect("UTF-8"),
        "--title",
        "[Perf] alpha: faster",
    ]
    .iter()
    .map(|arg| (*arg).to_owned())
    .collect()
}

async fn publish(server: &MockServer, args: Vec<String>) -> Run {
    let uri = server.uri();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        prgate_with_env(
            Path::new("."),
            &args,
            &[
                ("GITHUB_API_URL", uri.as_str()),
                ("GITHUB_TOKEN", "test-token"),
                ("PRGATE_RETRY_BACKOFF_MS", "10"),
            ],
        )
    })
    .await
    .expect("prgate ran")
}

fn comment(id: u64, login: &str, body: &str) -> Value {
    json!({ "id": id, "body": body, "user": { "login": login, "type": "Bot" }, "created_at": "2026-11-29T10:00:00Z" })
}

/// The page `page` of a PR's comments: the first is the one without `page=`. A full page
/// links to the next as GitHub does (`Link: <...&page=N+1>; rel="next"`).
async fn mount_comments_page(server: &MockServer, page: &str, comments: Vec<Value>) {
    let number: usize = page.parse().expect("a page number");
    let mut response = ResponseTemplate::new(200).set_body_json(Value::Array(comments.clone()));
    if comments.len() == 100 {
        let next = format!(
            "<{}/repos/amd/mono/issues/7/comments?per_page=100&page={}>; rel=\"next\"",
            server.uri(),
            number + 1
        );
        response = response.insert_header("link", next.as_str());
    }
    Mock::given(method("GET"))
        .and(path("/repos/amd/mono/issues/7/comments"))
        .and(Page(number))
        .respond_with(response)
        .mount(server)
        .await;
}

/// Matches page `N` of a list: `page=N`, or no `page` at all for the first.
struct Page(usize);

impl wiremock::Match for Page {
    fn matches(&self, request: &wiremock::Request) -> bool {
        let page = request.url.query_pairs().find(|(key, _)| key == "page");
        match page {
            Some((_, value)) => value.parse::<usize>().ok() == Some(self.0),
            None => self.0 == 1,
        }
    }
}

async fn mount_status(server: &MockServer, sha: &str) {
    Mock::given(method("POST"))
        .and(path(format!("/repos/amd/mono/statuses/{sha}")))
        .respond_with(
            ResponseTemplate::new(201).set_body_json(json!({ "id": 1, "state": "pending" })),
        )
        .expect(1)
        .mount(server)
        .await;
}

async fn requests(server: &MockServer, verb: &str, route: &str) -> Vec<wiremock::Request> {
    server
        .received_requests()
        .await
        .expect("recorded")
        .into_iter()
        .filter(|request| request.method.as_str() == verb && request.url.path() == route)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_first_comment_is_created_and_the_status_posted_on_the_pinned_sha() {
    let published = plan_and_verdict();
    let server = MockServer::start().await;
    mount_comments_page(&server, "1", vec![]).await;
    Mock::given(method("POST"))
        .and(path("/repos/amd/mono/issues/7/comments"))
        .respond_with(ResponseTemplate::new(201).set_body_json(comment(
            99,
            "prgate-bot",
            "created",
        )))
        .expect(1)
        .mount(&server)
        .await;
    mount_status(&server, &published.head).await;
    let run = publish(&server, publish_args(&published)).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let posted = requests(&server, "POST", "/repos/amd/mono/issues/7/comments").await;
    let body: Value = serde_json::from_slice(&posted[0].body).expect("JSON");
    let text = body["body"].as_str().expect("a body");
    assert!(text.starts_with(prgate_marker()), "{text}");
    assert!(text.chars().count() <= 65_536);
    let status =
        requests(&server, "POST", &format!("/repos/amd/mono/statuses/{}", published.head)).await;
    let status: Value = serde_json::from_slice(&status[0].body).expect("JSON");
    // The verdict of a run still going with no evidence yet: `pending`, never a pass.
    assert_eq!(status["state"], "pending");
    assert_eq!(status["context"], "AMD PR test");
    assert!(status["description"].as_str().expect("a description").chars().count() <= 140);
}

fn prgate_marker() -> &'static str {
    "<!-- prgate:amd-pr-test -->"
}

#[tokio::test(flavor = "multi_thread")]
async fn our_comment_on_page_three_is_edited_and_someone_elses_copy_left_alone() {
    let published = plan_and_verdict();
    let server = MockServer::start().await;
    let others = |start: u64| -> Vec<Value> {
        (start..start + 100).map(|id| comment(id, "reviewer", "LGTM")).collect()
    };
    let mut page_one = others(1);
    // Someone else's comment carrying our marker: never ours to edit.
    page_one[3] = comment(4, "mallory", &format!("{} fake", prgate_marker()));
    mount_comments_page(&server, "1", page_one).await;
    mount_comments_page(&server, "2", others(101)).await;
    mount_comments_page(
        &server,
        "3",
        vec![comment(777, "prgate-bot", &format!("{}\nold run", prgate_marker()))],
    )
    .await;
    Mock::given(method("PATCH"))
        .and(path("/repos/amd/mono/issues/comments/777"))
        .respond_with(ResponseTemplate::new(200).set_body_json(comment(777, "prgate-bot", "new")))
        .expect(1)
        .mount(&server)
        .await;
    mount_status(&server, &published.head).await;
    let run = publish(&server, publish_args(&published)).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        requests(&server, "POST", "/repos/amd/mono/issues/7/comments").await.is_empty(),
        "no new comment"
    );
    assert!(
        requests(&server, "PATCH", "/repos/amd/mono/issues/comments/4").await.is_empty(),
        "mallory's is left alone"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_comment_that_only_someone_else_marked_gets_ours_beside_it() {
    let published = plan_and_verdict();
    let server = MockServer::start().await;
    mount_comments_page(&server, "1", vec![comment(4, "mallory", prgate_marker())]).await;
    Mock::given(method("POST"))
        .and(path("/repos/amd/mono/issues/7/comments"))
        .respond_with(ResponseTemplate::new(201).set_body_json(comment(5, "prgate-bot", "ours")))
        .expect(1)
        .mount(&server)
        .await;
    mount_status(&server, &published.head).await;
    let run = publish(&server, publish_args(&published)).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_502_on_creation_never_yields_two_comments() {
    // The 502 hid a success: GitHub created the comment. prgate looks again and edits it.
    let published = plan_and_verdict();
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/repos/amd/mono/issues/7/comments"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([])))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    mount_comments_page(
        &server,
        "1",
        vec![comment(31, "prgate-bot", &format!("{}\nhalf", prgate_marker()))],
    )
    .await;
    Mock::given(method("POST"))
        .and(path("/repos/amd/mono/issues/7/comments"))
        .respond_with(ResponseTemplate::new(502).set_body_string("Bad Gateway"))
        .mount(&server)
        .await;
    Mock::given(method("PATCH"))
        .and(path("/repos/amd/mono/issues/comments/31"))
        .respond_with(ResponseTemplate::new(200).set_body_json(comment(31, "prgate-bot", "new")))
        .expect(1)
        .mount(&server)
        .await;
    mount_status(&server, &published.head).await;
    let run = publish(&server, publish_args(&published)).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        requests(&server, "POST", "/repos/amd/mono/issues/7/comments").await.len(),
        1,
        "one creation only"
    );

    // The 502 was real: nothing was created, so prgate creates it, once.
    let server = MockServer::start().await;
    mount_comments_page(&server, "1", vec![]).await;
    Mock::given(method("POST"))
        .and(path("/repos/amd/mono/issues/7/comments"))
        .respond_with(ResponseTemplate::new(502).set_body_string("Bad Gateway"))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/repos/amd/mono/issues/7/comments"))
        .respond_with(ResponseTemplate::new(201).set_body_json(comment(32, "prgate-bot", "ours")))
        .mount(&server)
        .await;
    mount_status(&server, &published.head).await;
    let run = publish(&server, publish_args(&published)).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(requests(&server, "POST", "/repos/amd/mono/issues/7/comments").await.len(), 2);
    assert_eq!(
        requests(&server, "GET", "/repos/amd/mono/issues/7/comments").await.len(),
        2,
        "it looked again in between"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unchanged_comment_is_not_sent_again() {
    let published = plan_and_verdict();
    let dir = published.dir.path();
    let rendered = crate::support::prgate(
        Path::new("."),
        &[
            "report",
            "--pr",
            "7",
            "--title",
            "[Perf] alpha: faster",
            "--plan",
            dir.join("plan.json").to_str().expect("UTF-8"),
            "--verdict",
            dir.join("verdict.json").to_str().expect("UTF-8"),
        ],
    );
    assert_eq!(rendered.code, 0, "{}", rendered.stderr);
    let server = MockServer::start().await;
    mount_comments_page(&server, "1", vec![comment(8, "prgate-bot", &rendered.stdout)]).await;
    mount_status(&server, &published.head).await;
    let run = publish(&server, publish_args(&published)).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("Unchanged(8)"), "{}", run.stderr);
    let edits = server
        .received_requests()
        .await
        .expect("recorded")
        .into_iter()
        .filter(|r| r.method.as_str() == "PATCH")
        .count();
    assert_eq!(edits, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn publishing_for_another_sha_than_the_plan_is_refused() {
    let published = plan_and_verdict();
    let server = MockServer::start().await;
    let mut args = publish_args(&published);
    let at = args.iter().position(|arg| arg == "--sha").expect("--sha") + 1;
    args[at] = SHA.to_owned();
    let run = publish(&server, args).await;
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("is not the head the plan was made for"), "{}", run.stderr);
    assert!(server.received_requests().await.expect("recorded").is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn in_actions_the_job_summary_and_annotations_are_written() {
    let published = plan_and_verdict();
    let server = MockServer::start().await;
    mount_comments_page(&server, "1", vec![]).await;
    Mock::given(method("POST"))
        .and(path("/repos/amd/mono/issues/7/comments"))
        .respond_with(ResponseTemplate::new(201).set_body_json(comment(1, "prgate-bot", "x")))
        .mount(&server)
        .await;
    mount_status(&server, &published.head).await;
    let summary = published.dir.path().join("summary.md");
    std::fs::write(&summary, "earlier step\n").expect("write");
    let report = published.dir.path().join("full-report.md");
    let mut args = publish_args(&published);
    args.extend(["--report-out".to_owned(), report.to_str().expect("UTF-8").to_owned()]);
    let uri = server.uri();
    let summary_path = summary.to_str().expect("UTF-8").to_owned();
    let run = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        prgate_with_env(
            Path::new("."),
            &args,
            &[
                ("GITHUB_API_URL", uri.as_str()),
                ("GITHUB_TOKEN", "test-token"),
                ("GITHUB_ACTIONS", "true"),
                ("GITHUB_STEP_SUMMARY", summary_path.as_str()),
            ],
        )
    })
    .await
    .expect("prgate ran");
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let written = std::fs::read_to_string(&summary).expect("the summary");
    assert!(
        written.starts_with("earlier step\n") && written.len() > "earlier step\n".len(),
        "appended: {written}"
    );
    assert!(std::fs::read_to_string(&report).expect("the full report").contains("alpha"));
    assert!(
        run.stdout.lines().any(|line| line.starts_with("::warning")
            || line.starts_with("::error")
            || line.starts_with("::notice")),
        "{}",
        run.stdout
    );
}

#[test]
fn while_a_run_goes_the_comment_shows_its_progress() {
    let published = plan_and_verdict();
    let dir = published.dir.path();
    let progress = dir.join("progress.json");
    std::fs::write(
        &progress,
        r#"{"steps": [
            {"model": "alpha", "check": "unit tests", "state": "done"},
            {"model": "alpha", "check": "E2E speed", "state": "running"},
            {"model": "beta", "check": "unit tests", "state": "waiting"}
        ]}"#,
    )
    .expect("write the progress");
    let plan = dir.join("plan.json");
    let args = [
        "report",
        "--pr",
        "7",
        "--plan",
        plan.to_str().expect("UTF-8"),
        "--progress",
        progress.to_str().expect("UTF-8"),
    ];
    let comment = crate::support::prgate(Path::new("."), &args);
    assert_eq!(comment.code, 0, "{}", comment.stderr);
    assert!(comment.stdout.starts_with(prgate_marker()), "{}", comment.stdout);
    let lower = comment.stdout.to_lowercase();
    assert!(lower.contains("running") && lower.contains("waiting"), "{}", comment.stdout);
    let mut status_args = args.to_vec();
    status_args.extend(["--format", "status"]);
    let status = crate::support::prgate(Path::new("."), &status_args);
    assert!(status.stdout.starts_with("pending: "), "{}", status.stdout);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_head_that_moves_while_the_files_are_read_stops_the_run() {
    let server = MockServer::start().await;
    mount_get(&server, "/repos/amd/mono/collaborators/lead/permission", permission("write")).await;
    Mock::given(method("GET"))
        .and(path("/repos/amd/mono/pulls/7"))
        .respond_with(ResponseTemplate::new(200).set_body_json(pull_request(SHA, 1)))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    mount_get(&server, "/repos/amd/mono/pulls/7", pull_request(MOVED, 1)).await;
    mount_files(&server, vec![json!({ "filename": "docs/a.md", "status": "modified" })]).await;
    mount_label_removal(&server).await;
    let (run, dir) = trigger(&server, &labeled_event("lead", "run-ci")).await;
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("while its files were read"), "{}", run.stderr);
    assert!(!dir.path().join("out/trigger.json").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rate_limited_creation_waits_as_told_and_still_makes_one_comment() {
    let published = plan_and_verdict();
    let server = MockServer::start().await;
    mount_comments_page(&server, "1", vec![]).await;
    Mock::given(method("POST"))
        .and(path("/repos/amd/mono/issues/7/comments"))
        .respond_with(
            ResponseTemplate::new(403)
                .insert_header("retry-after", "1")
                .set_body_json(json!({ "message": "You have exceeded a secondary rate limit." })),
        )
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/repos/amd/mono/issues/7/comments"))
        .respond_with(ResponseTemplate::new(201).set_body_json(comment(40, "prgate-bot", "ours")))
        .mount(&server)
        .await;
    mount_status(&server, &published.head).await;
    let started = std::time::Instant::now();
    let run = publish(&server, publish_args(&published)).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(started.elapsed() >= std::time::Duration::from_secs(1), "retry-after was honoured");
    assert_eq!(requests(&server, "POST", "/repos/amd/mono/issues/7/comments").await.len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_error_is_posted_as_the_error_state_and_pins_are_checked() {
    let published = plan_and_verdict();
    let server = MockServer::start().await;
    mount_comments_page(&server, "1", vec![]).await;
    Mock::given(method("POST"))
        .and(path("/repos/amd/mono/issues/7/comments"))
        .respond_with(ResponseTemplate::new(201).set_body_json(comment(41, "prgate-bot", "ours")))
        .mount(&server)
        .await;
    mount_status(&server, &published.head).await;
    let mut args = publish_args(&published);
    args.extend(["--error".to_owned(), "the runner was cancelled".to_owned()]);
    let run = publish(&server, args).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let status =
        requests(&server, "POST", &format!("/repos/amd/mono/statuses/{}", published.head)).await;
    let status: Value = serde_json::from_slice(&status[0].body).expect("JSON");
    assert_eq!(status["state"], "error");
    assert!(
        status["description"].as_str().expect("text").contains("the runner was cancelled"),
        "{status}"
    );

    // A trigger that pinned another commit, or a SHA that is not one, is refused before any call.
    let trigger_file = published.dir.path().join("trigger.json");
    std::fs::write(
        &trigger_file,
        json!({
            "number": 7, "sha": SHA, "title": "t", "base_ref": "main", "base_sha": BASE_SHA,
            "triggered_by": "lead", "files_truncated": false,
        })
        .to_string(),
    )
    .expect("write");
    let quiet = MockServer::start().await;
    let mut args = publish_args(&published);
    args.extend(["--trigger".to_owned(), trigger_file.to_str().expect("UTF-8").to_owned()]);
    let run = publish(&quiet, args).await;
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains(&format!("the trigger pinned #7 at {SHA}")), "{}", run.stderr);
    let mut args = publish_args(&published);
    let at = args.iter().position(|arg| arg == "--sha").expect("--sha") + 1;
    args[at] = "HEAD".to_owned();
    let run = publish(&quiet, args).await;
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("is not a full commit SHA"), "{}", run.stderr);
    assert!(quiet.received_requests().await.expect("recorded").is_empty());
}

/// An event prgate cannot use — here 100,000 objects deep, as a hostile or broken payload
/// could be — is an error (exit 2) that names the event's file, and nothing is written.
#[tokio::test(flavor = "multi_thread")]
async fn an_unusable_deep_event_names_its_file() {
    let server = MockServer::start().await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let event_path = dir.path().join("deep-event.json");
    let depth = 100_000;
    let text = format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
    std::fs::write(&event_path, text).expect("write the event");
    let out = dir.path().join("out");
    let uri = server.uri();
    let (event, out_text) = (event_path.clone(), out.to_str().expect("UTF-8").to_owned());
    let run = tokio::task::spawn_blocking(move || {
        prgate_with_env(
            Path::new("."),
            &[
                "trigger",
                "--event",
                event.to_str().expect("UTF-8"),
                "--repository",
                "amd/mono",
                "--out",
                &out_text,
            ],
            &[("GITHUB_API_URL", uri.as_str()), ("GITHUB_TOKEN", "test-token")],
        )
    })
    .await
    .expect("prgate ran");
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("deep-event.json"), "{}", run.stderr);
    assert!(run.stderr.lines().count() <= 3, "{}", run.stderr);
    assert!(!out.exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_accept_narrowing_label_counts_only_from_a_maintainer_who_is_not_the_author() {
    let cases = [
        ("lead", None),
        (
            "author",
            Some(
                "the accept-narrowing label does not count: author, the PR's author, added it; another maintainer must accept",
            ),
        ),
        (
            "helper",
            Some(
                "the accept-narrowing label does not count: helper added it with the triage (permission read) role; accepting needs write, maintain or admin",
            ),
        ),
    ];
    for (adder, refused) in cases {
        let server = MockServer::start().await;
        for (login, role) in [("lead", "maintain"), ("author", "write"), ("helper", "triage")] {
            let route = format!("/repos/amd/mono/collaborators/{login}/permission");
            mount_get(&server, &route, permission(role)).await;
        }
        let mut pr = pull_request(SHA, 1);
        pr["labels"] = json!([{ "name": "Accept-Narrowing" }]);
        mount_get(&server, "/repos/amd/mono/pulls/7", pr).await;
        mount_files(&server, vec![json!({ "filename": "a.py", "status": "modified" })]).await;
        mount_label_removal(&server).await;
        // The label was added twice; the last to add it is the one who accepts.
        let labeled = |actor: &str| json!({ "event": "labeled", "actor": { "login": actor }, "label": { "name": "accept-narrowing" } });
        let events = json!([labeled("someone-else"), { "event": "unlabeled", "actor": { "login": "x" }, "label": { "name": "accept-narrowing" } }, labeled(adder)]);
        mount_get(&server, "/repos/amd/mono/issues/7/events", events).await;
        // prgate recorded the acceptance on this head (`prgate accept`).
        mount_get(&server, "/user", json!({ "login": "prgate-bot" })).await;
        let accepted = json!([{ "context": "AMD PR test / accept-narrowing", "state": "success", "creator": { "login": "prgate-bot" } }]);
        mount_get(&server, &format!("/repos/amd/mono/commits/{SHA}/statuses"), accepted).await;

        let (run, dir) = trigger(&server, &labeled_event("lead", "run-ci")).await;
        assert_eq!(run.code, 0, "{adder}: {}{}", run.stdout, run.stderr);
        let pinned: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("out/trigger.json")).expect("trigger.json"),
        )
        .expect("JSON");
        let labels = pinned["labels"].as_array().cloned().unwrap_or_default();
        match refused {
            None => {
                assert_eq!(labels, [json!("Accept-Narrowing")], "{adder}: {pinned:#}");
                assert!(pinned.get("notes").is_none(), "{adder}: {pinned:#}");
            }
            Some(why) => {
                assert!(labels.is_empty(), "{adder}: {pinned:#}");
                assert_eq!(pinned["notes"], json!([why]), "{adder}");
                assert!(run.stderr.contains(why), "{adder}: {}", run.stderr);
            }
        }
    }
}
