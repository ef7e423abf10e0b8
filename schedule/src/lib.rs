//! `prgate-schedule`: what a plan costs and where it runs, decided from plain data.
//!
//! - [`schedule`]: each job's GPU time, from its recipe's shape and the cost formula's
//!   constants or from past runs' event streams (`schedule::History`), and the jobs placed onto
//!   nodes (LPT, a local search and a bounded exact search) with a lower bound on the
//!   makespan; the nodes file (`schedule::nodes_file`) and the assignment `prgate ci`'s stages
//!   share (`schedule::assignment`, with the `not-run` records of what no node can take);
//! - [`estimate`]: a plan's estimate: each running job's estimate from its recipe's text and
//!   the schedule onto the nodes.
//!
//! Pure: text and values in, values out. It opens no file, starts no process, touches no
//! socket and reads no clock: the caller reads the recipes from head's tree
//! (`prgate_runner::estimate::estimate_plan`), the event streams and the nodes file (the
//! binary) and hands over their text, so `prgate plan --estimate` does not link what runs a
//! plan. Below it only `prgate-recipe` (the formats an estimate is made from), `prgate-gate`
//! (the wire types, the event stream's lines) and `prgate-scope` (the plan), never
//! `prgate-sandbox` or the runner (ARCHITECTURE.md, checked by
//! `architecture::schedule_decides_from_plain_data_and_runs_nothing`). The runner re-exports
//! both modules at its root (`prgate_runner::schedule`, `prgate_runner::estimate`).

pub mod estimate;
pub mod schedule;

// The formats, by the paths the modules used inside the runner (`crate::recipe::…`).
use prgate_recipe::{node, recipe};
