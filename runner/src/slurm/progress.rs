//! The jobs' progress on standard error: on a terminal one line (an `indicatif` bar, as the
//! local step loop's [`crate::run::progress`]), redrawn at every look, with each job's id and
//! state; otherwise (a log, or the caller turned the line off) a line for each change of a
//! job's state.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

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
    /// The terminal's line; hidden when the caller turned it off or standard error is not a
    /// terminal (`indicatif` hides it then), and the changes are written as lines instead.
    bar: ProgressBar,
    run: String,
    started: Instant,
    /// The state each job was last shown in, in a log.
    shown: BTreeMap<u64, String>,
}

impl Display {
    /// The display of the run `run`; its line is drawn only when `line` and standard error is
    /// a terminal.
    pub(super) fn new(line: bool, run: &str) -> Display {
        let target = if line { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
        let bar = ProgressBar::with_draw_target(None, target).with_style(
            ProgressStyle::with_template("{wide_msg}").unwrap_or_else(|_| {
                // The template is a constant that parses; the default style is the fallback.
                ProgressStyle::default_spinner()
            }),
        );
        Display { bar, run: run.to_owned(), started: Instant::now(), shown: BTreeMap::new() }
    }

    /// Shows the jobs as they are now.
    pub(super) fn update(&mut self, jobs: &[JobLine]) {
        if !self.bar.is_hidden() {
            let states: Vec<String> =
                jobs.iter().map(|job| format!("{} {} {}", job.target, job.id, job.state)).collect();
            self.bar.set_message(format!(
                "{}: {} · {}",
                self.run,
                states.join(" · "),
                crate::run::progress::clock(self.started.elapsed())
            ));
            return;
        }
        let mut stderr = std::io::stderr().lock();
        for job in jobs {
            if self.shown.get(&job.id) != Some(&job.state) {
                let _ignored =
                    writeln!(stderr, "slurm: job {} ({}): {}", job.id, job.target, job.state);
                self.shown.insert(job.id, job.state.clone());
            }
        }
    }

    /// Ends the terminal's line, leaving the jobs' last states on it.
    pub(super) fn close(&self) {
        self.bar.abandon();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: u64, state: &str) -> JobLine {
        JobLine { target: "kimi_k3".to_owned(), id, state: state.to_owned() }
    }

    #[test]
    fn without_the_line_each_change_of_state_is_logged_once() {
        let mut display = Display::new(false, "prgate-0123abcd");
        assert!(display.bar.is_hidden());
        display.update(&[job(41, "PENDING (Resources)"), job(42, "PENDING (Resources)")]);
        display.update(&[job(41, "RUNNING"), job(42, "PENDING (Resources)")]);
        let shown: Vec<(u64, &str)> =
            display.shown.iter().map(|(id, state)| (*id, state.as_str())).collect();
        assert_eq!(shown, [(41, "RUNNING"), (42, "PENDING (Resources)")]);
        display.close();
    }
}
