//! The runner: turns a plan into evidence on a GPU node.
//!
//! It owns every process, socket, container and cluster job prgate starts: installing base
//! and PR, the servers, tests, accuracy evals and speed benchmarks.
//!
//! - [`sim_server`]: a real OpenAI-compatible HTTP server whose speed, noise, failures and
//!   accuracy are configured, so the runner and the demo can be exercised without a GPU;
//! - [`bench`]: the built-in speed client (`prgate bench`), with `bench_serving`'s definitions.

pub mod bench;
pub mod sim_server;
