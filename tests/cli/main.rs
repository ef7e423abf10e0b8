//! End-to-end tests of the `prgate` binary: the real program on real git repositories that the
//! tests build in temporary directories.

#![expect(
    clippy::disallowed_methods,
    reason = "the tests run the prgate binary and the real tools around it (git, pytest, SLURM)"
)]

mod accuracy;
mod architecture;
mod ci;
mod codeowners;
mod contract;
mod demo;
mod fail_closed;
mod gate;
mod github;
mod github_teams;
mod history;
mod node;
mod plan;
mod rerun;
mod run;
mod sim;
mod slurm;
mod support;
mod topology;
mod workflow;
