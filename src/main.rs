//! `prgate`: proves a pull request to a GPU-kernel repository before a reviewer approves it.
//!
//! The binary is the shell around the crates: it parses the command line, reads and writes
//! files, and talks to GitHub (the `prgate-github` crate; `trigger`, `publish`). Deciding is the
//! crates' work (what a PR touches scope's, the verdict the gate's, who may start a run
//! `prgate_github::trigger`'s), rendering the report's, running the runner's.
//!
//! Exit codes, for every subcommand:
//! - 0: success (for the gate: the PR passed; for the trigger: a run starts; for accept: the
//!   acceptance is recorded on the PR's head);
//! - 1: the gate failed the PR, or checks are pending; the trigger started no run; accept
//!   recorded nothing (the label does not count); the node
//!   is drained (`prgate node status`) or its canary failed (`prgate node canary`); a drift
//!   guard is tripped (`prgate history check`);
//! - 2: an error: bad input, an unknown ref, an unreadable file (the message on stderr names
//!   it); for the gate, also a verdict of `error`: some check could not be judged (the
//!   verdict says which and why).

// The flags' doc comments are clap's `--help`, written for a terminal: `[gate]` is a table of
// prgate.toml, `<cache-dir>` a placeholder and a URL is printed as it is, not links or HTML.
#![expect(
    rustdoc::broken_intra_doc_links,
    rustdoc::invalid_html_tags,
    rustdoc::bare_urls,
    reason = "the flags' doc comments are clap's --help, plain text for a terminal"
)]

mod ci;
mod demo;
mod estimate;
mod files;
mod gate;
mod history;
mod node;
mod plan;
mod publish;
mod run;
mod sim;
mod trigger;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The exit code for a run that worked.
const EXIT_OK: u8 = 0;
/// The exit code for a PR the gate did not pass (failed, or checks still pending).
const EXIT_NOT_PASSED: u8 = 1;
/// The exit code for an error: bad input, an unknown ref, an unreadable file, or a verdict
/// that could not judge every check.
const EXIT_ERROR: u8 = 2;

/// Proves a pull request to a GPU-kernel repository: decides what it must run, runs base and
/// PR side by side on the GPU nodes, judges the evidence and reports it on the PR.
#[derive(Debug, Parser)]
#[command(name = "prgate", version, max_term_width = 100)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Plan(plan::PlanArgs),
    Gate(gate::GateArgs),
    Trigger(trigger::TriggerArgs),
    Accept(trigger::accept::AcceptArgs),
    Report(publish::ReportArgs),
    Publish(publish::PublishArgs),
    SimServer(sim::SimServerArgs),
    Bench(sim::BenchArgs),
    Demo(demo::DemoArgs),
    Run(run::RunArgs),
    Ci(ci::CiArgs),
    Node(node::NodeArgs),
    History(history::HistoryArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // prgate only reads objects git already wrote. Like git itself, it does not hash every
    // object again as it reads it (libgit2 does by default; it is a tenth of a large plan).
    git2::opts::strict_hash_verification(false);
    let outcome = match cli.command {
        Command::Plan(args) => plan::run(&args).map(|()| gate::Outcome::Pass),
        Command::Gate(args) => gate::run(&args),
        Command::Trigger(args) => trigger::run(&args)
            .map(|started| if started { gate::Outcome::Pass } else { gate::Outcome::NotPass }),
        Command::Accept(args) => trigger::accept::run(&args)
            .map(|recorded| if recorded { gate::Outcome::Pass } else { gate::Outcome::NotPass }),
        Command::Report(args) => publish::report(&args).map(|()| gate::Outcome::Pass),
        Command::Publish(args) => publish::publish(&args).map(|()| gate::Outcome::Pass),
        Command::SimServer(args) => sim::run(&args).map(|()| gate::Outcome::Pass),
        Command::Bench(args) => sim::bench(&args).map(|()| gate::Outcome::Pass),
        Command::Demo(args) => demo::run(&args).map(|()| gate::Outcome::Pass),
        Command::Run(args) => run::run(&args).map(|()| gate::Outcome::Pass),
        Command::Ci(args) => ci::run(&args),
        Command::Node(args) => node::run(&args),
        Command::History(args) => history::run(&args),
    };
    match outcome {
        Ok(gate::Outcome::Pass) => ExitCode::from(EXIT_OK),
        Ok(gate::Outcome::NotPass) => ExitCode::from(EXIT_NOT_PASSED),
        Ok(gate::Outcome::CannotJudge) => ExitCode::from(EXIT_ERROR),
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}
