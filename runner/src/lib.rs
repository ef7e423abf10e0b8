//! The runner: turns a plan into evidence on a GPU node.
//!
//! It owns every process, socket, container and cluster job prgate starts: installing base
//! and PR, the servers, tests, accuracy evals and speed benchmarks. The simulated server it
//! is tested against is a crate of its own (`prgate-sim-server`), not part of the runner. The
//! children it starts go through `prgate-sandbox` ([`process`], [`container`], [`export`],
//! [`untrusted`], [`redact`], re-exported here), but for its own marked SLURM commands. What a
//! plan costs and where it runs is `prgate-schedule`'s ([`schedule`], and [`estimate`]'s
//! estimate), re-exported here too.
//!
//! - [`export`]: a commit's tree as a clean directory (no `.git`), for installing and testing;
//! - [`bench`](mod@bench): the built-in speed client (`prgate bench`), with `bench_serving`'s
//!   definitions: `prgate-measure`'s, re-exported;
//! - [`junit`]: the pytest command line for a selection, and its JUnit XML read into per-test
//!   results: `prgate-measure`'s, re-exported, with the reading of the file;
//! - [`accuracy`]: the built-in exact-match evaluator over a JSONL dataset, and sgl-eval's
//!   `metrics.json` read into accuracy evidence: `prgate-measure`'s, re-exported, with the
//!   reading of the dataset and sgl-eval's files as untrusted files and the gated download;
//! - [`process`]: children in their own process groups, stopped as a whole (on timeout, drop,
//!   Ctrl-C or SIGTERM), their logs' tails, port leases and the health gate;
//! - [`results`]: the results directory: one evidence file per finished step, written
//!   atomically so a rerun resumes, per-step logs, and the JSON-lines event stream;
//! - [`recipe`]: a model's recipe from the PR's tree (`test/e2e/<model>.toml`): its server
//!   command, tests, timing scripts, accuracy benchmarks and speed sweep, checked; the
//!   `prgate-recipe` crate's, re-exported here;
//! - [`job`]: the job plan (`job.json`, `docs/job.md`), built once from the plan, both sides'
//!   recipes and the node: every target and every step the run must account for, the one
//!   source the step loop, the progress line, the SLURM gather and the gate read;
//! - [`run`]: the step loop (`prgate run`) that puts the parts together: the job plan's steps
//!   into evidence on this node, phase by phase: installs, servers on disjoint GPUs or in
//!   turns, common checks, a whole-run time limit and progress on a terminal;
//! - [`run_id`]: a run's id, which names its containers (the PR commit and the results
//!   directory);
//! - [`reuse`]: re-running only what is missing: a run of the same commits takes over the
//!   judged steps of an earlier one whose inputs are unchanged, from the node's store
//!   (`docs/rerun.md`);
//! - [`gpu_time`]: each target's GPU time by phase against its estimate, in the results and
//!   the node's history (`docs/gpu-hours.md`);
//! - [`cache`]: what outlives a run on a node: cached base accuracy and the base-vs-base speed
//!   noise the gate calibrates with;
//! - [`node`]: the node profile, trusted and local to the node: its hardware, GPUs, image,
//!   checkpoints, secrets and directories; the `prgate-recipe` crate's, re-exported here;
//! - [`container`]: the container launcher: a command for a run as the engine's `run`, with
//!   the node's GPUs only, the checkpoints read-only, no network (or the run's internal one
//!   for a server, a server's namespace for its clients) and an explicit environment;
//!   stopping, cleanup by label and the image's digest (`docs/container.md`);
//! - [`health`]: the node health ledger: strikes attributed to a node (preflight findings,
//!   a step broken on both sides, GPU errors in base-side logs), its drain after too many,
//!   and its re-admission by a passing canary;
//! - [`ledger`]: an append-only JSON-lines ledger file, written under a `flock` and atomically
//!   (the health ledger's and the history's machinery);
//! - [`history`]: the history folder: the ledger of merged changes (the drift guard's input)
//!   and the PR tests' saved results waiting for their PR to merge;
//! - [`estimate`]: a plan's estimate: the recipes read from head's tree, handed as text to
//!   `prgate-schedule`'s estimate (re-exported there): each job's GPU time and the schedule
//!   onto the nodes;
//! - [`lock`]: the host lock: one run on a host at a time, a refusal that names the holder,
//!   and no stale lock after a killed run;
//! - [`preflight`]: before any install, whether the node has what the run needs: its GPUs
//!   visible and free, disk space, the checkpoints on disk and the image;
//! - [`schedule`]: each model's GPU time, from its recipe or past runs' event streams, and
//!   the models placed onto nodes (LPT, a local search and a bounded exact search), with a
//!   lower bound on the makespan, the nodes file and the assignment; pure: the
//!   `prgate-schedule` crate's, re-exported here;
//! - [`slurm`]: the SLURM executor: a run as one batch job per model, their states read with
//!   `squeue` and `scontrol`, cancelled by name, gathered into one results directory, and a
//!   job that did not complete recorded as `not-run` evidence (`docs/slurm.md`);
//! - [`redact`]: the node's secret values replaced by `[redacted NAME]` in everything prgate
//!   writes (evidence, events, comment, summary, report);
//! - [`rfc3339`]: times as RFC 3339 in UTC to the second, the one form prgate's own files
//!   write a time in (the health ledger, the host lock, the history);
//! - [`key`]: content keys (SHA-256) for recipes, cache entries and ids;
//! - [`untrusted`]: reading a file of a PR's tree or a container's output folder: a regular
//!   file below its root, no link followed at any component, size-capped.

pub mod accuracy;
pub mod bench;
pub mod cache;
pub mod estimate;
pub mod gpu_time;
pub mod health;
pub mod history;
pub mod job;
pub mod junit;
pub mod key;
pub mod ledger;
pub mod lock;
pub mod preflight;
pub mod results;
pub mod reuse;
pub mod rfc3339;
pub mod run;
pub mod run_id;
pub mod slurm;

/// The formats, from `prgate-recipe`: `crate::recipe::…` and `crate::node::…` as before.
pub use prgate_recipe::{node, recipe};

/// What a plan costs and where it runs, from `prgate-schedule`: `crate::schedule::…` as before
/// (`crate::estimate` is its estimate, with the recipes read from head's tree).
pub use prgate_schedule::schedule;

/// Where children run, from `prgate-sandbox`: `crate::process::…`, `crate::container::…` and the
/// rest as before.
pub use prgate_sandbox::{container, export, process, redact, untrusted};
