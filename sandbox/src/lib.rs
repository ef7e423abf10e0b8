//! The sandbox: the only crate of prgate's that starts a child, and the walls around what a
//! pull request's code touches.
//!
//! Its contract: every command of a step (a PR's install, tests, servers, benchmarks) starts
//! through [`process`] in its own process group, stopped as a whole, its log capped, and runs
//! inside the node's container ([`container`]) with the node's GPUs only, read-only checkpoints,
//! no network or the run's internal one, and an explicit environment; the tree it runs in is a
//! clean export of a commit ([`export`]); what it leaves behind is read as untrusted input
//! ([`untrusted`]); and the node's secret values are replaced in everything prgate writes
//! ([`redact`]), each file written whole or not at all ([`atomic`]). Each place that starts a
//! child says why (`#[expect(clippy::disallowed_methods, reason = ...)]`, `clippy.toml`).
//!
//! What it leaves to others: what to run and when (the runner's step loop, `prgate-runner`,
//! which re-exports these modules at its root), what a recipe or a node profile says
//! (`prgate-recipe`, the one crate of ours below it), and judging the outcome (the gate). The
//! runner keeps two children of its own, each marked: SLURM's commands (`slurm/client.rs`)
//! and `scontrol`'s query of a job's nodes (`run/topology.rs`); the binary one, the demo's
//! python3 check (`src/demo.rs`); tests start their own (`run/leftovers.rs`'s test a group a
//! killed run leaves). `cli architecture::` holds that list.
//!
//! - [`process`]: children in their own process groups, stopped as a whole (on timeout, drop,
//!   Ctrl-C or SIGTERM), their logs capped to the first and last MiB (`docs/logs.md`), the
//!   progress watchdog, port leases and the health gate;
//! - [`container`]: the container launcher: a command for a run as the engine's `run`, with
//!   the node's GPUs only, the checkpoints read-only, no network (or the run's internal one
//!   for a server, a server's namespace for its clients) and an explicit environment;
//!   stopping, cleanup by label and the image's digest (`docs/container.md`);
//! - [`export`]: a commit's tree as a clean directory (no `.git`), for installing and testing;
//! - [`untrusted`]: reading a file of a PR's tree or a container's output folder: a regular
//!   file below its root, no link followed at any component, size-capped;
//! - [`redact`]: the node's secret values replaced by `[redacted NAME]` in everything prgate
//!   writes (evidence, events, logs, comment, summary, report);
//! - [`atomic`]: a file replaced whole or not at all (a temporary file renamed over it).

pub mod atomic;
pub mod container;
pub mod export;
pub mod process;
pub mod redact;
pub mod untrusted;
