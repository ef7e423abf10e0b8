//! The jobs' progress on standard error: on a terminal one line, rewritten at every look,
//! with each job's id and state; in a log, a line for each change of a job's state.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::time::Instant;

/// What the display shows of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct JobLine {
    /// The model, or `~common`.
    pub target: String,
    pub id: u64,
    /// The state, with its reason when it has one (`PENDING (Resources)`).
    pub state: String,
}

#[derive(Debug)]
pub(super) struct Display {
    terminal: bool,
    run: String,
    started: Instant,
    /// The state each job was last shown in.
    shown: BTreeMap<u64, String>,
}

impl Display {
    pub(super) fn new(terminal: bool, run: &str) -> Display {
        Display { terminal, run: run.to_owned(), started: Instant::now(), shown: BTreeMap::new() }
    }

    /// Shows the jobs as they are now.
    pub(super) fn update(&mut self, jobs: &[JobLine]) {
        let mut stderr = std::io::stderr().lock();
        if self.terminal {
            let states: Vec<String> =
                jobs.iter().map(|job| format!("{} {} {}", job.target, job.id, job.state)).collect();
            let _ignored = write!(
                stderr,
                "\r\x1b[2K{}: {} · {}",
                self.run,
                states.join(" · "),
                crate::run::progress::clock(self.started.elapsed())
            );
            let _ignored = stderr.flush();
            return;
        }
        for job in jobs {
            if self.shown.get(&job.id) != Some(&job.state) {
                let _ignored =
                    writeln!(stderr, "slurm: job {} ({}): {}", job.id, job.target, job.state);
                self.shown.insert(job.id, job.state.clone());
            }
        }
    }

    /// Ends the terminal's line.
    pub(super) fn close(&self) {
        if self.terminal {
            eprintln!();
        }
    }
}
