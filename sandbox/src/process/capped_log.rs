//! A command's log, capped: its first [`HEAD`] and its last [`TAIL`] bytes, with one line
//! between them that says what was cut.
//!
//! A child's standard output and error go to one pipe, and a pump thread per child copies the
//! pipe into the log file. The first [`HEAD`] bytes are written as they come; so are the next
//! [`TAIL`], while nothing has been dropped, so a log of up to `HEAD + TAIL` bytes is the
//! command's output unchanged. From there the pump keeps only the last [`TAIL`] bytes, in a ring
//! buffer in memory, and counts what falls out of it. When the pipe closes (the command and
//! everything it started have exited, crashed or were killed) or the group is stopped, the
//! pump writes, after the head, one cut line and then the ring:
//!
//! ```text
//! [prgate: 1,070,596,096 bytes in 12,345,678 lines cut here; the log keeps its first 1 MiB and its last 1 MiB]
//! ```
//!
//! The counts are of the bytes cut and of the newlines among them; the cut falls where the
//! byte counts put it, so the tail's first line may be a part of a line (the cut line is always
//! a line of its own: a newline is put before it when the head ends inside a line).
//!
//! The bound: a running command costs prgate at most [`TAIL`] for its ring plus [`READ_CHUNK`]
//! for its read buffer (about 1 MiB + 64 KiB), whatever it prints, and its log on disk is at
//! most `HEAD + TAIL` plus the cut line. A log is appended to by each command that writes it
//! (a restarted server), each with its own head and tail.
//!
//! Live readers (a health check's tail, the routing check, a step's tail of a server that is
//! still up, the progress watch) read the file while the command runs. The head is in the
//! file as soon as it is printed, so is everything up to `HEAD + TAIL`. Past that, the pump
//! rewrites the file's end at most every [`LIVE_EVERY`] while output arrives (and once output
//! pauses): the cut so far and the ring's latest [`LIVE_TAIL`] bytes (what a tail reads,
//! `super::MAX_TAIL_BYTES`), so the file keeps changing while the command prints (the
//! progress watch sees it) and a tail read during the run is at most [`LIVE_EVERY`] old. The
//! whole last [`TAIL`] is in the file once the command has ended; a reader that needs the
//! complete log stops the group first (`ChildGroup::stop` joins the pump).
//!
//! What it leaves to others: redacting the log (`crate::redact::redact_log`, once the command
//! has ended), reading it (`super::tail`, `crate::untrusted`), and stopping the group (the pump
//! is told to end after the group is gone: a process that left the group and holds the pipe
//! cannot keep a stop waiting).

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, PipeReader, PipeWriter, Read as _};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};

/// How much of a command's output its log keeps from the start: 1 MiB.
pub const HEAD: usize = 1024 * 1024;
/// How much of a command's output its log keeps from the end: 1 MiB, held in memory while the
/// command runs.
pub const TAIL: usize = 1024 * 1024;
/// How much the pump reads from the pipe at a time: 64 KiB.
pub const READ_CHUNK: usize = 64 * 1024;
/// How much of the ring a live rewrite puts in the file: what a tail reads (64 KiB).
pub const LIVE_TAIL: usize = super::tail::MAX_TAIL_BYTES as usize;
/// How often, at most, a live rewrite happens while output arrives past the kept bytes.
pub const LIVE_EVERY: Duration = Duration::from_millis(250);

/// The pipe's buffer asked for (Linux): fewer, larger reads when a command floods.
const PIPE_BUFFER: usize = 1024 * 1024;
/// At most this much is still read once the pump is told to end (a process outside the group
/// that keeps writing cannot keep it reading).
const DRAIN_LIMIT: u64 = 16 * 1024 * 1024;

/// How much a log keeps, in bytes: [`Caps::DEFAULT`] in a run, small ones in the unit tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Caps {
    pub head: usize,
    pub tail: usize,
    pub live_tail: usize,
}

impl Caps {
    pub(crate) const DEFAULT: Caps = Caps { head: HEAD, tail: TAIL, live_tail: LIVE_TAIL };
}

/// The thread that copies a child's pipe into its capped log.
#[derive(Debug)]
pub(crate) struct Pump {
    thread: Option<JoinHandle<io::Result<()>>>,
    /// Dropped to tell the pump to end: read what is in the pipe, write the tail.
    wake: Option<PipeWriter>,
}

impl Pump {
    /// Starts the pump of `log` and returns it with the pipe's writing end: what the child's
    /// standard output and error are set to. The pipe closes, and the pump ends, when every
    /// copy of that end is closed (the caller's once the child is spawned, the child's when
    /// its group is gone), or when [`Pump::finish`] tells it to.
    pub(crate) fn start(log: CappedLog) -> io::Result<(Pump, PipeWriter)> {
        let (reader, writer) = io::pipe()?;
        #[cfg(target_os = "linux")]
        {
            // Best effort: the default (64 KiB) works, with more wake-ups.
            let _default_kept = rustix::pipe::fcntl_setpipe_size(&writer, PIPE_BUFFER);
        }
        let (wake_reader, wake) = io::pipe()?;
        live_pumps(1);
        let spawned = thread::Builder::new()
            .name("prgate-log-pump".to_owned())
            .stack_size(128 * 1024)
            .spawn(move || {
                let pumped = pump(&reader, &wake_reader, log);
                live_pumps(-1);
                pumped
            });
        match spawned {
            Ok(thread) => Ok((Pump { thread: Some(thread), wake: Some(wake) }, writer)),
            Err(error) => {
                live_pumps(-1);
                Err(error)
            }
        }
    }

    /// Tells the pump to end and waits for it: it reads what is in the pipe now, writes the
    /// tail and returns the first write that failed. Called once the child's group is gone.
    /// A second call does nothing.
    pub(crate) fn finish(&mut self) -> io::Result<()> {
        drop(self.wake.take());
        match self.thread.take().map(JoinHandle::join) {
            None => Ok(()),
            Some(Ok(pumped)) => pumped,
            Some(Err(_panic)) => Err(io::Error::other("the log's pump thread panicked")),
        }
    }
}

impl Drop for Pump {
    fn drop(&mut self) {
        let _unwritten = self.finish();
    }
}

/// Waits until every pump of this process has ended, for at most `limit`: the runner, about to
/// die of a signal, lets its killed children's logs get their tails.
pub(crate) fn wait_for_pumps(limit: Duration) {
    let deadline = Instant::now() + limit;
    let (count, changed) = &*PUMPS;
    let mut live = count.lock().unwrap_or_else(PoisonError::into_inner);
    while *live > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        live = changed.wait_timeout(live, left).unwrap_or_else(PoisonError::into_inner).0;
    }
}

/// How many pumps run, and a signal when that changes.
static PUMPS: std::sync::LazyLock<(Mutex<usize>, Condvar)> =
    std::sync::LazyLock::new(|| (Mutex::new(0), Condvar::new()));

fn live_pumps(change: isize) {
    let (count, changed) = &*PUMPS;
    let mut live = count.lock().unwrap_or_else(PoisonError::into_inner);
    *live = live.saturating_add_signed(change);
    changed.notify_all();
}

/// Copies `pipe` into `log` until the pipe closes, or `wake` does (then what the pipe holds is
/// still read, up to [`DRAIN_LIMIT`]); rewrites the log's live end as [`LIVE_EVERY`] says;
/// writes the tail at the end.
fn pump(pipe: &PipeReader, wake: &PipeReader, mut log: CappedLog) -> io::Result<()> {
    let copied = copy(pipe, wake, &mut log);
    // The tail is written whatever ended the copy.
    let finished = log.finish();
    copied.and(finished)
}

fn copy(pipe: &PipeReader, wake: &PipeReader, log: &mut CappedLog) -> io::Result<()> {
    let mut chunk = vec![0_u8; READ_CHUNK];
    let mut next_live = Instant::now();
    loop {
        let timeout =
            log.live_pending().then(|| next_live.saturating_duration_since(Instant::now()));
        let (readable, woken) = wait(pipe, wake, timeout)?;
        if woken {
            // The group is gone: what it printed is in the pipe; a process outside it that
            // still holds the pipe is not waited for.
            return drain(pipe, &mut chunk, log);
        }
        if readable {
            match read(pipe, &mut chunk)? {
                0 => return Ok(()),
                read => log.push(&chunk[..read]),
            }
        }
        let now = Instant::now();
        if log.live_pending() && now >= next_live {
            log.write_live();
            next_live = now + LIVE_EVERY;
        }
    }
}

/// Waits until the pipe has something (or is closed), `wake` is closed, or `timeout` passes.
fn wait(
    pipe: &PipeReader,
    wake: &PipeReader,
    timeout: Option<Duration>,
) -> io::Result<(bool, bool)> {
    let timeout = timeout.map(timespec);
    let events = PollFlags::IN;
    let mut fds = [PollFd::new(pipe, events), PollFd::new(wake, events)];
    loop {
        match rustix::event::poll(&mut fds, timeout.as_ref()) {
            Ok(_) => break,
            Err(rustix::io::Errno::INTR) => {}
            Err(errno) => return Err(errno.into()),
        }
    }
    let ready = |fd: &PollFd<'_>| !fd.revents().is_empty();
    Ok((ready(&fds[0]), ready(&fds[1])))
}

/// `duration` for `poll`; one too long for it is a second (the pump only looks again).
fn timespec(duration: Duration) -> Timespec {
    Timespec::try_from(duration).unwrap_or(Timespec { tv_sec: 1, tv_nsec: 0 })
}

fn read(mut pipe: &PipeReader, chunk: &mut [u8]) -> io::Result<usize> {
    loop {
        match pipe.read(chunk) {
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            read => return read,
        }
    }
}

/// Reads what the pipe holds now (nothing is waited for), up to [`DRAIN_LIMIT`].
fn drain(pipe: &PipeReader, chunk: &mut [u8], log: &mut CappedLog) -> io::Result<()> {
    let mut drained = 0_u64;
    while drained < DRAIN_LIMIT {
        let mut fds = [PollFd::new(pipe, PollFlags::IN)];
        match rustix::event::poll(&mut fds, Some(&timespec(Duration::ZERO))) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(errno) => return Err(errno.into()),
        }
        match read(pipe, chunk)? {
            0 => return Ok(()),
            read => {
                log.push(&chunk[..read]);
                drained += read as u64;
            }
        }
    }
    Ok(())
}

/// A log file being written by one command: its head, then (once too much came) a ring of its
/// latest bytes, written after the cut line when [`CappedLog::finish`] is called.
#[derive(Debug)]
pub(crate) struct CappedLog {
    file: File,
    path: PathBuf,
    caps: Caps,
    /// Where this command's output starts in the file (a restarted server appends).
    start: u64,
    /// How many bytes of the output are in the file as printed (the head, and what followed it
    /// while nothing was dropped).
    written: u64,
    /// Whether the head's last byte ends a line (the cut line starts on a line of its own).
    head_ends_line: bool,
    /// The latest bytes past the head; allocated once the head is full.
    ring: Option<Ring>,
    /// Whether bytes came since the last live rewrite.
    live_dirty: bool,
    /// The first write that failed: the rest is still read (the command never blocks on its
    /// log) but not written.
    failed: Option<io::Error>,
}

impl CappedLog {
    /// Opens `path` to add a command's output at its end: created (with its folder) when it is
    /// missing, never through a link (a log is in a folder a container may write).
    pub(crate) fn open(path: &Path, caps: Caps) -> io::Result<CappedLog> {
        use std::os::unix::fs::OpenOptionsExt as _;
        if let Some(parent) = path.parent().filter(|parent| !parent.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits().cast_signed())
            .open(path)?;
        let start = file.metadata()?.len();
        Ok(CappedLog {
            file,
            path: path.to_path_buf(),
            caps,
            start,
            written: 0,
            head_ends_line: true,
            ring: None,
            live_dirty: false,
            failed: None,
        })
    }

    /// Adds `bytes` of the command's output.
    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        let head = self.caps.head as u64;
        if self.written < head {
            let room = usize::try_from(head - self.written).unwrap_or(usize::MAX);
            let (now, rest) = bytes.split_at(room.min(bytes.len()));
            self.write_through(now);
            if let Some(last) = now.last() {
                self.head_ends_line = *last == b'\n';
            }
            bytes = rest;
        }
        if bytes.is_empty() {
            return;
        }
        let ring = self.ring.get_or_insert_with(|| Ring::new(self.caps.tail));
        ring.push(bytes);
        if ring.evicted == 0 {
            self.write_through(bytes);
        } else {
            self.live_dirty = true;
        }
    }

    /// Whether the file's end is older than what came (a live rewrite is due).
    pub(crate) fn live_pending(&self) -> bool {
        self.live_dirty
    }

    /// Rewrites the file's end as a live reader should see it: the cut so far, then the ring's
    /// latest [`Caps::live_tail`] bytes.
    pub(crate) fn write_live(&mut self) {
        self.live_dirty = false;
        let Some(ring) = &self.ring else { return };
        let shown = ring.len().min(self.caps.live_tail);
        let (older, newer) = ring.last(shown);
        let hidden_in_ring = ring.len() - shown;
        let cut = Cut {
            bytes: ring.evicted + hidden_in_ring as u64,
            lines: ring.evicted_lines + ring.lines_in_oldest(hidden_in_ring),
        };
        let text = cut.live_line(self.caps, self.head_ends_line);
        if self.failed.is_none()
            && let Err(error) = replace_from(
                &self.file,
                self.start + self.caps.head as u64,
                &[text.as_bytes(), older, newer],
            )
        {
            self.failed = Some(error);
        }
    }

    /// Writes the tail after the cut line, when anything was cut; reports the first write
    /// that failed.
    pub(crate) fn finish(mut self) -> io::Result<()> {
        if let Some(ring) = self.ring.take()
            && ring.evicted > 0
        {
            let cut = Cut { bytes: ring.evicted, lines: ring.evicted_lines };
            let text = cut.final_line(self.caps, self.head_ends_line);
            let (older, newer) = ring.slices();
            self.write_end(&[text.as_bytes(), older, newer]);
        }
        match self.failed.take() {
            Some(error) => Err(io::Error::new(
                error.kind(),
                format!("cannot write the log {}: {error}", self.path.display()),
            )),
            None => Ok(()),
        }
    }

    /// Appends `bytes` as printed.
    fn write_through(&mut self, bytes: &[u8]) {
        if self.failed.is_none()
            && let Err(error) = self.file.write_all_at(bytes, self.start + self.written)
        {
            self.failed = Some(error);
        }
        self.written += bytes.len() as u64;
    }

    /// Replaces what follows the head with `parts`.
    fn write_end(&mut self, parts: &[&[u8]]) {
        if self.failed.is_none()
            && let Err(error) = replace_from(&self.file, self.start + self.caps.head as u64, parts)
        {
            self.failed = Some(error);
        }
    }
}

/// Writes `parts` into `file` from `at`, and ends the file there.
fn replace_from(file: &File, mut at: u64, parts: &[&[u8]]) -> io::Result<()> {
    for part in parts {
        file.write_all_at(part, at)?;
        at += part.len() as u64;
    }
    file.set_len(at)
}

/// What was cut from a log: bytes, and the newlines among them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cut {
    pub bytes: u64,
    pub lines: u64,
}

impl Cut {
    /// The line a finished log has between its head and its tail, with its newline (and one
    /// before it when the head ends inside a line).
    pub(crate) fn final_line(self, caps: Caps, head_ends_line: bool) -> String {
        format!(
            "{}[prgate: {} in {} cut here; the log keeps its first {} and its last {}]\n",
            if head_ends_line { "" } else { "\n" },
            counted(self.bytes, "byte"),
            counted(self.lines, "line"),
            size(caps.head),
            size(caps.tail),
        )
    }

    /// The line a live reader sees there while the command runs.
    pub(crate) fn live_line(self, caps: Caps, head_ends_line: bool) -> String {
        format!(
            "{}[prgate: {} in {} cut here so far; while the command runs the log shows its latest {}, once it ends its last {}]\n",
            if head_ends_line { "" } else { "\n" },
            counted(self.bytes, "byte"),
            counted(self.lines, "line"),
            size(caps.live_tail),
            size(caps.tail),
        )
    }
}

/// `1 byte`, `1,070,596,096 bytes`.
fn counted(number: u64, what: &str) -> String {
    let plural = if number == 1 { "" } else { "s" };
    format!("{} {what}{plural}", grouped(number))
}

/// `1,070,596,096`.
fn grouped(number: u64) -> String {
    let digits = number.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// `1 MiB`, `64 KiB`, `12 bytes`: whole units only.
fn size(bytes: usize) -> String {
    let mut out = String::new();
    let _infallible = match bytes {
        0 => write!(out, "0 bytes"),
        1 => write!(out, "1 byte"),
        _ if bytes.is_multiple_of(1 << 20) => write!(out, "{} MiB", bytes >> 20),
        _ if bytes.is_multiple_of(1 << 10) => write!(out, "{} KiB", bytes >> 10),
        _ => write!(out, "{bytes} bytes"),
    };
    out
}

/// The latest `capacity` bytes of a stream, and a count of the bytes (and newlines) that fell
/// out of it.
#[derive(Debug)]
pub(crate) struct Ring {
    buffer: Vec<u8>,
    capacity: usize,
    /// Where the oldest byte is, once the buffer is full.
    oldest: usize,
    pub evicted: u64,
    pub evicted_lines: u64,
}

impl Ring {
    pub(crate) fn new(capacity: usize) -> Ring {
        Ring {
            buffer: Vec::with_capacity(capacity),
            capacity,
            oldest: 0,
            evicted: 0,
            evicted_lines: 0,
        }
    }

    /// How many bytes it holds.
    pub(crate) fn len(&self) -> usize {
        self.buffer.len()
    }

    /// Adds `bytes`; the oldest fall out when it is full.
    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        if self.capacity == 0 {
            self.evict(bytes);
            return;
        }
        if bytes.len() >= self.capacity {
            let (older, newer) = self.slices();
            let (older, newer) = (lines(older), lines(newer));
            self.evicted += self.buffer.len() as u64;
            self.evicted_lines += (older + newer) as u64;
            let (dropped, kept) = bytes.split_at(bytes.len() - self.capacity);
            self.evict(dropped);
            self.buffer.clear();
            self.buffer.extend_from_slice(kept);
            self.oldest = 0;
            return;
        }
        let room = self.capacity - self.buffer.len();
        if room > 0 {
            let (now, rest) = bytes.split_at(room.min(bytes.len()));
            self.buffer.extend_from_slice(now);
            bytes = rest;
        }
        while !bytes.is_empty() {
            let run = (self.capacity - self.oldest).min(bytes.len());
            let slot = &mut self.buffer[self.oldest..self.oldest + run];
            self.evicted += run as u64;
            self.evicted_lines += lines(slot) as u64;
            slot.copy_from_slice(&bytes[..run]);
            self.oldest = (self.oldest + run) % self.capacity;
            bytes = &bytes[run..];
        }
    }

    /// What it holds, oldest first, in two parts.
    pub(crate) fn slices(&self) -> (&[u8], &[u8]) {
        let (newer, older) = self.buffer.split_at(self.oldest);
        (older, newer)
    }

    /// Its latest `count` bytes, oldest first, in two parts.
    pub(crate) fn last(&self, count: usize) -> (&[u8], &[u8]) {
        let (older, newer) = self.slices();
        let count = count.min(self.buffer.len());
        if count <= newer.len() {
            (&[], &newer[newer.len() - count..])
        } else {
            (&older[older.len() - (count - newer.len())..], newer)
        }
    }

    /// The newlines among its oldest `count` bytes.
    pub(crate) fn lines_in_oldest(&self, count: usize) -> u64 {
        let (older, newer) = self.slices();
        let from_older = count.min(older.len());
        let from_newer = (count - from_older).min(newer.len());
        (lines(&older[..from_older]) + lines(&newer[..from_newer])) as u64
    }

    fn evict(&mut self, bytes: &[u8]) {
        self.evicted += bytes.len() as u64;
        self.evicted_lines += lines(bytes) as u64;
    }
}

/// The newlines in `bytes`.
fn lines(bytes: &[u8]) -> usize {
    bytes.iter().filter(|byte| **byte == b'\n').count()
}

#[cfg(test)]
mod tests;
