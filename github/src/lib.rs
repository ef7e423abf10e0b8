//! GitHub: the only place prgate talks to it (a crate of its own that only the binary uses:
//! `cargo test --test cli -- architecture::` holds it). octocrab carries the requests (authenticated,
//! against `GITHUB_API_URL`), with its own retries left out; this module decides what is retried
//! and when: idempotent calls on 5xx and rate limits, with backoff, honouring `retry-after` and
//! `x-ratelimit-reset`, and GitHub Enterprise's "abuse detection" 403 (the calls, the retries
//! and the pagination's `Link` are `transport`'s). A comment is never
//! created twice: after a failed creation the comments are read again first, and an existing one
//! is edited instead. Lists are read by following the `Link` header's `next` (never past the
//! API's own origin, where the token would leak). Our comments are found by the marker and our
//! login, which is known for every token kind: `--bot-login`, the token's user, or (an App's
//! installation token, which cannot read `/user`) the GraphQL viewer, an App's `slug[bot]`.
//! The webhook payloads prgate reads are [`event`]'s; the pin a started run keeps, [`pin`]'s;
//! GitHub Actions' job results, [`actions`]'s; who and what may start a run, [`trigger`]'s.
//! Every failure is a [`GitHubError`].

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use http::StatusCode;
use octocrab::Octocrab;
use serde::Deserialize;
use serde::de::DeserializeOwned;

pub mod actions;
mod error;
pub mod event;
pub mod pin;
mod transport;
pub mod trigger;

pub use error::{GitHubError, Result};

pub use transport::RetryPolicy;
use transport::{Method, answered, encode, graphql_url, next_link, retryable, short};

/// Where the API is when `GITHUB_API_URL` does not say.
const DEFAULT_API_URL: &str = "https://api.github.com";
/// GitHub lists at most this many items a page.
const PER_PAGE: usize = 100;
/// The most pages of a list read: 10,000 comments, and no endless loop on a server whose
/// `Link` header never ends.
const MAX_PAGES: usize = 100;
/// The identifier of the check run's "Re-run" button (a `requested_action`).
pub const RERUN_ACTION: &str = "prgate-rerun";
/// A check run takes at most this many annotations a request (GitHub's limit).
pub const ANNOTATIONS_PER_REQUEST: usize = 50;
/// GitHub's API lists at most this many files of a pull request.
pub const MAX_LISTED_FILES: usize = 3000;

/// A repository on GitHub, with a client for it.
pub struct GitHub {
    client: Octocrab,
    /// The API's base URL, without a trailing `/`: a `Link` is followed only below it.
    api: String,
    /// A client for GraphQL's host, and its endpoint's path there (`GITHUB_GRAPHQL_URL`,
    /// else beside the API): on GitHub Enterprise it is not below the REST API's path.
    graphql: (Octocrab, String),
    owner: String,
    name: String,
    retry: RetryPolicy,
    /// Our login once known: asked once, then kept (and taken from a comment we created).
    login: Mutex<Option<String>>,
}

/// The repository and the API it talks to; never the clients (they hold the token).
impl std::fmt::Debug for GitHub {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("GitHub")
            .field("api", &self.api)
            .field("owner", &self.owner)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// What prgate reads of a pull request.
#[derive(Debug, Clone, Deserialize)]
pub struct PullRequest {
    pub number: u64,
    pub title: String,
    pub head: GitRef,
    pub base: GitRef,
    #[serde(default)]
    pub changed_files: Option<usize>,
    /// `open` or `closed`.
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub merged: Option<bool>,
    #[serde(default)]
    pub labels: Vec<Label>,
    /// Who opened it (`None` for a deleted account).
    #[serde(default)]
    pub user: Option<event::Login>,
}

/// A label of a pull request.
#[derive(Debug, Clone, Deserialize)]
pub struct Label {
    pub name: String,
}

impl PullRequest {
    /// Why no run may start on this PR: it is closed, or merged.
    pub fn not_open(&self) -> Option<&'static str> {
        if self.merged == Some(true) {
            Some("merged")
        } else if self.state.as_deref().is_some_and(|state| state != "open") {
            Some("closed")
        } else {
            None
        }
    }
}

/// One side of a pull request.
#[derive(Debug, Clone, Deserialize)]
pub struct GitRef {
    #[serde(rename = "ref")]
    pub reference: String,
    pub sha: String,
}

/// A PR's files as the API lists them.
#[derive(Debug, Clone)]
pub struct PrFiles {
    /// Paths, a rename's old path included.
    pub paths: Vec<String>,
    /// The API listed fewer files than the PR has (it stops at 3,000).
    pub truncated: bool,
}

#[derive(Deserialize)]
struct PrFile {
    filename: String,
    previous_filename: Option<String>,
}

#[derive(Deserialize)]
struct Comment {
    id: u64,
    body: Option<String>,
    user: Option<User>,
}

#[derive(Debug, Clone, Deserialize)]
struct User {
    login: String,
}

#[derive(Deserialize)]
struct Permission {
    permission: String,
    role_name: Option<String>,
}

/// What the sender may do, as GitHub says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    /// GitHub's `permission` is `admin` or `write` (maintain and every custom role based on
    /// write or maintain are `write` there).
    pub allowed: bool,
    /// The role's name as GitHub shows it (`role_name`, a custom role's own name), for messages.
    pub role: String,
}

/// One commit status as GitHub lists it, newest first.
#[derive(Debug, Clone, Deserialize)]
pub struct CommitStatus {
    pub context: String,
    pub state: String,
    /// Who posted it.
    #[serde(default)]
    creator: Option<User>,
}

impl CommitStatus {
    /// The login that posted it.
    pub fn creator(&self) -> Option<&str> {
        self.creator.as_ref().map(|user| user.login.as_str())
    }
}

/// A check run's result, as the Checks API takes it.
#[derive(Debug, Clone)]
pub struct CheckRun<'a> {
    pub name: &'a str,
    pub head_sha: &'a str,
    /// `None` while it runs (`in_progress`); else `success`, `failure`, `neutral`...
    pub conclusion: Option<&'a str>,
    pub title: &'a str,
    pub summary: &'a str,
    pub details_url: Option<&'a str>,
    pub annotations: &'a [CheckAnnotation],
}

/// One annotation of a check run: a file, its lines, a level and a message.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CheckAnnotation {
    pub path: String,
    pub start_line: u32,
    pub end_line: u32,
    /// `notice`, `warning` or `failure`.
    pub annotation_level: &'static str,
    pub title: String,
    pub message: String,
}

/// What happened to the comment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommentOutcome {
    Created(u64),
    Updated(u64),
    Unchanged(u64),
}

/// A client for `owner/name` with the token of `GITHUB_TOKEN` and the policy from the
/// environment, and the runtime to drive it (its service stack spawns on the runtime it is
/// built in).
pub fn connect(repository: &str) -> Result<(tokio::runtime::Runtime, GitHub)> {
    let token = std::env::var("GITHUB_TOKEN")
        .map_err(|error| GitHubError::failed("GITHUB_TOKEN is not set", error))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| GitHubError::failed("starting the async runtime", error))?;
    let github = {
        let _inside = runtime.enter();
        GitHub::new(repository, &token, RetryPolicy::from_env())?
    };
    Ok((runtime, github))
}

impl GitHub {
    /// A client for `owner/name` with `token`, against `GITHUB_API_URL` or api.github.com.
    pub fn new(repository: &str, token: &str, retry: RetryPolicy) -> Result<GitHub> {
        let Some((owner, name)) = repository
            .split_once('/')
            .filter(|(o, n)| !o.is_empty() && !n.is_empty() && !n.contains('/'))
        else {
            return Err(GitHubError::Setting(format!(
                "--repository '{repository}': expected owner/name"
            )));
        };
        let api = std::env::var("GITHUB_API_URL").unwrap_or_else(|_| DEFAULT_API_URL.to_owned());
        let client = Octocrab::builder()
            .base_uri(api.as_str())
            .map_err(|error| {
                GitHubError::failed(format!("GITHUB_API_URL '{api}' is not a URL"), error)
            })?
            .personal_token(token.to_owned())
            .set_connect_timeout(Some(Duration::from_secs(10)))
            .set_read_timeout(Some(Duration::from_secs(60)))
            .build()
            .map_err(|error| GitHubError::failed("building the GitHub client", error))?;
        let api = api.trim_end_matches('/').to_owned();
        let graphql_url = std::env::var("GITHUB_GRAPHQL_URL").unwrap_or_else(|_| graphql_url(&api));
        let parsed: http::Uri = graphql_url.parse().map_err(|error| {
            GitHubError::failed(format!("GITHUB_GRAPHQL_URL '{graphql_url}' is not a URL"), error)
        })?;
        let origin = match (parsed.scheme_str(), parsed.authority()) {
            (Some(scheme), Some(authority)) => format!("{scheme}://{authority}"),
            _ => {
                return Err(GitHubError::Setting(format!(
                    "GITHUB_GRAPHQL_URL '{graphql_url}' is not an absolute URL"
                )));
            }
        };
        let graphql_client = Octocrab::builder()
            .base_uri(origin.as_str())
            .map_err(|error| {
                GitHubError::failed(
                    format!("GITHUB_GRAPHQL_URL '{graphql_url}' is not a URL"),
                    error,
                )
            })?
            .personal_token(token.to_owned())
            .set_connect_timeout(Some(Duration::from_secs(10)))
            .set_read_timeout(Some(Duration::from_secs(60)))
            .build()
            .map_err(|error| GitHubError::failed("building the GraphQL client", error))?;
        let graphql = (graphql_client, parsed.path().to_owned());
        Ok(GitHub {
            client,
            api,
            graphql,
            owner: owner.to_owned(),
            name: name.to_owned(),
            retry,
            login: Mutex::new(None),
        })
    }

    fn path(&self, rest: &str) -> String {
        format!("/repos/{}/{}/{rest}", self.owner, self.name)
    }

    /// The pull request as GitHub has it now.
    pub async fn pull_request(&self, number: u64) -> Result<PullRequest> {
        self.json(Method::Get, &self.path(&format!("pulls/{number}")), None).await
    }

    /// Every file of a PR, page by page (the `Link` header's `next`); marked truncated when the
    /// API stops short of the PR's own count (it lists at most 3,000).
    pub async fn pull_request_files(&self, pr: &PullRequest) -> Result<PrFiles> {
        let first = self.path(&format!("pulls/{}/files?per_page={PER_PAGE}", pr.number));
        let files: Vec<PrFile> = self.list(&first, MAX_LISTED_FILES).await?;
        let listed = files.len();
        let mut paths = Vec::new();
        for file in files {
            paths.push(file.filename);
            paths.extend(file.previous_filename);
        }
        let truncated =
            pr.changed_files.is_some_and(|count| count > listed) || listed >= MAX_LISTED_FILES;
        Ok(PrFiles { paths, truncated })
    }

    /// Whether `login` may start a run: GitHub's `permission` is `write` or `admin`. That is
    /// write, maintain, admin and every custom role based on write or maintain; triage (which
    /// can label) and read are `read`. Someone who is no collaborator at all (GitHub answers
    /// 404) may not.
    pub async fn access(&self, login: &str) -> Result<Access> {
        let path = self.path(&format!("collaborators/{}/permission", encode(login)));
        let (status, _, text) = self.call(Method::Get, &path, None).await?;
        if status == StatusCode::NOT_FOUND {
            return Ok(Access { allowed: false, role: "no collaborator".to_owned() });
        }
        if !status.is_success() {
            return Err(answered(status, "GET", &path, &text));
        }
        let permission: Permission = serde_json::from_str(&text).map_err(|error| {
            GitHubError::failed(format!("reading GitHub's answer to {path}"), error)
        })?;
        let allowed = matches!(permission.permission.as_str(), "admin" | "write");
        let role = match permission.role_name {
            Some(role) if role != permission.permission => {
                format!("{role} (permission {})", permission.permission)
            }
            _ => permission.permission,
        };
        Ok(Access { allowed, role })
    }

    /// Who last added the label `name` (compared as GitHub compares labels: case-insensitively)
    /// to issue or PR `number`, from its events page by page (oldest first); `None` when no
    /// event names an actor for it (a deleted account, or an event GitHub no longer lists). An
    /// error when there are more events than prgate reads (100 pages of 100): the newest
    /// could be among those not read.
    pub async fn label_added_by(&self, number: u64, name: &str) -> Result<Option<String>> {
        #[derive(Deserialize)]
        struct IssueEvent {
            event: String,
            #[serde(default)]
            actor: Option<event::Login>,
            #[serde(default)]
            label: Option<Label>,
        }
        let first = self.path(&format!("issues/{number}/events?per_page={PER_PAGE}"));
        let events: Vec<IssueEvent> = self.list(&first, usize::MAX).await?;
        // Oldest first: a list cut at its last page read may miss the newest adder.
        if events.len() >= MAX_PAGES * PER_PAGE {
            return Err(GitHubError::Stopped(format!(
                "PR #{number} has more than {} events, the most prgate reads: who last added the label {name} cannot be told",
                MAX_PAGES * PER_PAGE
            )));
        }
        Ok(events
            .into_iter()
            .filter(|event| event.event == "labeled")
            .filter(|event| event.label.as_ref().is_some_and(|l| l.name.eq_ignore_ascii_case(name)))
            .map(|event| event.actor.map(|actor| actor.login))
            .next_back()
            .flatten())
    }

    /// The open pull requests whose head is `sha` (a fork's PR is not named in a `check_run`
    /// event's `pull_requests`).
    pub async fn open_pulls_of(&self, sha: &str) -> Result<Vec<u64>> {
        #[derive(Deserialize)]
        struct Pull {
            number: u64,
            state: String,
            head: GitRef,
        }
        let pulls: Vec<Pull> = self
            .json(Method::Get, &self.path(&format!("commits/{}/pulls", encode(sha))), None)
            .await?;
        Ok(pulls
            .into_iter()
            .filter(|pull| pull.state == "open" && pull.head.sha.eq_ignore_ascii_case(sha))
            .map(|pull| pull.number)
            .collect())
    }

    /// The statuses of `sha`, newest first (the first page: GitHub's newest 100).
    pub async fn statuses(&self, sha: &str) -> Result<Vec<CommitStatus>> {
        self.json(
            Method::Get,
            &self.path(&format!("commits/{}/statuses?per_page={PER_PAGE}", encode(sha))),
            None,
        )
        .await
    }

    /// Creates a check run, or (with `existing`) updates it; returns its id. Annotations go 50
    /// a request, the rest in updates of the same run.
    pub async fn check_run(&self, existing: Option<u64>, run: &CheckRun<'_>) -> Result<u64> {
        let mut batches = run.annotations.chunks(ANNOTATIONS_PER_REQUEST);
        let first: &[CheckAnnotation] = batches.next().unwrap_or_default();
        let body = |annotations: &[CheckAnnotation]| check_run_body(run, annotations);
        #[derive(Deserialize)]
        struct Created {
            id: u64,
        }
        let id = match existing {
            Some(id) => {
                let _: serde_json::Value = self
                    .json(
                        Method::Patch,
                        &self.path(&format!("check-runs/{id}")),
                        Some(&body(first)),
                    )
                    .await?;
                id
            }
            None => {
                // Not repeated blindly: a second check run is harmless but confusing, and a
                // later update finds nothing to edit; one try, then the error.
                let created: Created = self
                    .json(
                        Method::Post { idempotent: false },
                        &self.path("check-runs"),
                        Some(&body(first)),
                    )
                    .await?;
                created.id
            }
        };
        for batch in batches {
            let _: serde_json::Value = self
                .json(Method::Patch, &self.path(&format!("check-runs/{id}")), Some(&body(batch)))
                .await?;
        }
        Ok(id)
    }

    /// Removes a label from a PR; a label already gone is fine.
    pub async fn remove_label(&self, number: u64, label: &str) -> Result<()> {
        let path = self.path(&format!("issues/{number}/labels/{}", encode(label)));
        let (status, _, body) = self.call(Method::Delete, &path, None).await?;
        if status.is_success() || status == StatusCode::NOT_FOUND {
            Ok(())
        } else {
            Err(GitHubError::Refused {
                action: format!("removing the label {label} from #{number}"),
                status,
                text: short(&body),
            })
        }
    }

    /// Posts a commit status on `sha`.
    pub async fn set_status(
        &self,
        sha: &str,
        state: &str,
        description: &str,
        context: &str,
        target_url: Option<&str>,
    ) -> Result<()> {
        let body = serde_json::json!({
            "state": state,
            "description": description,
            "context": context,
            "target_url": target_url,
        });
        // The same status twice is harmless: it may be retried.
        let _: serde_json::Value = self
            .json(
                Method::Post { idempotent: true },
                &self.path(&format!("statuses/{sha}")),
                Some(&body),
            )
            .await?;
        Ok(())
    }

    /// Our comment on a PR: the one carrying `marker` and written by `bot_login`, looked for
    /// on every page (the `Link` header's `next`).
    async fn find_comment(
        &self,
        number: u64,
        marker: &str,
        bot_login: &str,
    ) -> Result<Option<(u64, String)>> {
        let first = self.path(&format!("issues/{number}/comments?per_page={PER_PAGE}"));
        let comments: Vec<Comment> = self.list(&first, usize::MAX).await?;
        // Ours starts with the marker; the oldest wins, should there ever be two.
        Ok(comments
            .into_iter()
            .filter(|comment| comment.user.as_ref().is_some_and(|user| user.login == bot_login))
            .map(|comment| (comment.id, comment.body.unwrap_or_default()))
            .find(|(_, body)| body.trim_start().starts_with(marker)))
    }

    /// Every item of a list, page by page: the first page at `first`, then each `Link: <...>;
    /// rel="next"` until there is none, `most` items are read, or [`MAX_PAGES`] pages. A `next`
    /// outside the API's own base URL is an error: the token goes with every request.
    async fn list<T: DeserializeOwned>(&self, first: &str, most: usize) -> Result<Vec<T>> {
        let mut items = Vec::new();
        let mut next = Some(first.to_owned());
        let mut pages = 0usize;
        while let Some(url) = next.take() {
            pages += 1;
            let (status, headers, text) = self.call(Method::Get, &url, None).await?;
            if !status.is_success() {
                return Err(answered(status, "GET", &url, &text));
            }
            let page: Vec<T> = serde_json::from_str(&text).map_err(|error| {
                GitHubError::failed(format!("reading GitHub's answer to {url}"), error)
            })?;
            let empty = page.is_empty();
            items.extend(page);
            if empty || items.len() >= most || pages >= MAX_PAGES {
                break;
            }
            next = match next_link(&headers) {
                Some(link) => Some(self.below_api(&link)?),
                None => None,
            };
        }
        Ok(items)
    }

    /// `link` as prgate may request it: a URL under the API's base URL, or a path.
    fn below_api(&self, link: &str) -> Result<String> {
        if link.starts_with('/') && !link.starts_with("//") {
            return Ok(link.to_owned());
        }
        match link.strip_prefix(self.api.as_str()) {
            Some(rest) if rest.starts_with('/') => Ok(link.to_owned()),
            _ => Err(GitHubError::Stopped(format!(
                "GitHub's Link header points outside the API ({}): '{}'; not followed",
                self.api,
                short(link)
            ))),
        }
    }

    /// Edits our comment on a PR, or creates it when there is none; skips the call when the
    /// body is unchanged. A creation that fails is never repeated blindly: the comments are read
    /// again, and one that did get created is edited instead.
    pub async fn upsert_comment(
        &self,
        number: u64,
        marker: &str,
        bot_login: &str,
        body: &str,
    ) -> Result<CommentOutcome> {
        let payload = serde_json::json!({ "body": body });
        let mut backoff = self.retry.backoff;
        for _ in 0..self.retry.attempts {
            if let Some((id, existing)) = self.find_comment(number, marker, bot_login).await? {
                if existing == body {
                    return Ok(CommentOutcome::Unchanged(id));
                }
                let _: serde_json::Value = self
                    .json(
                        Method::Patch,
                        &self.path(&format!("issues/comments/{id}")),
                        Some(&payload),
                    )
                    .await?;
                return Ok(CommentOutcome::Updated(id));
            }
            let path = self.path(&format!("issues/{number}/comments"));
            match self.call(Method::Post { idempotent: false }, &path, Some(&payload)).await {
                Ok((status, _, text)) if status.is_success() => {
                    let comment: Comment = serde_json::from_str(&text).map_err(|error| {
                        GitHubError::failed("reading the created comment", error)
                    })?;
                    // The author GitHub recorded is our login, whatever we took it for.
                    if let Some(user) = comment.user {
                        *self.login.lock().unwrap_or_else(PoisonError::into_inner) =
                            Some(user.login);
                    }
                    return Ok(CommentOutcome::Created(comment.id));
                }
                Ok((status, headers, text)) if !retryable(status, &headers, &text) => {
                    return Err(GitHubError::Refused {
                        action: format!("creating the comment on #{number}"),
                        status,
                        text: short(&text),
                    });
                }
                // A 5xx, a rate limit or a network error: the comment may or may not exist now.
                // Wait as the server asks (or back off), then look again before anything else.
                Ok((status, headers, text)) => {
                    let wait = self.wait_for(status, &headers, &text, backoff)?;
                    tokio::time::sleep(wait).await;
                }
                Err(_) => tokio::time::sleep(backoff).await,
            }
            backoff = self.retry.next_backoff(backoff);
        }
        Err(GitHubError::Stopped(format!(
            "creating the comment on #{number}: gave up after {} tries",
            self.retry.attempts
        )))
    }

    /// The login our comments are written by: `explicit` (`--bot-login`) when given, else the
    /// one known already, else the token's user (`GET /user`), else, for a token that cannot
    /// read `/user` (an App's installation token: 403 "Resource not accessible by
    /// integration"), GraphQL's `viewer`: an App's bot is `slug[bot]` there as on comments.
    /// A token that can tell neither is an error: a guessed login would never find our comment
    /// and post a new one every time.
    pub async fn comment_login(&self, explicit: Option<&str>) -> Result<String> {
        if let Some(login) = explicit {
            return Ok(login.to_owned());
        }
        if let Some(login) = self.login.lock().unwrap_or_else(PoisonError::into_inner).clone() {
            return Ok(login);
        }
        let login = match self.user_login().await? {
            Some(login) => login,
            None => self.viewer_login().await?,
        };
        *self.login.lock().unwrap_or_else(PoisonError::into_inner) = Some(login.clone());
        Ok(login)
    }

    /// Takes `login` (`--bot-login`) as our login from now on; `None` changes nothing.
    pub fn remember_login(&self, login: Option<&str>) {
        if let Some(login) = login {
            *self.login.lock().unwrap_or_else(PoisonError::into_inner) = Some(login.to_owned());
        }
    }

    /// The token's user, or `None` when the token is an integration's.
    async fn user_login(&self) -> Result<Option<String>> {
        let (status, _, text) = self.call(Method::Get, "/user", None).await?;
        if status == StatusCode::FORBIDDEN && text.contains("not accessible by integration") {
            return Ok(None);
        }
        if !status.is_success() {
            return Err(answered(status, "GET", "/user", &text));
        }
        let user: User = serde_json::from_str(&text)
            .map_err(|error| GitHubError::failed("reading GitHub's answer to /user", error))?;
        Ok(Some(user.login))
    }

    /// GraphQL's `viewer`: a bot's login there lacks the `[bot]` its comments carry.
    async fn viewer_login(&self) -> Result<String> {
        #[derive(Deserialize)]
        struct Answer {
            data: Option<Data>,
        }
        #[derive(Deserialize)]
        struct Data {
            viewer: Viewer,
        }
        #[derive(Deserialize)]
        struct Viewer {
            login: String,
            #[serde(rename = "__typename")]
            kind: Option<String>,
        }
        let query = serde_json::json!({ "query": "query { viewer { login __typename } }" });
        let hint = "name the login the comments are written by with --bot-login (or PRGATE_BOT_LOGIN), e.g. my-app[bot]";
        let (client, path) = &self.graphql;
        let (status, _, text) = self
            .call_on(client, Method::Post { idempotent: true }, path, Some(&query))
            .await
            .map_err(|error| GitHubError::NoLogin { hint, cause: Box::new(error) })?;
        let answer: Option<Answer> =
            if status.is_success() { serde_json::from_str(&text).ok() } else { None };
        let Some(viewer) = answer.and_then(|answer| answer.data).map(|data| data.viewer) else {
            return Err(GitHubError::Stopped(format!(
                "this token cannot read /user, and GraphQL's viewer answered {status}: {}\n{hint}",
                short(&text)
            )));
        };
        Ok(match viewer.kind.as_deref() {
            Some("Bot") if !viewer.login.ends_with("[bot]") => format!("{}[bot]", viewer.login),
            _ => viewer.login,
        })
    }
}

/// A check run's request body, with `annotations` (one request's share of them): in progress,
/// or completed with its conclusion and the re-run button.
fn check_run_body(run: &CheckRun<'_>, annotations: &[CheckAnnotation]) -> serde_json::Value {
    let mut body = serde_json::json!({
        "name": run.name,
        "head_sha": run.head_sha,
        "output": {
            "title": run.title,
            "summary": run.summary,
            "annotations": annotations,
        },
    });
    match run.conclusion {
        Some(conclusion) => {
            body["status"] = "completed".into();
            body["conclusion"] = conclusion.into();
            // The button sends a `check_run` `requested_action` event: a maintainer's
            // click starts the run again on the same SHA (`trigger`).
            body["actions"] = serde_json::json!([{
                "label": "Re-run",
                "description": "Run the AMD PR test again",
                "identifier": RERUN_ACTION,
            }]);
        }
        None => body["status"] = "in_progress".into(),
    }
    if let Some(url) = run.details_url {
        body["details_url"] = url.into();
    }
    body
}
