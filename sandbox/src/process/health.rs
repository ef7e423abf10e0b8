//! The health gate: a server is up when its health endpoint answers `2xx`, and it is not
//! coming up once its process has exited.

use std::path::PathBuf;
use std::process::ExitStatus;
use std::thread;
use std::time::{Duration, Instant};

use super::{ChildGroup, ProcessError, tail};

/// How many lines of the server's log a health error carries.
pub const HEALTH_TAIL_LINES: usize = 40;

/// The pause between two requests.
const POLL_INTERVAL: Duration = Duration::from_millis(200);
/// The longest one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// A server that answered healthy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Healthy {
    /// How long it took.
    pub waited: Duration,
    /// How many requests were sent.
    pub attempts: u32,
}

/// Why a server is not healthy. The log lines are the server's: show them escaped.
#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    #[error(
        "the server exited ({status}) after {waited:.1?}, before {url} answered healthy\nlast lines of {log}:\n{tail}"
    )]
    Exited { url: String, status: ExitStatus, waited: Duration, log: PathBuf, tail: String },
    #[error(
        "{url} did not answer healthy within {timeout:.1?} (last answer: {last})\nlast lines of {log}:\n{tail}"
    )]
    TimedOut { url: String, timeout: Duration, last: String, log: PathBuf, tail: String },
    #[error(transparent)]
    Process(#[from] ProcessError),
}

/// Polls `url` with `GET` until it answers with a `2xx` status. Fails as soon as `child`'s
/// leader exits, with its exit status and the last [`HEALTH_TAIL_LINES`] of its log (the rest
/// of its group is stopped first: the log is complete only then), and after `timeout` with the
/// last answer and the log's tail as a live reader sees it. It does not stop a child that
/// still runs: the caller decides (dropping the [`ChildGroup`] stops it). Proxy settings of the environment
/// are ignored: the server is local.
pub fn wait_healthy(
    url: &str,
    timeout: Duration,
    child: &mut ChildGroup,
) -> Result<Healthy, HealthError> {
    let started = Instant::now();
    let deadline = super::deadline_after(timeout);
    let agent: ureq::Agent =
        ureq::Agent::config_builder().http_status_as_error(false).proxy(None).build().into();
    let mut last = "none yet".to_owned();
    let mut attempts = 0;
    loop {
        if let Some(status) = child.try_wait()? {
            // The server is gone: what it left running goes too, so that its log is complete
            // (its tail written) before it is read.
            child.stop()?;
            return Err(HealthError::Exited {
                url: url.to_owned(),
                status,
                waited: started.elapsed(),
                log: child.log().to_path_buf(),
                tail: log_tail(child),
            });
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(HealthError::TimedOut {
                url: url.to_owned(),
                timeout,
                last,
                log: child.log().to_path_buf(),
                tail: log_tail(child),
            });
        }
        attempts += 1;
        let answer = agent
            .get(url)
            .config()
            .timeout_global(Some(remaining.min(REQUEST_TIMEOUT)))
            .build()
            .call();
        match answer {
            // The child must still be running: a healthy answer from whatever else took its
            // port is not its health.
            Ok(response) if response.status().is_success() && child.try_wait()?.is_none() => {
                return Ok(Healthy { waited: started.elapsed(), attempts });
            }
            Ok(response) => last = format!("HTTP {}", response.status()),
            Err(error) => last = error.to_string(),
        }
        thread::sleep(POLL_INTERVAL.min(deadline.saturating_duration_since(Instant::now())));
    }
}

fn log_tail(child: &ChildGroup) -> String {
    tail(child.log(), HEALTH_TAIL_LINES)
        .unwrap_or_else(|error| format!("(the log cannot be read: {error})"))
}
