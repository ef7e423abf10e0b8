//! GitHub as teams run it: App installation tokens, merge queues, custom roles, bots, GitHub
//! Enterprise's limits, `Link` pagination, and the Checks API, against a stateful stand-in for
//! GitHub's REST API (a real HTTP server on loopback) fed with real payloads and responses.
//!
//! The payloads and responses are in `tests/fixtures/github/` (their provenance is in
//! `PROVENANCE.md` there): each test takes a real one and changes only the fields it is about
//! (the PR number, the SHAs, the label, the sender).
//!
//! This file holds the stand-in and its helpers; the tests are in submodules by topic.

mod acceptance;
mod app_tokens;
mod ci_runs;
mod triggers;

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
    /// The PR's issue events, oldest first (who added which label).
    events: Vec<Value>,
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
                ("GET", ["repos", "amd", "mono", "issues", "7", "events"]) => {
                    json_response(200, Value::Array(state.events.clone()))
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
