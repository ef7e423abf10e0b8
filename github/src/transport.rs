//! How prgate's GitHub client calls the API: one call with the retry policy, the `Link`
//! header's next page, GraphQL's endpoint beside the REST API, and a path segment encoded.
//!
//! Idempotent calls are repeated on a 5xx, a rate limit (a 429, or a 403 that says "rate
//! limit" or "abuse detection", or carries `retry-after`) or a network error, with backoff;
//! a wait the server asks for (`retry-after`, `x-ratelimit-reset`) is honoured up to the
//! policy's longest, past which the call is an error, not a hang. A creation that is not
//! idempotent is tried once.
//!
//! What it leaves to others: what each call means and what is done with its answer
//! (`super`: pull requests, statuses, comments, check runs, the login).

use std::time::Duration;

use http::{HeaderMap, StatusCode};
use octocrab::Octocrab;
use serde::de::DeserializeOwned;

use super::{GitHub, GitHubError, Result};

/// How calls are retried.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Tries in all, the first included.
    pub attempts: u32,
    /// The first backoff; it doubles each time.
    pub backoff: Duration,
    /// The longest single wait: a server asking for more is an error.
    pub max_wait: Duration,
    /// The least wait after a rate limit that does not say how long.
    pub rate_limit_floor: Duration,
}

impl RetryPolicy {
    /// The policy: 5 tries, backoff from 1 s, a minute after an unexplained rate limit, no
    /// single wait over 10 minutes. `PRGATE_RETRY_BACKOFF_MS` sets the backoff and the
    /// rate-limit floor both (the tests use it).
    pub fn from_env() -> RetryPolicy {
        let override_ms: Option<u64> =
            std::env::var("PRGATE_RETRY_BACKOFF_MS").ok().and_then(|ms| ms.parse().ok());
        let backoff = override_ms.map_or(Duration::from_secs(1), Duration::from_millis);
        let rate_limit_floor = override_ms.map_or(Duration::from_secs(60), Duration::from_millis);
        RetryPolicy { attempts: 5, backoff, max_wait: Duration::from_secs(600), rate_limit_floor }
    }

    /// The backoff after `backoff`: doubled, at most `max_wait`.
    pub(crate) fn next_backoff(&self, backoff: Duration) -> Duration {
        backoff.saturating_mul(2).min(self.max_wait)
    }
}

/// An HTTP method, and whether repeating it is harmless.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Method {
    Get,
    Post { idempotent: bool },
    Patch,
    Delete,
}

impl GitHub {
    /// A call whose JSON answer is read into `T`; errors name the call and GitHub's message.
    pub(super) async fn json<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<T> {
        let (status, _, text) = self.call(method, path, body).await?;
        if !status.is_success() {
            return Err(answered(status, method_name(method), path, &text));
        }
        serde_json::from_str(&text).map_err(|error| {
            GitHubError::failed(format!("reading GitHub's answer to {path}"), error)
        })
    }

    /// One call with the retry policy: repeated on a 5xx, a rate limit or a network error when
    /// repeating it is harmless; the last answer is returned as it is.
    pub(super) async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<(StatusCode, HeaderMap, String)> {
        self.call_on(&self.client, method, path, body).await
    }

    /// [`GitHub::call`] with another client (GraphQL's).
    pub(super) async fn call_on(
        &self,
        client: &Octocrab,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<(StatusCode, HeaderMap, String)> {
        let repeatable = !matches!(method, Method::Post { idempotent: false });
        let mut backoff = self.retry.backoff;
        for attempt in 1..=self.retry.attempts {
            let last = attempt == self.retry.attempts || !repeatable;
            let response = match method {
                Method::Get => client._get(path).await,
                Method::Post { .. } => client._post(path, body).await,
                Method::Patch => client._patch(path, body).await,
                Method::Delete => client._delete(path, body).await,
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
                    backoff = self.retry.next_backoff(backoff);
                    continue;
                }
                Err(error) => {
                    let call = format!("{} {path}", method_name(method));
                    return Err(GitHubError::failed(call, error));
                }
            };
            let status = response.status();
            let headers = response.headers().clone();
            let text = client.body_to_string(response).await.map_err(|error| {
                GitHubError::failed(format!("reading the answer to {path}"), error)
            })?;
            if last || !retryable(status, &headers, &text) {
                return Ok((status, headers, text));
            }
            let wait = self.wait_for(status, &headers, &text, backoff)?;
            eprintln!(
                "prgate: GitHub answered {status} to {} {path}; retrying in {} ms",
                method_name(method),
                wait.as_millis()
            );
            tokio::time::sleep(wait).await;
            backoff = self.retry.next_backoff(backoff);
        }
        Err(GitHubError::Stopped(format!("{} {path}: no tries left", method_name(method))))
    }
}

impl GitHub {
    /// How long to wait before trying again: what the server asks, or — for a rate limit that
    /// does not say — at least a minute (GitHub's advice for secondary limits), else the
    /// backoff. A wait longer than the policy's longest is an error, not a hang.
    pub(super) fn wait_for(
        &self,
        status: StatusCode,
        headers: &HeaderMap,
        body: &str,
        backoff: Duration,
    ) -> Result<Duration> {
        let rate_limited =
            status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::FORBIDDEN;
        let wait = match server_wait(headers) {
            Some(wait) => wait,
            None if rate_limited => backoff.max(self.retry.rate_limit_floor),
            None => backoff,
        };
        if wait > self.retry.max_wait {
            return Err(GitHubError::Stopped(format!(
                "GitHub asks to wait {} s ({status}: {}), longer than prgate waits ({} s)",
                wait.as_secs(),
                short(body),
                self.retry.max_wait.as_secs()
            )));
        }
        Ok(wait)
    }
}

/// A server error, or a rate limit: a 429, or a 403 that says "rate limit" or "abuse
/// detection" (GitHub Enterprise's older secondary limit), or that carries `retry-after`.
pub(super) fn retryable(status: StatusCode, headers: &HeaderMap, body: &str) -> bool {
    let body = body.to_ascii_lowercase();
    status.is_server_error()
        || status == StatusCode::TOO_MANY_REQUESTS
        || (status == StatusCode::FORBIDDEN
            && (body.contains("rate limit")
                || body.contains("abuse detection")
                || headers.contains_key("retry-after")))
}

/// The `rel="next"` URL of a `Link` header (RFC 8288, as GitHub writes it).
pub(super) fn next_link(headers: &HeaderMap) -> Option<String> {
    let link = headers.get("link")?.to_str().ok()?;
    link.split(',').find_map(|part| {
        let (target, params) = part.trim().split_once(';')?;
        let target = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        let next = params.split(';').any(|param| {
            param.trim().split_once('=').is_some_and(|(key, value)| {
                key.trim() == "rel"
                    && value.trim().trim_matches('"').split_whitespace().any(|rel| rel == "next")
            })
        });
        next.then(|| target.to_owned())
    })
}

/// GraphQL's endpoint beside the REST API: `https://api.github.com/graphql`, and on GitHub
/// Enterprise `https://HOST/api/graphql` for `https://HOST/api/v3`.
pub(super) fn graphql_url(api: &str) -> String {
    match api.strip_suffix("/api/v3") {
        Some(host) => format!("{host}/api/graphql"),
        None => format!("{api}/graphql"),
    }
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

pub(super) fn method_name(method: Method) -> &'static str {
    match method {
        Method::Get => "GET",
        Method::Post { .. } => "POST",
        Method::Patch => "PATCH",
        Method::Delete => "DELETE",
    }
}

/// Percent-encodes a path segment (a label's name may hold spaces and more).
pub(super) fn encode(segment: &str) -> String {
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
/// GitHub's answer `status` to `method path`, with the start of its body `text`.
pub(super) fn answered(
    status: StatusCode,
    method: &'static str,
    path: &str,
    text: &str,
) -> GitHubError {
    GitHubError::Answered { status, method, path: path.to_owned(), text: short(text) }
}

pub(super) fn short(text: &str) -> String {
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
        let none = HeaderMap::new();
        assert!(retryable(StatusCode::BAD_GATEWAY, &none, ""));
        assert!(retryable(
            StatusCode::FORBIDDEN,
            &none,
            "You have exceeded a secondary rate limit"
        ));
        assert!(!retryable(StatusCode::FORBIDDEN, &none, "Resource not accessible by integration"));
        // GitHub Enterprise Server's older secondary limit.
        let abuse = "You have triggered an abuse detection mechanism. Please wait a few minutes before you try again.";
        assert!(retryable(StatusCode::FORBIDDEN, &none, abuse));
        let mut retry_after = HeaderMap::new();
        retry_after.insert("retry-after", "30".parse().expect("a header"));
        assert!(retryable(StatusCode::FORBIDDEN, &retry_after, "{}"));
        assert!(!retryable(StatusCode::NOT_FOUND, &retry_after, "{}"));
        assert_eq!(encode("run-ci"), "run-ci");
        assert_eq!(encode("needs ci/gpu"), "needs%20ci%2Fgpu");
        assert_eq!(encode("my-app[bot]"), "my-app%5Bbot%5D");
    }

    fn link(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("link", value.parse().expect("a header"));
        headers
    }

    #[test]
    fn the_next_page_is_the_link_headers() {
        // As GitHub sent them: octokit/fixtures (commit cb8bc9d), scenario paginate-issues, the
        // `link` header of each of its five pages (tests/fixtures/github/PROVENANCE.md).
        let real: Vec<String> = serde_json::from_str(include_str!(
            "../../tests/fixtures/github/paginate-issues.link-headers.json"
        ))
        .expect("a list of headers");
        let next: Vec<Option<String>> =
            real.iter().map(|header| next_link(&link(header))).collect();
        let page = |n: u32| {
            Some(format!("https://api.github.com/repositories/1000/issues?per_page=3&page={n}"))
        };
        assert_eq!(next, [page(2), page(3), page(4), page(5), None]);
        let table = [
            (r#"<https://x/a>; rel="prev next""#, Some("https://x/a")),
            (r#"<https://x/b>;rel=next"#, Some("https://x/b")),
            ("garbage", None),
        ];
        for (header, expected) in table {
            assert_eq!(next_link(&link(header)).as_deref(), expected, "{header}");
        }
        assert_eq!(next_link(&HeaderMap::new()), None);
    }

    #[test]
    fn graphql_sits_beside_the_api() {
        assert_eq!(graphql_url("https://api.github.com"), "https://api.github.com/graphql");
        assert_eq!(
            graphql_url("https://ghe.example.com/api/v3"),
            "https://ghe.example.com/api/graphql"
        );
    }
}
