//! GitHub: the only place prgate talks to it. octocrab carries the requests (authenticated,
//! against `GITHUB_API_URL`), with its own retries left out; this module decides what is retried
//! and when: idempotent calls on 5xx and rate limits, with backoff, honouring `retry-after` and
//! `x-ratelimit-reset`. A comment is never created twice: after a failed creation the comments
//! are read again first, and an existing one is edited instead.

use std::time::Duration;

use anyhow::{Context as _, bail};
use http::{HeaderMap, StatusCode};
use octocrab::Octocrab;
use serde::Deserialize;
use serde::de::DeserializeOwned;

/// Where the API is when `GITHUB_API_URL` does not say.
const DEFAULT_API_URL: &str = "https://api.github.com";
/// GitHub lists at most this many items a page.
const PER_PAGE: usize = 100;
/// The most pages of comments read: 10,000 comments, and no endless loop on a server that
/// ignores `page`.
const MAX_PAGES: usize = 100;
/// GitHub's API lists at most this many files of a pull request.
pub(crate) const MAX_LISTED_FILES: usize = 3000;

/// How calls are retried.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RetryPolicy {
    /// Tries in all, the first included.
    pub(crate) attempts: u32,
    /// The first backoff; it doubles each time.
    pub(crate) backoff: Duration,
    /// The longest single wait: a server asking for more is an error.
    pub(crate) max_wait: Duration,
    /// The least wait after a rate limit that does not say how long.
    pub(crate) rate_limit_floor: Duration,
}

impl RetryPolicy {
    /// The policy: 5 tries, backoff from 1 s, a minute after an unexplained rate limit, no
    /// single wait over 10 minutes. `PRGATE_RETRY_BACKOFF_MS` sets the backoff and the
    /// rate-limit floor both (the tests use it).
    pub(crate) fn from_env() -> RetryPolicy {
        let override_ms: Option<u64> =
            std::env::var("PRGATE_RETRY_BACKOFF_MS").ok().and_then(|ms| ms.parse().ok());
        let backoff = override_ms.map_or(Duration::from_secs(1), Duration::from_millis);
        let rate_limit_floor = override_ms.map_or(Duration::from_secs(60), Duration::from_millis);
        RetryPolicy { attempts: 5, backoff, max_wait: Duration::from_secs(600), rate_limit_floor }
    }
}

/// A repository on GitHub, with a client for it.
pub(crate) struct GitHub {
    client: Octocrab,
    owner: String,
    name: String,
    retry: RetryPolicy,
}

/// What prgate reads of a pull request.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct PullRequest {
    pub(crate) number: u64,
    pub(crate) title: String,
    pub(crate) head: GitRef,
    pub(crate) base: GitRef,
    #[serde(default)]
    pub(crate) changed_files: Option<usize>,
}

/// One side of a pull request.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct GitRef {
    #[serde(rename = "ref")]
    pub(crate) reference: String,
    pub(crate) sha: String,
}

/// A PR's files as the API lists them.
#[derive(Debug, Clone)]
pub(crate) struct PrFiles {
    /// Paths, a rename's old path included.
    pub(crate) paths: Vec<String>,
    /// The API listed fewer files than the PR has (it stops at 3,000).
    pub(crate) truncated: bool,
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

#[derive(Deserialize)]
struct User {
    login: String,
}

#[derive(Deserialize)]
struct Permission {
    permission: String,
    role_name: Option<String>,
}

/// What happened to the comment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CommentOutcome {
    Created(u64),
    Updated(u64),
    Unchanged(u64),
}

/// An HTTP method, and whether repeating it is harmless.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Get,
    Post { idempotent: bool },
    Patch,
    Delete,
}

/// A client for `owner/name` with the token of `GITHUB_TOKEN` and the policy from the
/// environment, and the runtime to drive it (its service stack spawns on the runtime it is
/// built in).
pub(crate) fn connect(repository: &str) -> anyhow::Result<(tokio::runtime::Runtime, GitHub)> {
    let token = std::env::var("GITHUB_TOKEN").context("GITHUB_TOKEN is not set")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let github = {
        let _inside = runtime.enter();
        GitHub::new(repository, &token, RetryPolicy::from_env())?
    };
    Ok((runtime, github))
}

impl GitHub {
    /// A client for `owner/name` with `token`, against `GITHUB_API_URL` or api.github.com.
    pub(crate) fn new(repository: &str, token: &str, retry: RetryPolicy) -> anyhow::Result<GitHub> {
        let Some((owner, name)) = repository
            .split_once('/')
            .filter(|(o, n)| !o.is_empty() && !n.is_empty() && !n.contains('/'))
        else {
            bail!("--repository '{repository}': expected owner/name");
        };
        let api = std::env::var("GITHUB_API_URL").unwrap_or_else(|_| DEFAULT_API_URL.to_owned());
        let client = Octocrab::builder()
            .base_uri(api.as_str())
            .with_context(|| format!("GITHUB_API_URL '{api}' is not a URL"))?
            .personal_token(token.to_owned())
            .set_connect_timeout(Some(Duration::from_secs(10)))
            .set_read_timeout(Some(Duration::from_secs(60)))
            .build()
            .context("building the GitHub client")?;
        Ok(GitHub { client, owner: owner.to_owned(), name: name.to_owned(), retry })
    }

    fn path(&self, rest: &str) -> String {
        format!("/repos/{}/{}/{rest}", self.owner, self.name)
    }

    /// The pull request as GitHub has it now.
    pub(crate) async fn pull_request(&self, number: u64) -> anyhow::Result<PullRequest> {
        self.json(Method::Get, &self.path(&format!("pulls/{number}")), None).await
    }

    /// Every file of a PR, page by page; marked truncated when the API stops short of the PR's
    /// own count (it lists at most 3,000).
    pub(crate) async fn pull_request_files(&self, pr: &PullRequest) -> anyhow::Result<PrFiles> {
        let mut paths = Vec::new();
        let mut listed = 0usize;
        for page in 1.. {
            let files: Vec<PrFile> = self
                .json(
                    Method::Get,
                    &self.path(&format!(
                        "pulls/{}/files?per_page={PER_PAGE}&page={page}",
                        pr.number
                    )),
                    None,
                )
                .await?;
            listed += files.len();
            let full = files.len() == PER_PAGE;
            for file in files {
                paths.push(file.filename);
                paths.extend(file.previous_filename);
            }
            if !full || listed >= MAX_LISTED_FILES {
                break;
            }
        }
        let truncated =
            pr.changed_files.is_some_and(|count| count > listed) || listed >= MAX_LISTED_FILES;
        Ok(PrFiles { paths, truncated })
    }

    /// Whether `login` may start a run: write, maintain or admin (triage can label too, and
    /// may not).
    pub(crate) async fn can_start_runs(&self, login: &str) -> anyhow::Result<(bool, String)> {
        let permission: Permission = self
            .json(Method::Get, &self.path(&format!("collaborators/{login}/permission")), None)
            .await?;
        let role = permission.role_name.unwrap_or_else(|| permission.permission.clone());
        let allowed = matches!(role.as_str(), "admin" | "maintain" | "write");
        Ok((allowed, role))
    }

    /// Removes a label from a PR; a label already gone is fine.
    pub(crate) async fn remove_label(&self, number: u64, label: &str) -> anyhow::Result<()> {
        let path = self.path(&format!("issues/{number}/labels/{}", encode(label)));
        let (status, _, body) = self.call(Method::Delete, &path, None).await?;
        if status.is_success() || status == StatusCode::NOT_FOUND {
            Ok(())
        } else {
            bail!("removing the label {label} from #{number}: {status}: {}", short(&body))
        }
    }

    /// Posts a commit status on `sha`.
    pub(crate) async fn set_status(
        &self,
        sha: &str,
        state: &str,
        description: &str,
        context: &str,
        target_url: Option<&str>,
    ) -> anyhow::Result<()> {
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
    /// on every page.
    async fn find_comment(
        &self,
        number: u64,
        marker: &str,
        bot_login: &str,
    ) -> anyhow::Result<Option<(u64, String)>> {
        let mut found = None;
        for page in 1..=MAX_PAGES {
            let comments: Vec<Comment> = self
                .json(
                    Method::Get,
                    &self
                        .path(&format!("issues/{number}/comments?per_page={PER_PAGE}&page={page}")),
                    None,
                )
                .await?;
            let full = comments.len() == PER_PAGE;
            for comment in comments {
                let ours = comment.user.as_ref().is_some_and(|user| user.login == bot_login);
                let body = comment.body.unwrap_or_default();
                // Ours starts with the marker; the oldest wins, should there ever be two.
                if ours && body.trim_start().starts_with(marker) && found.is_none() {
                    found = Some((comment.id, body));
                }
            }
            if !full {
                break;
            }
        }
        Ok(found)
    }

    /// Edits our comment on a PR, or creates it when there is none; skips the call when the
    /// body is unchanged. A creation that fails is never repeated blindly: the comments are read
    /// again, and one that did get created is edited instead.
    pub(crate) async fn upsert_comment(
        &self,
        number: u64,
        marker: &str,
        bot_login: &str,
        body: &str,
    ) -> anyhow::Result<CommentOutcome> {
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
                    let comment: Comment =
                        serde_json::from_str(&text).context("reading the created comment")?;
                    return Ok(CommentOutcome::Created(comment.id));
                }
                Ok((status, _, text)) if !retryable(status, &text) => {
                    bail!("creating the comment on #{number}: {status}: {}", short(&text));
                }
                // A 5xx, a rate limit or a network error: the comment may or may not exist now.
                // Wait as the server asks (or back off), then look again before anything else.
                Ok((status, headers, text)) => {
                    let wait = self.wait_for(status, &headers, &text, backoff)?;
                    tokio::time::sleep(wait).await;
                }
                Err(_) => tokio::time::sleep(backoff).await,
            }
            backoff = (backoff * 2).min(self.retry.max_wait);
        }
        bail!("creating the comment on #{number}: gave up after {} tries", self.retry.attempts)
    }

    /// The login of the token's user, for finding our own comments. `Ok(None)` when the token
    /// is an app's (GitHub answers 403 "Resource not accessible by integration").
    pub(crate) async fn login(&self) -> anyhow::Result<Option<String>> {
        let (status, _, text) = self.call(Method::Get, "/user", None).await?;
        if status == StatusCode::FORBIDDEN && text.contains("not accessible by integration") {
            return Ok(None);
        }
        if !status.is_success() {
            bail!("GitHub answered {status} to GET /user: {}", short(&text));
        }
        let user: User = serde_json::from_str(&text).context("reading GitHub's answer to /user")?;
        Ok(Some(user.login))
    }

    /// A call whose JSON answer is read into `T`; errors name the call and GitHub's message.
    async fn json<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> anyhow::Result<T> {
        let (status, _, text) = self.call(method, path, body).await?;
        if !status.is_success() {
            bail!("GitHub answered {status} to {} {path}: {}", method_name(method), short(&text));
        }
        serde_json::from_str(&text).with_context(|| format!("reading GitHub's answer to {path}"))
    }

    /// One call with the retry policy: repeated on a 5xx, a rate limit or a network error when
    /// repeating it is harmless; the last answer is returned as it is.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> anyhow::Result<(StatusCode, HeaderMap, String)> {
        let repeatable = !matches!(method, Method::Post { idempotent: false });
        let mut backoff = self.retry.backoff;
        for attempt in 1..=self.retry.attempts {
            let last = attempt == self.retry.attempts || !repeatable;
            let response = match method {
                Method::Get => self.client._get(path).await,
                Method::Post { .. } => self.client._post(path, body).await,
                Method::Patch => self.client._patch(path, body).await,
                Method::Delete => self.client._delete(path, body).await,
            };
            let response = match response {
                Ok(response) => response,
                Err(error) if !last => {
                    eprintln!(
                        "prgate: {} {path} failed ({error}); retrying in {} ms",
                        method_name(method),
                        backoff.as_millis()
                    );
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(self.retry.max_wait);
                    continue;
                }
                Err(error) => {
                    return Err(error).with_context(|| format!("{} {path}", method_name(method)));
                }
            };
            let status = response.status();
            let headers = response.headers().clone();
            let text = self
                .client
                .body_to_string(response)
                .await
                .with_context(|| format!("reading the answer to {path}"))?;
            if last || !retryable(status, &text) {
                return Ok((status, headers, text));
            }
            let wait = self.wait_for(status, &headers, &text, backoff)?;
            eprintln!(
                "prgate: GitHub answered {status} to {} {path}; retrying in {} ms",
                method_name(method),
                wait.as_millis()
            );
            tokio::time::sleep(wait).await;
            backoff = (backoff * 2).min(self.retry.max_wait);
        }
        bail!("{} {path}: no tries left", method_name(method))
    }
}

impl GitHub {
    /// How long to wait before trying again: what the server asks, or — for a rate limit that
    /// does not say — at least a minute (GitHub's advice for secondary limits), else the
    /// backoff. A wait longer than the policy's longest is an error, not a hang.
    fn wait_for(
        &self,
        status: StatusCode,
        headers: &HeaderMap,
        body: &str,
        backoff: Duration,
    ) -> anyhow::Result<Duration> {
        let rate_limited =
            status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::FORBIDDEN;
        let wait = match server_wait(headers) {
            Some(wait) => wait,
            None if rate_limited => backoff.max(self.retry.rate_limit_floor),
            None => backoff,
        };
        if wait > self.retry.max_wait {
            bail!(
                "GitHub asks to wait {} s ({status}: {}), longer than prgate waits ({} s)",
                wait.as_secs(),
                short(body),
                self.retry.max_wait.as_secs()
            );
        }
        Ok(wait)
    }
}

/// A server error, or a rate limit (429, or a 403 that says so).
fn retryable(status: StatusCode, body: &str) -> bool {
    status.is_server_error()
        || status == StatusCode::TOO_MANY_REQUESTS
        || (status == StatusCode::FORBIDDEN && body.to_ascii_lowercase().contains("rate limit"))
}

/// How long the server asked us to wait: `retry-after` (seconds), or until
/// `x-ratelimit-reset` when `x-ratelimit-remaining` is 0.
fn server_wait(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| headers.get(name)?.to_str().ok()?.trim().parse::<u64>().ok();
    if let Some(seconds) = number("retry-after") {
        return Some(Duration::from_secs(seconds));
    }
    if number("x-ratelimit-remaining") == Some(0) {
        let reset = number("x-ratelimit-reset")?;
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).ok()?.as_secs();
        return Some(Duration::from_secs(reset.saturating_sub(now) + 1));
    }
    None
}

fn method_name(method: Method) -> &'static str {
    match method {
        Method::Get => "GET",
        Method::Post { .. } => "POST",
        Method::Patch => "PATCH",
        Method::Delete => "DELETE",
    }
}

/// Percent-encodes a path segment (a label's name may hold spaces and more).
fn encode(segment: &str) -> String {
    segment
        .bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (byte as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// The start of an answer, for error messages.
fn short(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(300) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_come_from_the_headers() {
        let mut headers = HeaderMap::new();
        assert_eq!(server_wait(&headers), None);
        headers.insert("retry-after", "7".parse().expect("a header"));
        assert_eq!(server_wait(&headers), Some(Duration::from_secs(7)));
        let mut headers = HeaderMap::new();
        headers.insert("x-ratelimit-remaining", "0".parse().expect("a header"));
        headers.insert("x-ratelimit-reset", "0".parse().expect("a header"));
        assert_eq!(server_wait(&headers), Some(Duration::from_secs(1)));
        assert!(retryable(StatusCode::BAD_GATEWAY, ""));
        assert!(retryable(StatusCode::FORBIDDEN, "You have exceeded a secondary rate limit"));
        assert!(!retryable(StatusCode::FORBIDDEN, "Resource not accessible by integration"));
        assert_eq!(encode("run-ci"), "run-ci");
        assert_eq!(encode("needs ci/gpu"), "needs%20ci%2Fgpu");
    }
}
