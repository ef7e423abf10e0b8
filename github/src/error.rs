//! What can go wrong talking to GitHub, as one typed error. Each message names the call or the
//! setting, and what caused it (the network, a parser) is part of the message, its whole chain,
//! so that a caller printing only the error's `Display` says all of it.

use http::StatusCode;

/// Why a call to GitHub, or setting up the client, failed.
#[derive(Debug, thiserror::Error)]
pub enum GitHubError {
    /// A setting from the environment or the command line that cannot be used.
    #[error("{0}")]
    Setting(String),
    /// Something that failed for a reason of its own (a setting that does not parse, the
    /// client or runtime not starting, the network): `what` and the reason's chain.
    #[error("{what}: {}", chain(cause.as_ref()))]
    Failed { what: String, cause: Box<dyn std::error::Error + Send + Sync> },
    /// An event payload that is not what GitHub sends.
    #[error("{0}")]
    Event(String),
    /// GitHub answered a call with a status that is not a success.
    #[error("GitHub answered {status} to {method} {path}: {text}")]
    Answered { status: StatusCode, method: &'static str, path: String, text: String },
    /// GitHub refused an action.
    #[error("{action}: {status}: {text}")]
    Refused { action: String, status: StatusCode, text: String },
    /// prgate stopped: tries used up, a wait longer than it waits, a `Link` it will not
    /// follow, a login it cannot tell.
    #[error("{0}")]
    Stopped(String),
    /// The token's login could not be told: GraphQL's viewer could not be asked.
    #[error("this token cannot read /user; {hint}: {cause}")]
    NoLogin { hint: &'static str, cause: Box<GitHubError> },
}

impl GitHubError {
    /// A failure of `what` for the reason `cause`.
    pub(crate) fn failed(
        what: impl Into<String>,
        cause: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> GitHubError {
        GitHubError::Failed { what: what.into(), cause: cause.into() }
    }
}

/// `error` and its sources, each after a `: `, as `anyhow`'s `{:#}` writes a chain.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let causes = std::iter::successors(Some(error), |error| error.source());
    causes.map(ToString::to_string).collect::<Vec<_>>().join(": ")
}

/// The result of a call to GitHub.
pub type Result<T, E = GitHubError> = std::result::Result<T, E>;
