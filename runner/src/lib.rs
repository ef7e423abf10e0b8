//! The runner: turns a plan into evidence on a GPU node.
//!
//! It will own every process, socket, container and cluster job prgate starts: installing base
//! and PR, the servers, tests, accuracy evals and speed benchmarks. Nothing here yet; see issue 5.
