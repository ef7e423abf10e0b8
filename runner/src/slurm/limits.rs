//! How long a SLURM job of a run may take, and how long it waits for its node's host lock:
//! the step loop stops at the run's own `--time-limit` by itself, then stops its children and
//! exits, so a job gets that and a slack; jobs that land on one node take its host lock in
//! turn, a wait SLURM's own limit bounds. The settings come from the binary's flags.

use std::time::Duration;

/// How much longer than the run's time limit a job may take by default.
pub const JOB_TIME_SLACK: Duration = Duration::from_secs(5 * 60);
/// How long a job waits for the host lock when neither the run nor a job time limit says:
/// until SLURM's own limit ends it.
pub const JOB_WAIT_LOCK: Duration = Duration::from_secs(7 * 24 * 3600);

/// A job's limits: its time limit (`None`: the executor's default from the estimate) and how
/// long it waits for the host lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobLimits {
    pub time_limit: Option<Duration>,
    pub wait_lock: Duration,
}

impl JobLimits {
    /// The limits from the job time limit asked for (`job`), the run's own time limit (`run`)
    /// and the host lock's wait asked for (`wait_lock`).
    pub fn of(
        job: Option<Duration>,
        run: Option<Duration>,
        wait_lock: Option<Duration>,
    ) -> JobLimits {
        let time_limit = job.or(run.map(|limit| limit + JOB_TIME_SLACK));
        JobLimits { time_limit, wait_lock: wait_lock.or(time_limit).unwrap_or(JOB_WAIT_LOCK) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_gets_the_runs_limit_and_a_slack_and_waits_for_the_lock_at_most_that_long() {
        let minutes = |count: u64| Duration::from_secs(count * 60);
        assert_eq!(
            JobLimits::of(None, Some(minutes(30)), None),
            JobLimits { time_limit: Some(minutes(35)), wait_lock: minutes(35) }
        );
        assert_eq!(
            JobLimits::of(Some(minutes(90)), Some(minutes(30)), Some(minutes(2))),
            JobLimits { time_limit: Some(minutes(90)), wait_lock: minutes(2) }
        );
        assert_eq!(
            JobLimits::of(None, None, None),
            JobLimits { time_limit: None, wait_lock: JOB_WAIT_LOCK }
        );
    }
}
