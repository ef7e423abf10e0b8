//! Progress on a terminal: one line on standard error (an `indicatif` bar), redrawn as steps
//! start and finish, with the steps done, the step running, the time spent and an estimate of
//! the time left. Quiet when standard error is not a terminal (`indicatif` hides it; the event
//! stream is the record in a log), and off when the caller says so.
//!
//! The estimate: the steps still expected (a speed cell counts as the estimate's
//! [`crate::schedule::EXPECTED_PAIRS`] pairs) times the mean duration of the steps this run has
//! run so far. It is labelled "about" and printed only once a step has finished.

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::results::{Event, EventKind, StepId};

pub(super) struct Progress {
    bar: ProgressBar,
    started: Instant,
    expected: usize,
    done: usize,
    ran: usize,
    ran_for: Duration,
}

impl Progress {
    /// Progress over about `expected` steps; shown only when `enabled` and standard error is a
    /// terminal.
    pub(super) fn new(enabled: bool, expected: usize) -> Progress {
        let target =
            if enabled { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
        Progress::drawn_on(target, expected)
    }

    fn drawn_on(target: ProgressDrawTarget, expected: usize) -> Progress {
        let bar = ProgressBar::with_draw_target(None, target).with_style(
            ProgressStyle::with_template("{wide_msg}").unwrap_or_else(|_| {
                // The template is a constant that parses; the default style is the fallback.
                ProgressStyle::default_spinner()
            }),
        );
        Progress {
            bar,
            started: Instant::now(),
            expected,
            done: 0,
            ran: 0,
            ran_for: Duration::ZERO,
        }
    }

    /// Follows one event of the step loop.
    pub(super) fn observe(&mut self, event: &Event) {
        match event.event {
            EventKind::StepStarted => {
                let part = event.part.as_deref().and_then(crate::results::Part::parse);
                let step = StepId::new(event.model.as_deref(), event.check, event.side, part);
                self.started(&step);
            }
            EventKind::StepFinished => self.finished(event.took()),
            EventKind::StepSkipped => self.finished(None),
            EventKind::ServerStarted | EventKind::ServerWoken | EventKind::ServerReleased => {}
        }
    }

    fn started(&mut self, step: &StepId) {
        if self.bar.is_hidden() {
            return;
        }
        let what = describe(step);
        let elapsed = self.started.elapsed();
        let left = self
            .estimate()
            .map_or_else(String::new, |left| format!(" · about {} left", clock(left)));
        let total = self.expected.max(self.done + 1);
        self.bar.set_message(format!(
            "{}/{} steps · {what} · {} elapsed{left}",
            self.done,
            total,
            clock(elapsed)
        ));
    }

    fn finished(&mut self, took: Option<Duration>) {
        self.done += 1;
        if let Some(took) = took {
            self.ran += 1;
            self.ran_for += took;
        }
    }

    /// Ends the line, at the end of the run.
    pub(super) fn close(&self) {
        if self.done > 0 {
            self.bar.finish_with_message(format!(
                "{} steps in {}",
                self.done,
                clock(self.started.elapsed())
            ));
        } else {
            self.bar.finish_and_clear();
        }
    }

    fn estimate(&self) -> Option<Duration> {
        if self.ran == 0 {
            return None;
        }
        let mean = self.ran_for / u32::try_from(self.ran).unwrap_or(u32::MAX);
        let left = self.expected.saturating_sub(self.done).max(1);
        Some(mean.saturating_mul(u32::try_from(left).unwrap_or(u32::MAX)))
    }
}

fn describe(step: &StepId) -> String {
    let mut text = format!(
        "{} {} ({})",
        step.model().unwrap_or("common"),
        step.check().describe(),
        match step.side() {
            prgate_gate::evidence::Side::Base => "base",
            prgate_gate::evidence::Side::Pr => "PR",
            prgate_gate::evidence::Side::Both => "both",
        }
    );
    if let Some(part) = step.part() {
        text.push_str(" · ");
        text.push_str(&part.to_string());
    }
    text
}

/// `1h02m`, `4m05s`, `12s`.
pub(crate) fn clock(duration: Duration) -> String {
    let seconds = duration.as_secs();
    match (seconds / 3600, seconds / 60 % 60, seconds % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_reads_like_a_duration() {
        let cases = [(12, "12s"), (245, "4m05s"), (3720, "1h02m")];
        for (seconds, expect) in cases {
            assert_eq!(clock(Duration::from_secs(seconds)), expect);
        }
    }

    /// A terminal that keeps what is written to it.
    #[derive(Debug, Default, Clone)]
    struct Screen(std::sync::Arc<std::sync::Mutex<String>>);

    impl indicatif::TermLike for Screen {
        fn width(&self) -> u16 {
            200
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, text: &str) -> std::io::Result<()> {
            self.write_str(&format!("{text}\n"))
        }
        fn write_str(&self, text: &str) -> std::io::Result<()> {
            self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push_str(text);
            Ok(())
        }
        fn clear_line(&self) -> std::io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn on_a_terminal_the_line_names_the_step_and_ends_with_the_count() {
        let screen = Screen::default();
        let mut progress =
            Progress::drawn_on(ProgressDrawTarget::term_like(Box::new(screen.clone())), 3);
        let step = StepId::new(
            Some("kimi_k3"),
            prgate_gate::evidence::Check::UnitTests,
            prgate_gate::evidence::Side::Pr,
            None,
        );
        progress.started(&step);
        progress.finished(Some(Duration::from_secs(1)));
        progress.close();
        let shown = screen.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        // The first draw is never held back; the last is forced by the close.
        assert!(shown.contains("0/3 steps · kimi_k3 "), "{shown}");
        assert!(shown.contains("1 steps in 0s"), "{shown}");
    }

    #[test]
    fn off_it_writes_nothing() {
        let progress = Progress::new(false, 3);
        assert!(progress.bar.is_hidden());
    }

    #[test]
    fn the_estimate_is_the_mean_step_times_the_steps_left() {
        let mut progress = Progress::new(false, 10);
        assert_eq!(progress.estimate(), None);
        progress.finished(Some(Duration::from_secs(4)));
        progress.finished(None);
        progress.finished(Some(Duration::from_secs(2)));
        // 3 of 10 done; 2 ran for 6 s: 3 s × 7.
        assert_eq!(progress.estimate(), Some(Duration::from_secs(21)));
    }
}
