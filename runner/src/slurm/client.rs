//! SLURM's client programs (`sbatch`, `squeue`, `scontrol`, `scancel`), run with explicit
//! arguments and no shell, and the batch script a job runs.
//!
//! What it leaves to others: what the outputs mean ([`super::job`]), when to run them (the
//! orchestrator in [`super`]).

use std::ffi::OsString;
use std::io;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::SlurmError;
use super::job::{JobRecord, QUEUE_FORMAT, QueueEntry, parse_queue};

/// SLURM's client programs, from a folder or, without one, from the `PATH`.
#[derive(Debug, Clone)]
pub(crate) struct Slurm {
    bin_dir: Option<PathBuf>,
}

impl Slurm {
    pub(crate) fn new(bin_dir: Option<&Path>) -> Slurm {
        Slurm { bin_dir: bin_dir.map(Path::to_path_buf) }
    }

    /// Submits the batch script `script` with `options` before it (`sbatch --parsable`);
    /// returns the job's id.
    pub(super) fn submit(&self, script: &Path, options: &[String]) -> Result<u64, SlurmError> {
        let mut args: Vec<OsString> = vec!["--parsable".into()];
        args.extend(options.iter().map(OsString::from));
        args.push(script.into());
        let output = self.run("sbatch", &args)?;
        // `--parsable` prints `id` or `id;cluster`.
        let id = output.trim().split(';').next().unwrap_or_default();
        id.parse().map_err(|_| SlurmError::Unreadable {
            command: format!("sbatch {}", script.display()),
            output: output.clone(),
        })
    }

    /// The jobs named `name`, finished ones included while SLURM keeps their record.
    pub(super) fn queue(&self, name: &str) -> Result<Vec<QueueEntry>, SlurmError> {
        self.list(name, true)
    }

    /// The jobs named `name` that are pending or running.
    pub(super) fn live(&self, name: &str) -> Result<Vec<QueueEntry>, SlurmError> {
        self.list(name, false)
    }

    fn list(&self, name: &str, all: bool) -> Result<Vec<QueueEntry>, SlurmError> {
        let mut args: Vec<OsString> = vec!["--noheader".into()];
        if all {
            args.push("--states=all".into());
        }
        args.push(format!("--name={name}").into());
        args.push(format!("--format={QUEUE_FORMAT}").into());
        let output = self.run("squeue", &args)?;
        parse_queue(&output).map_err(|problem| SlurmError::Unreadable {
            command: format!("squeue --name={name}"),
            output: problem.to_string(),
        })
    }

    /// `scontrol show job ID`; `None` when SLURM no longer knows the job (its record is
    /// dropped some minutes after it ends: `MinJobAge`).
    pub(super) fn show_job(&self, id: u64) -> Result<Option<JobRecord>, SlurmError> {
        match self.run("scontrol", &["show".into(), "job".into(), id.to_string().into()]) {
            Ok(output) => Ok(Some(JobRecord::parse(&output))),
            Err(SlurmError::Failed { stderr, .. }) if stderr.contains("Invalid job id") => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Cancels every pending or running job named `name` (`scancel --name`). SLURM answers 0
    /// whether or not a job matched: read the states afterwards.
    /// The nodes of `node_list` (`pn[1-3]`) that SLURM has down or not responding, each with
    /// its state and reason (`DOWN+NOT_RESPONDING (Not responding)`): the nodes a `NODE_FAIL`
    /// is about.
    pub(super) fn down_nodes(&self, node_list: &str) -> Result<Vec<(String, String)>, SlurmError> {
        let names = self.run("scontrol", &["show".into(), "hostnames".into(), node_list.into()])?;
        let mut down = Vec::new();
        for name in names.lines().map(str::trim).filter(|name| !name.is_empty()) {
            let args = ["show".into(), "node".into(), name.into(), "--oneliner".into()];
            let record = JobRecord::parse(&self.run("scontrol", &args)?);
            let state = record.get("State").unwrap_or_default().to_owned();
            if state.contains("DOWN") || state.contains("NOT_RESPONDING") || state.ends_with('*') {
                let reason = record.get("Reason").unwrap_or("no reason given").to_owned();
                down.push((name.to_owned(), format!("{state} ({reason})")));
            }
        }
        Ok(down)
    }

    pub(super) fn cancel_name(&self, name: &str) -> Result<(), SlurmError> {
        self.run("scancel", &[format!("--name={name}").into()]).map(drop)
    }

    /// Drains node `name` in SLURM with `reason` (`scontrol update`): it takes no new job
    /// until an administrator, or `prgate node admit`, resumes it.
    pub(crate) fn drain_node(&self, name: &str, reason: &str) -> Result<(), SlurmError> {
        let args: Vec<OsString> = vec![
            "update".into(),
            format!("NodeName={name}").into(),
            "State=DRAIN".into(),
            format!("Reason={reason}").into(),
        ];
        self.run("scontrol", &args).map(drop)
    }

    /// Resumes node `name` in SLURM (`scontrol update state=resume`).
    pub(crate) fn resume_node(&self, name: &str) -> Result<(), SlurmError> {
        let args: Vec<OsString> =
            vec!["update".into(), format!("NodeName={name}").into(), "State=RESUME".into()];
        self.run("scontrol", &args).map(drop)
    }

    /// Runs `program` with `args` and returns its standard output; a failure carries its
    /// standard error.
    fn run(&self, program: &str, args: &[OsString]) -> Result<String, SlurmError> {
        let path = match &self.bin_dir {
            Some(dir) => dir.join(program),
            None => PathBuf::from(program),
        };
        // In a group of its own: a Ctrl-C on the terminal is the orchestrator's to handle (it
        // cancels the jobs), and must not kill the scancel that does it.
        #[expect(
            clippy::disallowed_methods,
            reason = "SLURM's client commands (sbatch, squeue, sacct, scancel), prgate's own"
        )]
        let output = Command::new(&path)
            .args(args)
            .stdin(std::process::Stdio::null())
            .process_group(0)
            .output()
            .map_err(|source| SlurmError::Program {
                program: path.display().to_string(),
                source,
            })?;
        let command = || {
            let args: Vec<String> =
                args.iter().map(|arg| arg.to_string_lossy().into_owned()).collect();
            format!("{program} {}", args.join(" "))
        };
        if !output.status.success() {
            return Err(SlurmError::Failed {
                command: command(),
                status: output.status.to_string(),
                stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            });
        }
        String::from_utf8(output.stdout).map_err(|error| SlurmError::Unreadable {
            command: command(),
            output: String::from_utf8_lossy(error.as_bytes()).into_owned(),
        })
    }
}

/// A job's batch script: its `#SBATCH` options, then the command, run with `exec` so that the
/// signals SLURM sends the batch shell (`scancel`, the time limit) reach the command itself.
#[derive(Debug, Clone)]
pub(super) struct BatchScript<'a> {
    pub job_name: &'a str,
    /// The job's output file (standard output and error); `%j` is the job's id.
    pub output: &'a Path,
    /// The job's working directory.
    pub chdir: &'a Path,
    /// The job's time limit, rounded up to whole minutes; `None` leaves the partition's.
    pub time_limit: Option<Duration>,
    pub command: &'a [OsString],
}

impl BatchScript<'_> {
    /// The script's text. `--no-requeue`: a job that fails or is preempted ends there, as
    /// evidence, rather than running again after the run has gathered it.
    pub(super) fn render(&self) -> Result<String, SlurmError> {
        let text = |what: &str, value: &std::ffi::OsStr| {
            value.to_str().map(str::to_owned).ok_or_else(|| SlurmError::Script {
                problem: format!("{what} is not UTF-8: {}", value.to_string_lossy()),
            })
        };
        // An `#SBATCH` line is split at blanks, and sbatch reads quotes its own way.
        let option = |what: &str, value: &std::ffi::OsStr| {
            let value = text(what, value)?;
            if value.contains(|char: char| char.is_whitespace() || "'\"\\".contains(char)) {
                return Err(SlurmError::Script {
                    problem: format!(
                        "{what} has a blank or a quote, which an #SBATCH line cannot hold: {value}\nhint: choose a results directory whose path has neither"
                    ),
                });
            }
            Ok(value)
        };
        let mut script = String::from("#!/bin/bash\n");
        let job_name = option("the job's name", self.job_name.as_ref())?;
        let output = option("the job's output file", self.output.as_os_str())?;
        let chdir = option("the job's folder", self.chdir.as_os_str())?;
        script.push_str(&format!("#SBATCH --job-name={job_name}\n"));
        script.push_str(&format!("#SBATCH --output={output}\n"));
        script.push_str(&format!("#SBATCH --chdir={chdir}\n"));
        if let Some(limit) = self.time_limit {
            script.push_str(&format!("#SBATCH --time={}\n", slurm_minutes(limit)));
        }
        script.push_str("#SBATCH --ntasks=1\n#SBATCH --no-requeue\n");
        let words = self
            .command
            .iter()
            .map(|word| text("an argument of the job's command", word).map(|word| quote(&word)))
            .collect::<Result<Vec<_>, _>>()?;
        if words.is_empty() {
            return Err(SlurmError::Script { problem: "the job's command is empty".to_owned() });
        }
        script.push_str(&format!("exec {}\n", words.join(" ")));
        Ok(script)
    }
}

/// A time limit as SLURM's `hours:minutes:seconds`, rounded up to whole minutes (SLURM's
/// unit), at least one minute.
fn slurm_minutes(limit: Duration) -> String {
    let minutes = limit.as_secs().div_ceil(60).max(1);
    format!("{}:{:02}:00", minutes / 60, minutes % 60)
}

/// `word` quoted for bash: in single quotes, each `'` written as `'\''`.
fn quote(word: &str) -> String {
    let safe = !word.is_empty()
        && word.chars().all(|char| char.is_ascii_alphanumeric() || "-_./=:,+%@~".contains(char));
    if safe { word.to_owned() } else { format!("'{}'", word.replace('\'', r"'\''")) }
}

/// The error of a program that could not be started.
pub(super) fn not_found_hint(source: &io::Error) -> &'static str {
    if source.kind() == io::ErrorKind::NotFound {
        "\nhint: is SLURM installed here? Name the folder of its programs with --slurm-bin"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_limits_in_whole_minutes() {
        let cases = [
            (1, "0:01:00"),
            (60, "0:01:00"),
            (61, "0:02:00"),
            (3600, "1:00:00"),
            (5430, "1:31:00"),
        ];
        for (seconds, expect) in cases {
            assert_eq!(slurm_minutes(Duration::from_secs(seconds)), expect, "{seconds}");
        }
    }

    #[test]
    fn words_are_quoted_for_bash() {
        let cases = [
            ("plain", "plain"),
            ("/a/b-c_d.toml", "/a/b-c_d.toml"),
            ("~common", "~common"),
            ("", "''"),
            ("two words", "'two words'"),
            ("it's", r"'it'\''s'"),
            ("$HOME;rm", "'$HOME;rm'"),
            ("[Perf] x", "'[Perf] x'"),
        ];
        for (word, expect) in cases {
            assert_eq!(quote(word), expect, "{word}");
        }
    }

    #[test]
    fn a_batch_script() {
        let command: Vec<OsString> = ["/opt/prgate", "run", "--title", "[Perf] it's faster"]
            .into_iter()
            .map(OsString::from)
            .collect();
        let script = BatchScript {
            job_name: "prgate-0123abcd",
            output: Path::new("/shared/results/slurm/alpha/slurm-%j.out"),
            chdir: Path::new("/shared/results/slurm/alpha"),
            time_limit: Some(Duration::from_secs(20 * 60)),
            command: &command,
        };
        insta::assert_snapshot!(script.render().expect("a script"));
        let empty = BatchScript { command: &[], ..script.clone() };
        assert!(empty.render().is_err());
        let blank = BatchScript { chdir: Path::new("/shared/my results"), ..script };
        assert!(blank.render().is_err());
    }
}
