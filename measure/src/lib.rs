//! The measuring tools and the parsers of real tools' outputs: text in, evidence out.
//!
//! - [`bench`](mod@bench): the built-in speed client (`prgate bench`), with `bench_serving`'s
//!   definitions, and the readers of `bench_serving`'s and InferenceX's result files;
//! - [`junit`]: the pytest command line for a selection, and its JUnit XML read into per-test
//!   results;
//! - [`accuracy`]: the built-in exact-match evaluator over a JSON Lines dataset, and sgl-eval's
//!   `metrics.json` and predictions read into accuracy evidence.
//!
//! # The contract
//!
//! This crate never starts a child process and never opens a file or a folder: it parses the
//! text or bytes it is handed (a dataset, a result file, an XML report) and builds the argv of a
//! command it does not run. Its one I/O is the HTTP its two clients ([`bench::run`] and
//! [`accuracy::evaluate`]) send over their own sockets to the server under test, on threads it
//! starts and joins. Reading a PR's tree or a container's output folder (safely: no link
//! followed, size-capped), running pytest or sgl-eval, fetching a gated dataset and redacting
//! secrets are the runner's (`prgate-runner`), which hands the text over and re-exports these
//! modules. `cli architecture::measure_parses_what_it_is_handed_and_starts_nothing` checks that
//! the sources name no process, file system, environment or socket API, and the list of
//! dependencies.
//!
//! It depends on no crate of ours but the gate, whose `evidence` types it produces; the gate
//! is pure, so that adds no I/O.

pub mod accuracy;
pub mod bench;
pub mod junit;
