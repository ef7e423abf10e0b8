//! The runner: turns a plan into evidence on a GPU node.
//!
//! It owns every process, socket, container and cluster job prgate starts: installing base
//! and PR, the servers, tests, accuracy evals and speed benchmarks. The simulated server it
//! is tested against is a crate of its own (`prgate-sim-server`), not part of the runner.
//!
//! - [`export`]: a commit's tree as a clean directory (no `.git`), for installing and testing;
//! - [`bench`](mod@bench): the built-in speed client (`prgate bench`), with `bench_serving`'s
//!   definitions;
//! - [`junit`]: the pytest command line for a selection, and its JUnit XML read into per-test
//!   results;
//! - [`accuracy`]: the built-in exact-match evaluator over a JSONL dataset, and sgl-eval's
//!   `metrics.json` read into accuracy evidence;
//! - [`process`]: children in their own process groups, stopped as a whole (on timeout, drop,
//!   Ctrl-C or SIGTERM), their logs' tails, port leases and the health gate;
//! - [`results`]: the results directory: one evidence file per finished step, written
//!   atomically so a rerun resumes, per-step logs, and the JSON-lines event stream;
//! - [`recipe`]: a model's recipe from the PR's tree (`test/e2e/<model>.toml`): its server
//!   command, tests, timing scripts, accuracy benchmarks and speed sweep, checked;
//! - [`job`]: the job plan (`job.json`, `docs/job.md`), built once from the plan, both sides'
//!   recipes and the node: every target and every step the run must account for, the one
//!   source the step loop, the progress line, the SLURM gather and the gate read;
//! - [`run`]: the step loop (`prgate run`) that puts the parts together: the job plan's steps
//!   into evidence on this node, phase by phase: installs, servers on disjoint GPUs or in
//!   turns, common checks, a whole-run time limit and progress on a terminal;
//! - [`reuse`]: re-running only what is missing: a run of the same commits takes over the
//!   judged steps of an earlier one whose inputs are unchanged, from the node's store
//!   (`docs/rerun.md`);
//! - [`gpu_time`]: each target's GPU time by phase against its estimate, in the results and
//!   the node's history (`docs/gpu-hours.md`);
//! - [`cache`]: what outlives a run on a node: cached base accuracy and the base-vs-base speed
//!   noise the gate calibrates with;
//! - [`node`]: the node profile, trusted and local to the node: its hardware, GPUs, image,
//!   checkpoints, secrets and directories;
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
//! - [`estimate`]: a plan's estimate: the recipes read from head's tree, each job's GPU time
//!   and the schedule onto the nodes;
//! - [`lock`]: the host lock: one run on a host at a time, a refusal that names the holder,
//!   and no stale lock after a killed run;
//! - [`preflight`]: before any install, whether the node has what the run needs: its GPUs
//!   visible and free, disk space, the checkpoints on disk and the image;
//! - [`schedule`]: each model's GPU time, from its recipe or past runs' event streams, and
//!   the models placed onto nodes (LPT, a local search and a bounded exact search), with a
//!   lower bound on the makespan; pure;
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

pub mod accuracy {
    //! Accuracy evidence, the runner's half: reading a dataset from a tree and sgl-eval's files
    //! from a container's folder as untrusted files, and fetching a gated dataset ([`gated`]).
    //!
    //! The evaluator and the parsers are `prgate_measure::accuracy`'s, re-exported here so that
    //! `accuracy::evaluate`, `accuracy::parse_dataset`, ... read as before: this module reads the
    //! files (a regular file below its root, no link followed, size-capped: [`crate::untrusted`])
    //! and hands their text over.

    pub mod gated;
    pub mod sgl_eval {
        //! sgl-eval's results, the runner's half: the run directory found under sgl-eval's `--out-dir`
        //! and its files read as untrusted files; the parsing is `prgate_measure::accuracy::sgl_eval`'s,
        //! re-exported here.

        use std::path::{Path, PathBuf};

        use prgate_gate::evidence::Outcome;
        pub use prgate_measure::accuracy::sgl_eval::*;

        use super::{AccuracyError, ParseError};

        /// The one run directory (`sgl_eval_*` holding a `metrics.json`) under sgl-eval's `--out-dir`.
        /// Give every run a fresh out-dir: two run directories are an error.
        pub fn find_run_dir(out_dir: &Path) -> Result<PathBuf, AccuracyError> {
            let read = |source| AccuracyError::Read { path: out_dir.to_owned(), source };
            let mut runs = Vec::new();
            for entry in std::fs::read_dir(out_dir).map_err(read)? {
                let entry = entry.map_err(read)?;
                let path = entry.path();
                // A link is not a run directory (the file type is the entry's own, not its target's).
                let is_directory = entry.file_type().is_ok_and(|kind| kind.is_dir());
                let is_run = is_directory
                    && path.file_name().and_then(|name| name.to_str()).is_some_and(|name| {
                        name.starts_with("sgl_eval_")
                            && crate::untrusted::open_path(out_dir, &path.join(METRICS_FILE)).is_ok()
                    });
                if is_run {
                    runs.push(path);
                }
            }
            match runs.len() {
                1 => Ok(runs.remove(0)),
                found => Err(AccuracyError::Parse {
                    path: out_dir.to_owned(),
                    error: ParseError {
                        line: None,
                        field: None,
                        problem: format!(
                            "{found} sgl-eval run directories (sgl_eval_*/{METRICS_FILE}); expected one"
                        ),
                    },
                }),
            }
        }

        /// Reads a run directory `run_dir` below `out_dir` (the folder the command wrote into): its
        /// `metrics.json`, and its `output-rs0.jsonl` when there is one. Both are read as untrusted
        /// files below `out_dir` (regular files, no link followed, at most
        /// [`MAX_RESULT_FILE`](crate::untrusted::MAX_RESULT_FILE) bytes).
        pub fn read_run(out_dir: &Path, run_dir: &Path, benchmark: &str) -> Result<Outcome, AccuracyError> {
            let metrics_path = run_dir.join(METRICS_FILE);
            let parse_error = |path: &Path| {
                let path = path.to_owned();
                move |error| AccuracyError::Parse { path, error }
            };
            let metrics =
                parse_metrics(&read(out_dir, &metrics_path)?).map_err(parse_error(&metrics_path))?;
            let predictions_path = run_dir.join(PREDICTIONS_FILE);
            let per_question = match read(out_dir, &predictions_path) {
                Ok(text) => Some(parse_predictions(&text).map_err(parse_error(&predictions_path))?),
                Err(AccuracyError::Untrusted(error))
                    if matches!(error.problem, crate::untrusted::Problem::Missing) =>
                {
                    None
                }
                Err(error) => return Err(error),
            };
            outcome(benchmark, &metrics, per_question).map_err(parse_error(&metrics_path))
        }

        fn read(out_dir: &Path, path: &Path) -> Result<String, AccuracyError> {
            let bytes = crate::untrusted::read_path(out_dir, path, crate::untrusted::MAX_RESULT_FILE)?;
            Ok(String::from_utf8_lossy(&bytes).into_owned())
        }
    }

    use std::path::{Path, PathBuf};

    pub use prgate_measure::accuracy::*;

    /// Why an accuracy file cannot be had.
    #[derive(Debug, thiserror::Error)]
    pub enum AccuracyError {
        /// A file cannot be read.
        #[error("error reading {}", path.display())]
        Read {
            path: PathBuf,
            #[source]
            source: std::io::Error,
        },
        /// A file of an untrusted tree (a dataset, a command's metrics) is not read.
        #[error(transparent)]
        Untrusted(#[from] crate::untrusted::UntrustedFileError),
        /// A file cannot be parsed.
        #[error("error parsing {}: {error}", path.display())]
        Parse { path: PathBuf, error: ParseError },
    }

    /// The largest dataset file the built-in evaluator reads: 64 MiB.
    pub const MAX_DATASET_FILE: u64 = 64 * 1024 * 1024;

    /// Reads the JSON Lines dataset file `relative` of `tree` (a PR's or the base's tree): a
    /// regular file below it of at most [`MAX_DATASET_FILE`] bytes, reached without following a
    /// link, so a dataset that is a link to a host file is refused, not sent to the server.
    pub fn read_dataset(tree: &Path, relative: &Path) -> Result<Vec<Question>, AccuracyError> {
        let text = crate::untrusted::read_to_string(tree, relative, MAX_DATASET_FILE)?;
        let path = tree.join(relative);
        parse_dataset(&text).map_err(|error| AccuracyError::Parse { path, error })
    }
}
pub use prgate_measure::bench;
pub mod cache;
pub mod container;
pub mod estimate;
pub mod export;
pub mod gpu_time;
pub mod health;
pub mod history;
pub mod job;
pub mod junit {
    //! pytest's JUnit XML, the runner's half: a file read and handed to
    //! `prgate_measure::junit::parse_junit`; the argv and the parser are `prgate_measure::junit`'s,
    //! re-exported here.

    use std::path::{Path, PathBuf};

    use prgate_gate::evidence::TestResult;
    pub use prgate_measure::junit::*;

    /// Why a JUnit XML file cannot be read.
    #[derive(Debug, thiserror::Error)]
    pub enum JunitError {
        /// The file cannot be read (pytest did not write it: it crashed, or never ran).
        #[error("error reading the JUnit XML file {}", path.display())]
        Read {
            path: PathBuf,
            #[source]
            source: std::io::Error,
        },
        /// The file is not JUnit XML, or is cut short.
        #[error("error parsing the JUnit XML file {}: {error}", path.display())]
        Parse { path: PathBuf, error: ParseError },
    }

    /// Reads the JUnit XML file at `path` into one result per test case, in the file's order.
    pub fn read_junit_file(path: &Path) -> Result<Vec<TestResult>, JunitError> {
        let bytes =
            std::fs::read(path).map_err(|source| JunitError::Read { path: path.to_owned(), source })?;
        parse_junit(&bytes).map_err(|error| JunitError::Parse { path: path.to_owned(), error })
    }
}
pub mod key;
pub mod ledger;
pub mod lock;
pub mod node;
pub mod preflight;
pub mod process;
pub mod recipe;
pub mod redact;
pub mod results;
pub mod reuse;
pub mod rfc3339;
pub mod run;
pub mod schedule;
pub mod slurm;
pub mod untrusted;
