//! A log flood through prgate's capped log, against the same flood written to a plain file.
//!
//! ```sh
//! cargo run --release -p prgate-runner --example log_flood -- capped [BYTES] [DIR]
//! cargo run --release -p prgate-runner --example log_flood -- plain [BYTES] [DIR]
//! ```
//!
//! Both start the same child, `sh -c 'yes <a 100-byte log line> | head -c BYTES'` (BYTES
//! defaults to 1 GiB), with its output in `DIR/flood.log` (DIR defaults to a temporary
//! folder, removed at the end): `capped` through `ChildGroup` (a pipe and the log's pump, as
//! every command prgate starts), `plain` with the child's output opened on the file itself.
//! Prints one line: the mode, the bytes printed, the seconds from start to a complete log, the
//! log's size on disk, and this process's peak resident memory (`VmHWM`, prgate's own, without
//! the child's). `bench/log-flood.sh` runs both under `/usr/bin/time -v`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use prgate_runner::process::{ChildGroup, Finished, ProcessError, ProcessSpec};

/// A log line of 100 bytes with its newline, as a busy server prints them.
const LINE: &str = "[2026-12-02 17:00:00 TP0] Decode batch. #running-req: 64, #token: 81920, gen throughput: 4096 tok/s";

fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let mode = arguments.first().map_or("capped", String::as_str);
    let bytes: u64 = match arguments.get(1).map(|text| text.parse()) {
        None => 1 << 30,
        Some(Ok(bytes)) => bytes,
        Some(Err(error)) => {
            eprintln!("log_flood: BYTES must be a number of bytes: {error}");
            return ExitCode::from(2);
        }
    };
    let temporary = tempfile::tempdir();
    let dir = match (arguments.get(2), &temporary) {
        (Some(dir), _) => PathBuf::from(dir),
        (None, Ok(temporary)) => temporary.path().to_path_buf(),
        (None, Err(error)) => {
            eprintln!("log_flood: no temporary folder: {error}");
            return ExitCode::from(2);
        }
    };
    let log = dir.join("flood.log");
    let _fresh = std::fs::remove_file(&log);
    let script = format!("yes '{LINE}' | head -c {bytes}");
    let started = Instant::now();
    let flooded = match mode {
        "capped" => capped(&script, &dir, &log),
        "plain" => plain(&script, &dir, &log),
        other => Err(FloodError::Mode(other.to_owned())),
    };
    let elapsed = started.elapsed();
    if let Err(error) = flooded {
        eprintln!("log_flood: {error}");
        return ExitCode::from(2);
    }
    let on_disk = std::fs::metadata(&log).map_or(0, |metadata| metadata.len());
    println!(
        "{mode}: {bytes} bytes printed in {:.3} s; log {on_disk} bytes on disk; prgate's peak RSS {} KiB",
        elapsed.as_secs_f64(),
        peak_rss_kib().map_or_else(|| "unknown".to_owned(), |kib| kib.to_string()),
    );
    ExitCode::SUCCESS
}

/// Why a flood did not run to its end.
#[derive(Debug, thiserror::Error)]
enum FloodError {
    #[error("the mode is capped or plain, not {0}")]
    Mode(String),
    #[error(transparent)]
    Process(#[from] ProcessError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// How the child ended, in words.
    #[error("the flood ended badly: {0}")]
    EndedBadly(String),
}

/// The flood as prgate runs every command: its output through the capped log.
fn capped(script: &str, dir: &Path, log: &Path) -> Result<(), FloodError> {
    let spec = ProcessSpec::new(["sh", "-c", script], dir, log);
    let mut child = ChildGroup::spawn(&spec)?;
    match child.wait_with_timeout(Duration::from_secs(3600))? {
        Finished::Exited(status) if status.success() => Ok(()),
        finished => Err(FloodError::EndedBadly(format!("{finished:?}"))),
    }
}

/// The flood with its output on the file itself.
fn plain(script: &str, dir: &Path, log: &Path) -> Result<(), FloodError> {
    let file = std::fs::File::create(log)?;
    #[expect(clippy::disallowed_methods, reason = "the benchmark's flood, a shell of its own")]
    let status = Command::new("sh")
        .args(["-c", script])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(file)
        .status()?;
    if status.success() { Ok(()) } else { Err(FloodError::EndedBadly(status.to_string())) }
}

/// This process's peak resident memory, from `/proc/self/status` (Linux).
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
