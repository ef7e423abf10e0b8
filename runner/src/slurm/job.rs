//! What SLURM says about a job, parsed: `squeue`'s lines, `scontrol show job`'s record, and
//! what a job's final state means for the evidence.
//!
//! It parses text only; running the programs is [`super::client`]'s work.

use std::collections::BTreeMap;
use std::fmt;

use prgate_gate::evidence::NotRunReason;

/// A job's state as SLURM names it: `JobState=` of `scontrol show job`, `%T` of `squeue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobState(String);

/// The states after which a job never changes again: its processes are gone.
const FINAL_STATES: &[&str] = &[
    "BOOT_FAIL",
    "CANCELLED",
    "COMPLETED",
    "DEADLINE",
    "FAILED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "REVOKED",
    "SPECIAL_EXIT",
    "TIMEOUT",
];

impl JobState {
    /// The state named `text`: its first word, in capitals (`CANCELLED by 0` is `CANCELLED`).
    pub fn new(text: &str) -> JobState {
        JobState(text.split_whitespace().next().unwrap_or_default().to_ascii_uppercase())
    }

    pub fn name(&self) -> &str {
        &self.0
    }

    /// Whether the job is over: nothing of it runs any more and its state stays. `COMPLETING`
    /// (processes still being killed) is not.
    pub fn is_final(&self) -> bool {
        FINAL_STATES.contains(&self.0.as_str())
    }

    /// The `not-run` reason of the steps a job that ended in this state did not record; `None`
    /// for a job that completed (it recorded all it had to) and for a live job.
    ///
    /// A job's steps are cut by the step loop's own limits first, so a job that did not
    /// complete is the cluster's doing, never a judgement of the PR: `TIMEOUT` and `DEADLINE`
    /// are `run-time-limit`; `FAILED`, `NODE_FAIL`, `OUT_OF_MEMORY`, `BOOT_FAIL`, `CANCELLED`
    /// and every other final state are `node`. Both make the run's verdict `error`.
    pub fn not_run_reason(&self) -> Option<NotRunReason> {
        match self.0.as_str() {
            "COMPLETED" => None,
            "TIMEOUT" | "DEADLINE" => Some(NotRunReason::RunTimeLimit),
            _ if self.is_final() => Some(NotRunReason::Node),
            _ => None,
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One line of `squeue --noheader --format=%i|%T|%r`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueEntry {
    pub id: u64,
    pub state: JobState,
    /// Why the job is in its state (`Resources`, `TimeLimit`, `None`).
    pub reason: String,
}

/// The `--format` that [`parse_queue`] reads.
pub const QUEUE_FORMAT: &str = "%i|%T|%r";

/// Reads `squeue`'s lines in [`QUEUE_FORMAT`]; blank lines are skipped.
pub fn parse_queue(text: &str) -> Result<Vec<QueueEntry>, QueueLineError> {
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let mut fields = line.trim().splitn(3, '|');
            let (Some(id), Some(state), reason) = (fields.next(), fields.next(), fields.next())
            else {
                return Err(QueueLineError::NotIdStateReason { line: line.to_owned() });
            };
            let id = id.parse().map_err(|_| QueueLineError::NoJobId { line: line.to_owned() })?;
            Ok(QueueEntry {
                id,
                state: JobState::new(state),
                reason: reason.unwrap_or_default().to_owned(),
            })
        })
        .collect()
}

/// A line of `squeue` that [`parse_queue`] cannot read, quoted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueLineError {
    /// The line does not have the fields of [`QUEUE_FORMAT`].
    #[error("a line of squeue is not id|state|reason: {line:?}")]
    NotIdStateReason { line: String },
    /// The line's first field is not a job id.
    #[error("a line of squeue does not start with a job id: {line:?}")]
    NoJobId { line: String },
}

/// What `scontrol show job ID` says about a job, in its one-line or its multi-line form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRecord {
    fields: BTreeMap<String, String>,
}

impl JobRecord {
    /// Reads the `Key=Value` fields of `scontrol show job`. A field starts at the start of a
    /// line or after a blank, with a name of letters, digits and `_:/`, then `=`; its value runs
    /// to the next field or the end of the line, so a value with blanks (`Command=job.sh ok`)
    /// is whole.
    pub fn parse(text: &str) -> JobRecord {
        let mut fields = BTreeMap::new();
        for line in text.lines() {
            let mut starts: Vec<(usize, usize)> = Vec::new();
            let bytes = line.as_bytes();
            let mut index = 0;
            while index < bytes.len() {
                let at_start = index == 0 || bytes[index - 1].is_ascii_whitespace();
                if at_start && bytes[index].is_ascii_alphabetic() {
                    let name_end = line[index..]
                        .find(|char: char| {
                            !(char.is_ascii_alphanumeric() || matches!(char, '_' | ':' | '/'))
                        })
                        .map_or(line.len(), |end| index + end);
                    if bytes.get(name_end) == Some(&b'=') {
                        starts.push((index, name_end));
                        index = name_end + 1;
                        continue;
                    }
                }
                index += 1;
            }
            for (position, &(start, equals)) in starts.iter().enumerate() {
                let end = starts.get(position + 1).map_or(line.len(), |next| next.0);
                let value = line[equals + 1..end].trim_end();
                fields.insert(line[start..equals].to_owned(), value.to_owned());
            }
        }
        JobRecord { fields }
    }

    /// A field's value, when the record has it.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }

    /// `JobState=`.
    pub fn state(&self) -> Option<JobState> {
        self.get("JobState").map(JobState::new)
    }

    /// `Reason=`.
    pub fn reason(&self) -> Option<&str> {
        self.get("Reason")
    }

    /// `ExitCode=`, as SLURM writes it: `status:signal`.
    pub fn exit_code(&self) -> Option<&str> {
        self.get("ExitCode")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = format!("{}/src/slurm/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"))
    }

    /// `scontrol show job` of each captured case, read as `JobState Reason ExitCode StdOut`.
    #[test]
    fn scontrol_records_of_every_captured_state() {
        let cases = [
            ("completed", "COMPLETED None 0:0 /tmp/slurmcap/cap-ok-15.out"),
            ("failed", "FAILED NonZeroExitCode 3:0 /tmp/slurmcap/cap-fail-16.out"),
            ("failed-oneliner", "FAILED NonZeroExitCode 3:0 /tmp/slurmcap/cap-fail-16.out"),
            ("running", "RUNNING None 0:0 /tmp/slurmcap/cap-cancel-17.out"),
            ("pending", "PENDING Resources 0:0 /tmp/slurmcap/cap-pending-18.out"),
            ("cancelled", "CANCELLED None 0:15 /tmp/slurmcap/cap-cancel-17.out"),
            ("cancelled-pending", "CANCELLED Resources 0:0 /tmp/slurmcap/cap-pending-18.out"),
            ("timeout", "TIMEOUT TimeLimit 0:15 /tmp/slurmcap/cap-timeout-14.out"),
        ];
        for (name, expect) in cases {
            let record = JobRecord::parse(&fixture(&format!("scontrol-show-job-{name}.txt")));
            let got = format!(
                "{} {} {} {}",
                record.state().expect("a state"),
                record.reason().expect("a reason"),
                record.exit_code().expect("an exit code"),
                record.get("StdOut").expect("an output file"),
            );
            assert_eq!(got, expect, "{name}");
        }
    }

    #[test]
    fn scontrol_fields_with_blanks_colons_slashes_and_no_value() {
        let record = JobRecord::parse(&fixture("scontrol-show-job-failed-oneliner.txt"));
        let cases = [
            ("Command", Some("/tmp/slurmcap/job.sh fail")),
            ("AllocNode:Sid", Some("localhost:22472")),
            ("CPUs/Task", Some("1")),
            ("TRES", Some("cpu=1,node=1,billing=1")),
            ("Power", Some("")),
            ("JobName", Some("cap-fail")),
            ("cpu", None),
        ];
        for (name, expect) in cases {
            assert_eq!(record.get(name), expect, "{name}");
        }
    }

    #[test]
    fn squeue_lines() {
        let entries = parse_queue(&fixture("squeue-states-all.txt")).expect("squeue's lines");
        let got: Vec<String> = entries
            .iter()
            .map(|entry| format!("{} {} {}", entry.id, entry.state, entry.reason))
            .collect();
        assert_eq!(
            got,
            [
                "17 CANCELLED None",
                "18 CANCELLED Resources",
                "15 COMPLETED None",
                "16 FAILED NonZeroExitCode",
                "14 TIMEOUT TimeLimit",
            ]
        );
        assert_eq!(parse_queue("\n").expect("nothing"), []);
        assert!(parse_queue("x|RUNNING|None").is_err());
        assert!(parse_queue("12").is_err());
    }

    #[test]
    fn final_states_and_their_not_run_reasons() {
        let cases = [
            ("PENDING", false, None),
            ("RUNNING", false, None),
            ("COMPLETING", false, None),
            ("COMPLETED", true, None),
            ("TIMEOUT", true, Some(NotRunReason::RunTimeLimit)),
            ("DEADLINE", true, Some(NotRunReason::RunTimeLimit)),
            ("FAILED", true, Some(NotRunReason::Node)),
            ("NODE_FAIL", true, Some(NotRunReason::Node)),
            ("OUT_OF_MEMORY", true, Some(NotRunReason::Node)),
            ("BOOT_FAIL", true, Some(NotRunReason::Node)),
            ("CANCELLED", true, Some(NotRunReason::Node)),
            ("CANCELLED by 0", true, Some(NotRunReason::Node)),
            ("PREEMPTED", true, Some(NotRunReason::Node)),
            ("SOMETHING_NEW", false, None),
        ];
        for (text, is_final, reason) in cases {
            let state = JobState::new(text);
            assert_eq!((state.is_final(), state.not_run_reason()), (is_final, reason), "{text}");
        }
    }
}
