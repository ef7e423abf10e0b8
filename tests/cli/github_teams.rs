//! GitHub as teams run it: App installation tokens, merge queues, custom roles, bots, GitHub
//! Enterprise's limits, `Link` pagination, and the Checks API, against a stateful stand-in for
//! GitHub's REST API (a real HTTP server on loopback) fed with real payloads and responses.
//!
//! The payloads and responses are in `tests/fixtures/github/` (their provenance is in
//! `PROVENANCE.md` there): each test takes a real one and changes only the fields it is about
//! (the PR number, the SHAs, the label, the sender).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::support::{Run, prgate_with_env};

const SHA: &str = "1111111111111111111111111111111111111111";
const BASE_SHA: &str = "3333333333333333333333333333333333333333";
const MARKER: &str = "<!-- prgate:amd-pr-test -->";
const REFUSAL_MARKER: &str = "<!-- prgate:amd-pr-test:not-started -->";

/// A real payload or response from `tests/fixtures/github/`.
fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/github").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|_| panic!("{}", path.display()));
    serde_json::from_str(&text).expect("a fixture is JSON")
}

/// The real `pull_request` `labeled` payload as PR #7 of amd/mono at `head`, labelled `label`
/// by `sender` (a `User`).
fn labeled(sender: &str, label: &str, head: &str) -> Value {
    let mut event = fixture("pull_request_labeled.payload.json");
    event["number"] = json!(7);
    event["pull_request"]["number"] = json!(7);
    event["pull_request"]["head"]["sha"] = json!(head);
    event["label"]["name"] = json!(label);
    event["sender"]["login"] = json!(sender);
    event["repository"]["full_name"] = json!("amd/mono");
    event
}

/// One comment as the stand-in keeps it.
#[derive(Debug, Clone)]
struct Comment {
    id: u64,
    login: String,
    body: String,
}

/// What the stand-in GitHub holds, and what it was asked.
#[derive(Debug, Default)]
struct State {
    /// The server's own URL, for the `Link` headers it writes.
    base: String,
    /// Sender login → GitHub's permission answer; absent: 404 (no collaborator).
    permissions: BTreeMap<String, Value>,
    /// Answer this many permission reads with GHES's abuse-detection 403 first.
    abuse: u32,
    pr: Value,
    /// Answer this many reads of the PR with 502 first.
    pr_failures: u32,
    files: Vec<Value>,
    labels: Vec<String>,
    comments: Vec<Comment>,
    /// Comments a page (GitHub's is 100; small here so that a PR has several pages).
    page_size: usize,
    /// The `Link` of the first comments page points here instead, when set.
    foreign_link: Option<String>,
    /// Commit SHA → its statuses, newest first.
    statuses: BTreeMap<String, Vec<Value>>,
    /// Check runs: id → every body sent for it, in order.
    check_runs: BTreeMap<u64, Vec<Value>>,
    /// The token: `None` a user's (login `prgate-bot`); `Some(slug)` an App installation's,
    /// which cannot read `/user` and writes as `slug[bot]`.
    app: Option<String>,
    /// Whether GraphQL answers `viewer` (else 404, as a proxy that passes REST only).
    graphql: bool,
    /// Every request: method and path with query.
    requests: Vec<(String, String)>,
    /// How many times a comment was edited.
    edits: usize,
}

impl State {
    fn author(&self) -> String {
        match &self.app {
            Some(slug) => format!("{slug}[bot]"),
            None => "prgate-bot".to_owned(),
        }
    }

    fn comment_json(comment: &Comment) -> Value {
        // The shape of GitHub's issue comment (octokit/webhooks' issue_comment payload).
        let kind = if comment.login.ends_with("[bot]") { "Bot" } else { "User" };
        json!({
            "id": comment.id, "body": comment.body,
            "user": { "login": comment.login, "type": kind },
            "created_at": "2026-11-29T10:00:00Z",
        })
    }
}

#[derive(Clone, Default)]
struct Hub(Arc<Mutex<State>>);

impl Hub {
    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.0.lock().expect("the stand-in's state"))
    }

    fn requested(&self, verb: &str, prefix: &str) -> usize {
        self.with(|state| {
            state
                .requests
                .iter()
                .filter(|(method, path)| method == verb && path.starts_with(prefix))
                .count()
        })
    }
}

fn json_response(status: u16, body: Value) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(body)
}

fn not_found() -> ResponseTemplate {
    json_response(
        404,
        json!({ "message": "Not Found", "documentation_url": "https://docs.github.com/rest" }),
    )
}

impl Respond for Hub {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let method = request.method.as_str().to_owned();
        let path = request.url.path().to_owned();
        let query: BTreeMap<String, String> = request.url.query_pairs().into_owned().collect();
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        self.with(|state| {
            let with_query = match request.url.query() {
                Some(query) => format!("{path}?{query}"),
                None => path.clone(),
            };
            state.requests.push((method.clone(), with_query));
            let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
            match (method.as_str(), segments.as_slice()) {
                ("GET", ["user"]) => match &state.app {
                    // What an App's installation token gets (GitHub's docs).
                    Some(_) => json_response(
                        403,
                        json!({ "message": "Resource not accessible by integration", "documentation_url": "https://docs.github.com/rest/users/users#get-the-authenticated-user", "status": "403" }),
                    ),
                    None => json_response(200, json!({ "login": "prgate-bot", "type": "User" })),
                },
                ("POST", ["graphql"]) => match (&state.app, state.graphql) {
                    // As GitHub answers an installation token: the bot's login, `[bot]` and all.
                    (Some(slug), true) => json_response(
                        200,
                        json!({ "data": { "viewer": { "login": format!("{slug}[bot]"), "__typename": "Bot" } } }),
                    ),
                    (None, true) => json_response(
                        200,
                        json!({ "data": { "viewer": { "login": "prgate-bot", "__typename": "User" } } }),
                    ),
                    (_, false) => not_found(),
                },
                ("GET", ["repos", "amd", "mono", "collaborators", login, "permission"]) => {
                    if state.abuse > 0 {
                        state.abuse -= 1;
                        return json_response(
                            403,
                            json!({ "message": "You have triggered an abuse detection mechanism. Please wait a few minutes before you try again.", "documentation_url": "https://docs.github.com/enterprise-server@3.14/rest/overview/resources-in-the-rest-api#abuse-rate-limits" }),
                        )
                        .insert_header("retry-after", "1");
                    }
                    // GitHub takes the login percent-decoded; an unencoded `[` never arrives.
                    let login = login.replace("%5B", "[").replace("%5D", "]");
                    match state.permissions.get(&login) {
                        Some(permission) => json_response(200, permission.clone()),
                        None => not_found(),
                    }
                }
                ("GET", ["repos", "amd", "mono", "pulls", "7"]) => {
                    if state.pr_failures > 0 {
                        state.pr_failures -= 1;
                        return ResponseTemplate::new(502).set_body_string("Bad Gateway");
                    }
                    json_response(200, state.pr.clone())
                }
                ("GET", ["repos", "amd", "mono", "pulls", "7", "files"]) => {
                    json_response(200, Value::Array(state.files.clone()))
                }
                ("DELETE", ["repos", "amd", "mono", "issues", "7", "labels", name]) => {
                    let name = name.replace("%20", " ");
                    match state.labels.iter().position(|label| *label == name) {
                        Some(at) => {
                            state.labels.remove(at);
                            json_response(200, json!([]))
                        }
                        None => not_found(),
                    }
                }
                ("GET", ["repos", "amd", "mono", "issues", "7", "comments"])
                | ("GET", ["repositories", "1000", "issues", "7", "comments"]) => {
                    let page: usize = query.get("page").and_then(|page| page.parse().ok()).unwrap_or(1);
                    let size = state.page_size.max(1);
                    let shown: Vec<Value> = state
                        .comments
                        .iter()
                        .skip((page - 1) * size)
                        .take(size)
                        .map(State::comment_json)
                        .collect();
                    let pages = state.comments.len().div_ceil(size).max(1);
                    let mut response = json_response(200, Value::Array(shown));
                    // GitHub's form (octokit/fixtures paginate-issues): `/repositories/ID/...`.
                    let link = |page: usize| {
                        format!("<{}/repositories/1000/issues/7/comments?per_page=100&page={page}>", state.base)
                    };
                    let mut parts = Vec::new();
                    if page > 1 {
                        parts.push(format!("{}; rel=\"prev\"", link(page - 1)));
                    }
                    if page < pages {
                        let next = match (&state.foreign_link, page) {
                            (Some(foreign), 1) => format!("<{foreign}>"),
                            _ => link(page + 1),
                        };
                        parts.push(format!("{next}; rel=\"next\""));
                        parts.push(format!("{}; rel=\"last\"", link(pages)));
                    }
                    if !parts.is_empty() {
                        response = response.insert_header("link", parts.join(", ").as_str());
                    }
                    response
                }
                ("POST", ["repos", "amd", "mono", "issues", "7", "comments"]) => {
                    let id = 5000 + state.comments.len() as u64;
                    let comment = Comment {
                        id,
                        login: state.author(),
                        body: body["body"].as_str().unwrap_or_default().to_owned(),
                    };
                    state.comments.push(comment.clone());
                    json_response(201, State::comment_json(&comment))
                }
                ("PATCH", ["repos", "amd", "mono", "issues", "comments", id]) => {
                    let id: u64 = id.parse().unwrap_or_default();
                    let author = state.author();
                    match state.comments.iter_mut().find(|comment| comment.id == id) {
                        Some(comment) if comment.login == author => {
                            comment.body = body["body"].as_str().unwrap_or_default().to_owned();
                            state.edits += 1;
                            json_response(200, State::comment_json(comment))
                        }
                        Some(_) => json_response(403, json!({ "message": "Resource not accessible by integration" })),
                        None => not_found(),
                    }
                }
                ("POST", ["repos", "amd", "mono", "statuses", sha]) => {
                    // The real answer's shape (octokit/fixtures create-status), with what was sent.
                    let mut status = fixture("list-statuses.response.json")[0].clone();
                    for key in ["state", "description", "context", "target_url"] {
                        status[key] = body[key].clone();
                    }
                    status["creator"]["login"] = json!(state.author());
                    state.statuses.entry((*sha).to_owned()).or_default().insert(0, status.clone());
                    json_response(201, status)
                }
                ("GET", ["repos", "amd", "mono", "commits", sha, "pulls"]) => {
                    let head = state.pr["head"]["sha"].as_str().unwrap_or_default();
                    let pulls = if head.eq_ignore_ascii_case(sha) { vec![state.pr.clone()] } else { Vec::new() };
                    json_response(200, Value::Array(pulls))
                }
                ("GET", ["repos", "amd", "mono", "commits", sha, "statuses"]) => json_response(
                    200,
                    Value::Array(state.statuses.get(*sha).cloned().unwrap_or_default()),
                ),
                ("POST", ["repos", "amd", "mono", "check-runs"]) => {
                    if state.app.is_none() {
                        return json_response(403, json!({ "message": "You must authenticate via a GitHub App." }));
                    }
                    let id = 9000 + state.check_runs.len() as u64;
                    state.check_runs.insert(id, vec![body.clone()]);
                    json_response(201, json!({ "id": id, "head_sha": body["head_sha"], "status": body["status"] }))
                }
                ("PATCH", ["repos", "amd", "mono", "check-runs", id]) => {
                    let id: u64 = id.parse().unwrap_or_default();
                    match state.check_runs.get_mut(&id) {
                        Some(bodies) => {
                            bodies.push(body.clone());
                            json_response(200, json!({ "id": id }))
                        }
                        None => not_found(),
                    }
                }
                _ => not_found(),
            }
        })
    }
}

/// The PR as the API gives it.
fn pull_request(head: &str, base: &str, state: &str, merged: bool) -> Value {
    json!({
        "number": 7, "state": state, "merged": merged, "title": "[Fix] alpha: bounds-check every row",
        "user": { "login": "author", "type": "User" },
        "head": { "ref": "topic", "sha": head, "repo": { "full_name": "fork/mono" } },
        "base": { "ref": "main", "sha": base, "repo": { "full_name": "amd/mono" } },
        "changed_files": 1,
    })
}

/// GitHub's permission answer: the legacy level and the role's own name.
fn permission(level: &str, role: &str) -> Value {
    json!({ "permission": level, "role_name": role, "user": { "login": "someone", "type": "User" } })
}

/// A stand-in for PR #7 at `head` with one changed file, the label `label` on it, and `lead`
/// a maintainer.
async fn hub(head: &str, base: &str, label: &str) -> (MockServer, Hub) {
    let server = MockServer::start().await;
    let hub = Hub::default();
    hub.with(|state| {
        state.base = server.uri();
        state.pr = pull_request(head, base, "open", false);
        state.files =
            vec![json!({ "filename": "pkg/models/alpha/layer.py", "status": "modified" })];
        state.labels = vec![label.to_owned()];
        state.permissions.insert("lead".to_owned(), permission("write", "maintain"));
        state.page_size = 100;
        state.graphql = true;
    });
    Mock::given(any()).respond_with(hub.clone()).mount(&server).await;
    (server, hub)
}

fn env(server: &MockServer) -> Vec<(String, String)> {
    vec![
        ("GITHUB_API_URL".to_owned(), server.uri()),
        ("GITHUB_TOKEN".to_owned(), "test-token".to_owned()),
        ("PRGATE_RETRY_BACKOFF_MS".to_owned(), "10".to_owned()),
    ]
}

/// Runs the real `prgate` with `args` against `server`, off the async runtime.
async fn prgate(server: &MockServer, args: Vec<String>, extra: &[(&str, &str)]) -> Run {
    let mut env = env(server);
    env.extend(extra.iter().map(|(key, value)| ((*key).to_owned(), (*value).to_owned())));
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        prgate_with_env(Path::new("."), &args, &env)
    })
    .await
    .expect("prgate ran")
}

/// `prgate trigger` on `event`; returns the run and the folder with `out/`.
async fn trigger(server: &MockServer, event: &Value) -> (Run, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let event_path = dir.path().join("event.json");
    std::fs::write(&event_path, event.to_string()).expect("write the event");
    let out: PathBuf = dir.path().join("out");
    let args = vec![
        "trigger".to_owned(),
        "--event".to_owned(),
        event_path.to_str().expect("UTF-8").to_owned(),
        "--repository".to_owned(),
        "amd/mono".to_owned(),
        "--out".to_owned(),
        out.to_str().expect("UTF-8").to_owned(),
    ];
    (prgate(server, args, &[]).await, dir)
}

fn pinned(dir: &tempfile::TempDir) -> Value {
    let text = std::fs::read_to_string(dir.path().join("out/trigger.json")).expect("trigger.json");
    serde_json::from_str(&text).expect("JSON")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_label_in_other_case_starts_a_run_as_the_workflows_if_does() {
    let (server, hub) = hub(SHA, BASE_SHA, "Run-CI").await;
    let (run, dir) = trigger(&server, &labeled("lead", "Run-CI", SHA)).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(pinned(&dir)["sha"], SHA);
    // The label is removed as it was added.
    hub.with(|state| assert!(state.labels.is_empty(), "{:?}", state.labels));
}

#[tokio::test(flavor = "multi_thread")]
async fn github_permission_decides_custom_roles_included() {
    // (permission, role_name, starts): GitHub's `permission` is the legacy level, `role_name`
    // the role (a custom role's own name).
    let table = [
        ("write", "ci-operators", true),
        ("write", "maintain", true),
        ("admin", "release-admins", true),
        ("read", "triage", false),
        ("read", "read", false),
    ];
    for (level, role, starts) in table {
        let (server, hub) = hub(SHA, BASE_SHA, "run-ci").await;
        hub.with(|state| {
            state.permissions.insert("lead".to_owned(), permission(level, role));
        });
        let (run, dir) = trigger(&server, &labeled("lead", "run-ci", SHA)).await;
        assert_eq!(run.code, if starts { 0 } else { 1 }, "{role}: {}{}", run.stdout, run.stderr);
        assert_eq!(dir.path().join("out/trigger.json").exists(), starts, "{role}");
        if !starts {
            let shown = if role == level {
                role.to_owned()
            } else {
                format!("{role} (permission {level})")
            };
            assert!(run.stderr.contains(&format!("lead has the {shown} role")), "{}", run.stderr);
            // The label is gone: the labeller learns why on the PR.
            hub.with(|state| {
                assert_eq!(state.comments.len(), 1, "{role}: {:?}", state.comments);
                let body = &state.comments[0].body;
                assert!(body.starts_with(REFUSAL_MARKER), "{body}");
                // Markdown-escaped, as all text from a run is: `\(permission read\)`.
                let text = body.replace('\\', "");
                assert!(text.contains(&format!("lead has the {shown} role")), "{body}");
            });
        } else {
            hub.with(|state| assert!(state.comments.is_empty(), "{role}: {:?}", state.comments));
        }
        hub.with(|state| assert!(state.labels.is_empty(), "{role}: the label stays"));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_closed_or_merged_pr_is_refused_with_a_comment() {
    for (state_name, merged, word) in [("closed", false, "closed"), ("closed", true, "merged")] {
        let (server, hub) = hub(SHA, BASE_SHA, "run-ci").await;
        hub.with(|state| state.pr = pull_request(SHA, BASE_SHA, state_name, merged));
        let (run, dir) = trigger(&server, &labeled("lead", "run-ci", SHA)).await;
        assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
        assert!(!dir.path().join("out/trigger.json").exists());
        hub.with(|state| {
            assert_eq!(state.comments.len(), 1, "{:?}", state.comments);
            let comment = &state.comments[0];
            assert!(comment.body.starts_with(REFUSAL_MARKER), "{}", comment.body);
            assert!(comment.body.contains(&format!("is {word}")), "{}", comment.body);
        });
        // Labelled again: the same comment is edited, not a second one.
        hub.with(|state| state.labels.push("run-ci".to_owned()));
        let (run, _dir) = trigger(&server, &labeled("lead", "run-ci", SHA)).await;
        assert_eq!(run.code, 1);
        hub.with(|state| assert_eq!(state.comments.len(), 1));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bot_is_refused_by_its_type_and_a_login_is_percent_encoded() {
    let (server, hub) = hub(SHA, BASE_SHA, "run-ci").await;
    let mut event = labeled("renovate[bot]", "run-ci", SHA);
    event["sender"]["type"] = json!("Bot");
    let (run, _dir) = trigger(&server, &event).await;
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("renovate[bot] is a bot"), "{}", run.stderr);
    assert_eq!(hub.requested("GET", "/repos/amd/mono/collaborators"), 0, "no permission asked");

    // A sender GitHub does not know as a collaborator (a bot in an old payload, without its
    // type): 404 is a refusal, not an error, and the login went encoded.
    hub.with(|state| state.labels.push("run-ci".to_owned()));
    let mut event = labeled("helper[bot]", "run-ci", SHA);
    event["sender"]["type"] = Value::Null;
    let (run, _dir) = trigger(&server, &event).await;
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("helper[bot] has the no collaborator role"), "{}", run.stderr);
    assert_eq!(hub.requested("GET", "/repos/amd/mono/collaborators/helper%5Bbot%5D/permission"), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_abuse_detection_403_of_github_enterprise_is_retried() {
    let (server, hub) = hub(SHA, BASE_SHA, "run-ci").await;
    hub.with(|state| state.abuse = 1);
    let (run, dir) = trigger(&server, &labeled("lead", "run-ci", SHA)).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(dir.path().join("out/trigger.json").exists());
    assert_eq!(hub.requested("GET", "/repos/amd/mono/collaborators/lead/permission"), 2);
    assert!(run.stderr.contains("GitHub answered 403 Forbidden"), "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_uppercase_dispatch_sha_is_the_same_commit() {
    let (server, hub) = hub(SHA, BASE_SHA, "run-ci").await;
    let head = "abcdef0123456789abcdef0123456789abcdef01";
    hub.with(|state| state.pr = pull_request(head, BASE_SHA, "open", false));
    // The real workflow_dispatch payload, with prgate's inputs.
    let mut event = fixture("workflow_dispatch_payload.json");
    event["inputs"] = json!({ "pr": "7", "sha": head.to_uppercase() });
    event["sender"]["login"] = json!("lead");
    let (run, dir) = trigger(&server, &event).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(pinned(&dir)["sha"], head);
}

#[tokio::test(flavor = "multi_thread")]
async fn failures_after_the_label_is_gone_leave_a_status_and_a_comment() {
    let (server, hub) = hub(SHA, BASE_SHA, "run-ci").await;
    hub.with(|state| state.pr_failures = u32::MAX);
    let (run, _dir) = trigger(&server, &labeled("lead", "run-ci", SHA)).await;
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    hub.with(|state| {
        assert!(state.labels.is_empty(), "the label was removed");
        let status = &state.statuses.get(SHA).expect("a status on the expected SHA")[0];
        assert_eq!(status["state"], "error", "{status}");
        assert_eq!(status["context"], "AMD PR test");
        assert!(status["description"].as_str().expect("text").contains("502"), "{status}");
        assert_eq!(state.comments.len(), 1);
        let body = &state.comments[0].body;
        assert!(body.starts_with(REFUSAL_MARKER), "{body}");
        assert!(
            body.contains("could not start the run") && body.contains("add it again"),
            "{body}"
        );
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_moved_head_is_said_on_the_pr() {
    let (server, hub) = hub("2222222222222222222222222222222222222222", BASE_SHA, "run-ci").await;
    let (run, _dir) = trigger(&server, &labeled("lead", "run-ci", SHA)).await;
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    hub.with(|state| {
        assert_eq!(state.comments.len(), 1);
        assert!(state.comments[0].body.contains("moved from"), "{}", state.comments[0].body);
    });
}

/// A plan and a (pending) verdict of a real repository, for `prgate publish`.
struct Published {
    _repo: crate::support::Repo,
    dir: tempfile::TempDir,
    head: String,
}

fn published() -> Published {
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
    let path = |path: &Path| path.to_str().expect("UTF-8").to_owned();
    let verdict = crate::support::prgate(
        repo.path(),
        &["gate", "--plan", &path(&plan_path), "--evidence", &path(&evidence), "--format", "json"],
    );
    // No evidence: not a pass (pending while a run goes; `error` once it is judged final).
    assert!(matches!(verdict.code, 1 | 2), "not a pass: {}", verdict.stderr);
    let parsed: Value = serde_json::from_str(&verdict.stdout).expect("a verdict");
    assert_ne!(parsed["result"], "pass", "{parsed}");
    std::fs::write(dir.path().join("verdict.json"), verdict.stdout).expect("write the verdict");
    Published { _repo: repo, dir, head }
}

fn publish_args(published: &Published, extra: &[&str]) -> Vec<String> {
    let dir = published.dir.path();
    let mut args: Vec<String> = [
        "publish",
        "--repository",
        "amd/mono",
        "--pr",
        "7",
        "--sha",
        &published.head,
        "--plan",
        dir.join("plan.json").to_str().expect("UTF-8"),
        "--verdict",
        dir.join("verdict.json").to_str().expect("UTF-8"),
    ]
    .iter()
    .map(|arg| (*arg).to_owned())
    .collect();
    args.extend(extra.iter().map(|arg| (*arg).to_owned()));
    args
}

#[tokio::test(flavor = "multi_thread")]
async fn an_app_token_finds_its_own_comment_by_graphqls_viewer() {
    let published = published();
    let (server, hub) = hub(SHA, BASE_SHA, "run-ci").await;
    hub.with(|state| {
        state.app = Some("my-app".to_owned());
        state.comments = vec![
            // Someone quoting the marker, and the comment the App wrote last time.
            Comment { id: 1, login: "mallory".to_owned(), body: format!("{MARKER}\nfake") },
            Comment { id: 2, login: "my-app[bot]".to_owned(), body: format!("{MARKER}\nold") },
        ];
    });
    // In Actions, where prgate used to take any App for github-actions[bot].
    let actions = [("GITHUB_ACTIONS", "true"), ("GITHUB_STEP_SUMMARY", "/dev/null")];
    for _ in 0..2 {
        let run = prgate(&server, publish_args(&published, &[]), &actions).await;
        assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    }
    hub.with(|state| {
        assert_eq!(state.comments.len(), 2, "no new comment: {:?}", state.comments);
        assert!(state.comments[1].body.contains("AMD PR test"), "{}", state.comments[1].body);
        assert!(state.comments[0].body.ends_with("fake"), "someone else's is left alone");
    });
    assert_eq!(hub.requested("POST", "/repos/amd/mono/issues/7/comments"), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_app_token_that_cannot_name_itself_guesses_no_login() {
    let published = published();
    let (server, hub) = hub(SHA, BASE_SHA, "run-ci").await;
    hub.with(|state| {
        state.app = Some("my-app".to_owned());
        state.graphql = false;
    });
    let actions = [("GITHUB_ACTIONS", "true"), ("GITHUB_STEP_SUMMARY", "/dev/null")];
    let run = prgate(&server, publish_args(&published, &[]), &actions).await;
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("--bot-login"), "{}", run.stderr);
    assert_eq!(hub.requested("POST", "/repos/amd/mono/issues/7/comments"), 0);
    // The status went first: the required check is never left stale by a comment.
    hub.with(|state| assert!(state.statuses.contains_key(&published.head)));
    // Named, it works.
    let run =
        prgate(&server, publish_args(&published, &["--bot-login", "my-app[bot]"]), &actions).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    hub.with(|state| assert_eq!(state.comments.len(), 1));
}

#[tokio::test(flavor = "multi_thread")]
async fn comments_are_read_through_the_link_header() {
    let published = published();
    let (server, hub) = hub(SHA, BASE_SHA, "run-ci").await;
    hub.with(|state| {
        state.page_size = 2;
        state.comments = (1..=4)
            .map(|id| Comment {
                id,
                login: "reviewer".to_owned(),
                body: format!("looks good {id}"),
            })
            .chain([Comment {
                id: 10,
                login: "prgate-bot".to_owned(),
                body: format!("{MARKER}\nold"),
            }])
            .collect();
    });
    let run = prgate(&server, publish_args(&published, &[]), &[]).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    hub.with(|state| {
        assert_eq!(state.comments.len(), 5, "ours on page 3 was found");
        assert!(state.comments[4].body.contains("AMD PR test"));
    });
    // Pages 2 and 3 were read where GitHub's Link pointed, not at a `page=` prgate made up.
    assert_eq!(hub.requested("GET", "/repositories/1000/issues/7/comments"), 2);
    assert_eq!(hub.requested("POST", "/repos/amd/mono/issues/7/comments"), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_link_header_outside_the_api_is_not_followed() {
    let published = published();
    let (server, hub) = hub(SHA, BASE_SHA, "run-ci").await;
    hub.with(|state| {
        state.page_size = 1;
        state.foreign_link = Some("https://collector.invalid/steal?page=2".to_owned());
        state.comments = vec![
            Comment { id: 1, login: "reviewer".to_owned(), body: "first".to_owned() },
            Comment { id: 2, login: "prgate-bot".to_owned(), body: format!("{MARKER}\nold") },
        ];
    });
    let run = prgate(&server, publish_args(&published, &[]), &[]).await;
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("points outside the API"), "{}", run.stderr);
    assert_eq!(hub.requested("POST", "/repos/amd/mono/issues/7/comments"), 0, "no second comment");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_app_token_posts_a_check_run_beside_the_status() {
    let published = published();
    let (server, hub) = hub(SHA, BASE_SHA, "run-ci").await;
    hub.with(|state| state.app = Some("my-app".to_owned()));
    let run = prgate(&server, publish_args(&published, &["--check-run", "on"]), &[]).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    hub.with(|state| {
        // The status is still posted: it stays the required check.
        assert_eq!(state.statuses[&published.head][0]["context"], "AMD PR test");
        assert_eq!(state.check_runs.len(), 1);
        let body = &state.check_runs.values().next().expect("a check run")[0];
        assert_eq!(body["name"], "AMD PR test details");
        assert_eq!(body["head_sha"], published.head.as_str());
        // The verdict of a run with no evidence is `error`: a failure, never a pass, with
        // the button that runs the test again.
        assert_eq!(body["status"], "completed", "{body}");
        assert_eq!(body["conclusion"], "failure", "{body}");
        assert_eq!(body["actions"][0]["identifier"], "prgate-rerun", "{body}");
        let summary = body["output"]["summary"].as_str().expect("a summary");
        assert!(!summary.contains(MARKER) && summary.contains("AMD PR test"), "{summary}");
        let annotations = body["output"]["annotations"].as_array().expect("annotations");
        assert!(!annotations.is_empty(), "{body}");
        for annotation in annotations {
            assert_eq!(annotation["path"], "pkg/models/alpha/layer.py", "{annotation}");
            assert_eq!(annotation["start_line"], 1);
            assert_eq!(annotation["annotation_level"], "failure", "{annotation}");
            let message = annotation["message"].as_str().expect("a message");
            assert!(message.starts_with("alpha: ") && message.contains("\nrule: "), "{message}");
        }
    });
}

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

#[tokio::test(flavor = "multi_thread")]
async fn a_queue_that_touches_the_prs_models_runs_them_again_and_says_why() {
    let (fixture, shas) = queued(("pkg/models/alpha/extra.py", "# from the PR ahead\n"));
    let [pr_head, _, queue_base, merge] = &shas;
    let (server, hub) = queue_hub(&fixture, &shas, Some("prgate-bot")).await;
    let event = write_event(&fixture, &merge_group(pr_head, queue_base, merge));
    let nodes = nodes_file(&fixture);
    let run =
        ci(&server, &fixture, &["--stage", "start", "--event", &event, "--nodes", &nodes]).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let state_dir = fixture.work.path().join("ci/state");
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
