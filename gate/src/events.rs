//! The event stream's lines (`prgate run --events FILE`, `schema_version` 1): a run's progress
//! as it goes, one JSON object per line.
//!
//! ```json
//! {"schema_version":1,"event":"step-started","model":"kimi_k31","check":"accuracy","side":"pr","part":"gsm8k","time_ms":1764430000000}
//! {"schema_version":1,"event":"step-finished","model":"kimi_k31","check":"accuracy","side":"pr","part":"gsm8k","time_ms":1764430061250,"started_ms":1764430000000,"outcome":"accuracy"}
//! {"schema_version":1,"event":"step-skipped","model":null,"check":"common-tests","side":"base","part":null,"time_ms":1764430061300}
//! ```
//!
//! A server's load, wake and release are events too, on the routing step (whose folder holds
//! the server's log), with `started_ms` (and `reason` when it did not come up):
//!
//! ```json
//! {"schema_version":1,"event":"server-started","model":"kimi_k31","check":"routing","side":"base","part":null,"time_ms":1764430600000,"started_ms":1764430000000}
//! ```
//!
//! `event` is `step-started`, `step-finished` or `step-skipped` (done by an earlier run), or a
//! server's `server-started` (a load), `server-woken` (memory taken back after a release) or
//! `server-released`;
//! `model` is null for the common checks; `check` and `side` are the evidence's names; `part`
//! is the [`StepId`]'s part; times are milliseconds since the Unix epoch (UTC). A finished
//! step also has `started_ms` and its record's `outcome` kind, and `reason` when it is
//! `not-run`. A key this prgate does not know is refused (ARCHITECTURE.md, "unknown keys,
//! one rule"); a field is never removed or changed in meaning without raising
//! `schema_version`.
//!
//! Why here: it is a wire format between prgate's parts, like the evidence and the job plan
//! beside it, and it has more than one reader: the runner writes it (`prgate_runner::results`,
//! which stamps each event with the clock), the estimate reads past runs' durations from it
//! (`prgate_schedule`'s history) and the binary's live progress reads it. Plain data, no clock
//! and no I/O: a time is handed in.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::evidence::{Check, NotRunReason, Side};
use crate::job::StepId;

/// The event stream's format version.
pub const EVENTS_SCHEMA_VERSION: u32 = 1;

/// One line of the event stream; see the [module documentation](self) for the format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Event {
    pub schema_version: u32,
    pub event: EventKind,
    pub model: Option<String>,
    pub check: Check,
    pub side: Side,
    pub part: Option<String>,
    /// When it happened, in milliseconds since the Unix epoch.
    pub time_ms: u64,
    /// When a finished step started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<u64>,
    /// The `kind` of a finished step's outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// Why a finished step could not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<NotRunReason>,
}

/// What happened to a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    StepStarted,
    StepFinished,
    /// The step was done by an earlier run.
    StepSkipped,
    /// A side's server was loaded: started, from `started_ms` until it answered its health
    /// check (or failed to, with `reason`). Names the routing step, whose folder holds its log.
    ServerStarted,
    /// A side's server, loaded earlier and released to make room, took its memory back
    /// (SGLang's resume, vLLM's wake-up) from `started_ms`, and answered a warm-up request.
    ServerWoken,
    /// A side's server let its GPU memory go (SGLang's release, vLLM's sleep) without exiting.
    ServerReleased,
}

impl EventKind {
    /// Whether it is a server's event rather than a step's.
    pub fn is_server(self) -> bool {
        matches!(
            self,
            EventKind::ServerStarted | EventKind::ServerWoken | EventKind::ServerReleased
        )
    }
}

impl Event {
    /// An event of `kind` for `step` at `time_ms`, of this format's version, with no start,
    /// outcome or reason.
    pub fn at(event: EventKind, step: &StepId, time_ms: u64) -> Event {
        Event {
            schema_version: EVENTS_SCHEMA_VERSION,
            event,
            model: step.model().map(str::to_owned),
            check: step.check(),
            side: step.side(),
            part: step.part().map(ToString::to_string),
            time_ms,
            started_ms: None,
            outcome: None,
            reason: None,
        }
    }

    /// How long a finished step took.
    pub fn took(&self) -> Option<Duration> {
        let started = self.started_ms?;
        Some(Duration::from_millis(self.time_ms.saturating_sub(started)))
    }
}
