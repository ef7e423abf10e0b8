//! End-to-end tests of the `prgate` binary: the real program on real git repositories that the
//! tests build in temporary directories.

mod accuracy;
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
