//! Whether a server's memory release gave its GPUs back. A server's `200` to a release is its
//! own word, and a PR's server is PR code: it can answer and keep its memory, so that the other
//! side's server loads or wakes into less (slower, or out of memory: a base side that fails);
//! or it can free its memory and, before it answers, queue minutes of GPU work that needs almost
//! none (a spin kernel, thousands of launches), which runs on after the server is paused (a
//! frozen process's queued work runs on the GPU regardless) and slows every base run alike.
//! So after every release, of either side's server (base's is trusted code, but the check is
//! cheap and the same for both), the step loop reads the GPUs the released server holds with
//! the preflight's sources ([`crate::preflight::read_gpus`]: `amd-smi`, else `rocm-smi`, else
//! sysfs under the preflight's root; their memory and how busy they are in one call), and the
//! release counts only when each of them has [`MIN_FREE_AFTER_RELEASE_PERCENT`] of its memory
//! free within [`RELEASE_SETTLE`]. Once a released server is paused (frozen: it can take
//! nothing back and queue nothing more), its GPUs are read again ([`ReleaseCheck::once_paused`]):
//! their memory must still be free (a server that frees its memory for the first reading and
//! takes it back before its pause is caught), and they must be idle, at most
//! [`MAX_BUSY_AFTER_RELEASE_PERCENT`] busy, within [`IDLE_SETTLE`]. A release that does not
//! count is no release: the step loop stops the server instead (its queued work dies with its
//! processes), and from then on switches that side by reloads ([`Freed::Kept`],
//! [`Freed::Busy`]). A reading that cannot be made (no tool answers and sysfs has no figures)
//! fails closed the same way ([`Freed::Unreadable`], [`Freed::ActivityUnreadable`]): a stop and
//! a reload cost minutes, a base server measured beside a PR's that kept its memory or its GPUs
//! busy costs the verdict.
//!
//! Idle means idle of everything: one at a time, the other side's server is not running while
//! these GPUs are read (not started, stopped, or released and paused, its own release checked
//! the same way), and the preflight found the GPUs free of other processes, so what keeps them
//! busy is the released server's.
//!
//! With the preflight off ([`crate::run::PreflightMode::Off`]: a machine without GPUs, the
//! tests and the demo) no GPU is read, so no release is checked ([`Freed::Unread`]); the run's
//! words say so. A node runs with the preflight on (the default; the workflows never turn it
//! off).
//!
//! What it leaves to others: when to release and what to do with a release that does not count
//! (the step loop's `Servers`), the sources and their formats (`crate::preflight`).

use std::path::Path;
use std::time::{Duration, Instant};

use crate::node::NodeProfile;
use crate::preflight::{
    GpuReading, MIN_FREE_VRAM_PERCENT, Probes, SystemCommands, gib, has_free_percent, read_gpus,
};

/// The share of each of a released server's GPUs that must be free after its release, in
/// percent: the preflight's floor for an idle GPU ([`MIN_FREE_VRAM_PERCENT`]), on purpose. The
/// preflight admitted the run on GPUs with that much free, so a release must give the GPUs back
/// as the preflight found them: the other side's server then loads (or wakes) into the memory
/// it had at the start. An honest release leaves what the engines keep (the HIP context, graphs,
/// the allocator's pools: a few GiB, under 10% of a 192 or 288 GiB GPU, with room for the other
/// side's released server's own remainder on the same GPUs); a server that keeps its weights or
/// its KV cache (most of the GPU, by its `--mem-fraction-static`) is far above it.
pub(in crate::run) const MIN_FREE_AFTER_RELEASE_PERCENT: u8 = MIN_FREE_VRAM_PERCENT;

/// How long a release may take to show in the readings. SGLang's release can answer before the
/// device has freed the memory (radixark/miles#86 waits for it, up to 60 s), so GPUs still held
/// are read again every [`READING_INTERVAL`] until this has passed. It is what the estimate
/// counts a wake at (`crate::schedule::SERVER_WAKE`, 30 s): only a release whose memory did not
/// drop at once waits, and a server that keeps its memory makes the run wait once (it is
/// stopped, not released, from then on).
pub(in crate::run) const RELEASE_SETTLE: Duration = Duration::from_secs(30);

/// How busy each of a released server's GPUs may be once the server is paused, in percent of
/// time its graphics engine runs work (amd-smi's `gfx_activity`, rocm-smi's `GPU use (%)`,
/// sysfs's `gpu_busy_percent`). The figure counts the time any kernel runs, however few compute
/// units it takes, so work a server queued before its pause (a spin kernel on one unit, a queue
/// of launches) reads near 100 until its queues have drained, and an idle GPU reads 0: nothing
/// of the run is on it (one at a time, the other side's server is not running) and the preflight
/// found no other process. 2 leaves a point or two for the firmware's averaging of the last
/// moments of the release's own work and for a management tool's noise, and is no more than the
/// speed rule's default `max-loss` (2%): work that kept the GPUs busy at the threshold could slow
/// base by no more than the loss the gate allows anyway.
pub(in crate::run) const MAX_BUSY_AFTER_RELEASE_PERCENT: u8 = 2;

/// How long a paused server's GPUs may take to read idle. The busy figures are averages the GPU's
/// firmware keeps over a short window (well under a second), so a GPU whose last kernel has
/// ended reads idle within a reading or two, and an honest release has run its own last kernels
/// before it answers. GPUs still busy are read again every [`READING_INTERVAL`] until this has
/// passed: queued work that drains meanwhile does no harm (the other side is not measured
/// before the check ends, and a paused server queues nothing more, so GPUs once idle stay idle),
/// and waiting longer than this buys little against a stop and a reload (minutes, once: the
/// server is stopped, not released, from then on). A third of [`RELEASE_SETTLE`]: memory can
/// take the device seconds to give back; an engine that has nothing left to run stops at once.
pub(in crate::run) const IDLE_SETTLE: Duration = Duration::from_secs(10);

/// How long to wait between two readings of GPUs still held, or still busy, after a release.
const READING_INTERVAL: Duration = Duration::from_secs(1);

/// How a run checks its servers' releases.
pub(in crate::run) enum ReleaseCheck<'a> {
    /// By reading the GPUs as the preflight does: the node's tools (`commands`, which keep
    /// their logs), and sysfs under `root`.
    Read { node: &'a NodeProfile, root: &'a Path, commands: SystemCommands },
    /// Not at all: the preflight is off.
    Off,
}

/// What a check found after a release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::run) enum Freed {
    /// Every GPU the server holds has [`MIN_FREE_AFTER_RELEASE_PERCENT`] free (and, once the
    /// server is paused, is at most [`MAX_BUSY_AFTER_RELEASE_PERCENT`] busy).
    Yes,
    /// Not read: the preflight is off.
    Unread,
    /// The GPUs are still held [`RELEASE_SETTLE`] after the release, or held again once the
    /// server is paused: which, how much, by which source, in words.
    Kept(String),
    /// The GPUs are still busy [`IDLE_SETTLE`] after the server was paused: which, how busy, by
    /// which source, in words.
    Busy(String),
    /// The GPUs' memory could not be read: why, in words.
    Unreadable(String),
    /// The GPUs' memory was read freed, but how busy they are could not be read: why, in words.
    ActivityUnreadable(String),
}

impl ReleaseCheck<'_> {
    /// Reads GPUs `gpus` (a released server's) until their memory is freed or [`RELEASE_SETTLE`]
    /// has passed; one reading when the release freed them at once, or when none can be made.
    pub(in crate::run) fn after_release(&self, gpus: &[u32]) -> Freed {
        self.read(gpus, Moment::AfterRelease, RELEASE_SETTLE)
    }

    /// Reads GPUs `gpus` again, their released server paused since [`Self::after_release`]
    /// found them freed: their memory once (a paused server takes nothing back, so there is
    /// nothing to wait for), and how busy they are until they are idle or [`IDLE_SETTLE`] has
    /// passed; one reading when they are idle at once.
    pub(in crate::run) fn once_paused(&self, gpus: &[u32]) -> Freed {
        self.read(gpus, Moment::OncePaused, IDLE_SETTLE)
    }

    fn read(&self, gpus: &[u32], moment: Moment, within: Duration) -> Freed {
        let ReleaseCheck::Read { node, root, commands } = self else {
            return Freed::Unread;
        };
        let probes = Probes { commands, root };
        let read = || read_gpus(node, probes, gpus);
        settle(read, moment, Wait { within, every: READING_INTERVAL })
    }
}

/// When GPUs are read: after a release (their memory), or once its server is paused (their
/// memory and how busy they are).
#[derive(Debug, Clone, Copy)]
enum Moment {
    AfterRelease,
    OncePaused,
}

/// How long GPUs still held (after a release) or still busy (once paused) are read again
/// (`within`), and how far apart (`every`).
#[derive(Debug, Clone, Copy)]
struct Wait {
    within: Duration,
    every: Duration,
}

/// Readings from `read` until one gives the check's answer at `moment`, or `wait` has passed.
/// After a release: freed memory is [`Freed::Yes`], memory still held when `wait` has passed
/// [`Freed::Kept`]. Once paused: memory held is [`Freed::Kept`] at once (a paused server
/// changes nothing), freed memory on idle GPUs [`Freed::Yes`], on GPUs still busy when `wait`
/// has passed [`Freed::Busy`]. A figure that cannot be read is final at once.
fn settle(mut read: impl FnMut() -> Vec<GpuReading>, moment: Moment, wait: Wait) -> Freed {
    let Wait { within, every } = wait;
    let began = Instant::now();
    loop {
        let readings = read();
        let waited = began.elapsed();
        let late = waited >= within;
        match (judge(&readings), moment) {
            (Judged::Unreadable(why), _) => return Freed::Unreadable(why),
            (Judged::Freed, Moment::AfterRelease) => return Freed::Yes,
            (Judged::Held(held), Moment::AfterRelease) if late => {
                let when = format!("{} s after the release", waited.as_secs());
                return Freed::Kept(kept(&held, &when));
            }
            (Judged::Held(_), Moment::AfterRelease) => {}
            (Judged::Held(held), Moment::OncePaused) => {
                return Freed::Kept(kept(&held, "once it was paused"));
            }
            (Judged::Freed, Moment::OncePaused) => match judge_activity(&readings) {
                Activity::Idle => return Freed::Yes,
                Activity::Unreadable(why) => return Freed::ActivityUnreadable(why),
                Activity::Busy(busy) if late => {
                    return Freed::Busy(format!(
                        "{busy} {} s after it was paused, where a released server's GPUs must be at most {MAX_BUSY_AFTER_RELEASE_PERCENT}% busy",
                        waited.as_secs()
                    ));
                }
                Activity::Busy(_) => {}
            },
        }
        std::thread::sleep(every);
    }
}

/// The words of GPUs still held (`held`) at `when`.
fn kept(held: &str, when: &str) -> String {
    format!(
        "{held} {when}, where a released server must leave {MIN_FREE_AFTER_RELEASE_PERCENT}% free"
    )
}

/// One reading's memory, judged.
#[derive(Debug, PartialEq, Eq)]
enum Judged {
    Freed,
    /// The GPUs with less than [`MIN_FREE_AFTER_RELEASE_PERCENT`] free, in words.
    Held(String),
    Unreadable(String),
}

/// Whether every GPU of a reading has [`MIN_FREE_AFTER_RELEASE_PERCENT`] free; a GPU that
/// could not be read makes the reading unreadable, and so does a reading of no GPU.
fn judge(readings: &[GpuReading]) -> Judged {
    let held = beyond(
        readings,
        |reading| &reading.memory,
        |vram| has_free_percent(*vram, MIN_FREE_AFTER_RELEASE_PERCENT),
        |vram| format!("{} of {} used", gib(vram.used), gib(vram.total)),
    );
    match held {
        Err(why) => Judged::Unreadable(why),
        Ok(held) if held.is_empty() => Judged::Freed,
        Ok(held) => Judged::Held(held),
    }
}

/// The GPUs of a reading whose `figure` is not `within` its bound, each as `GPU <id>: <words>
/// (<source>)`, joined; `Err` with why when a GPU's figure could not be read, or the reading
/// has no GPU (no proof of anything).
fn beyond<T>(
    readings: &[GpuReading],
    figure: impl Fn(&GpuReading) -> &Result<(T, &'static str), String>,
    within: impl Fn(&T) -> bool,
    words: impl Fn(&T) -> String,
) -> Result<String, String> {
    if readings.is_empty() {
        return Err("the server holds no GPU to read".to_owned());
    }
    let mut beyond = Vec::new();
    for reading in readings {
        let id = reading.id;
        match figure(reading) {
            Err(problem) => return Err(format!("GPU {id}: {problem}")),
            Ok((value, _)) if within(value) => {}
            Ok((value, source)) => beyond.push(format!("GPU {id}: {} ({source})", words(value))),
        }
    }
    Ok(beyond.join(", "))
}

/// One reading's activity, judged.
#[derive(Debug, PartialEq, Eq)]
enum Activity {
    Idle,
    /// The GPUs more than [`MAX_BUSY_AFTER_RELEASE_PERCENT`] busy, in words.
    Busy(String),
    Unreadable(String),
}

/// Whether every GPU of a reading is at most [`MAX_BUSY_AFTER_RELEASE_PERCENT`] busy; a GPU
/// whose activity could not be read makes the reading unreadable, and so does a reading of no
/// GPU.
fn judge_activity(readings: &[GpuReading]) -> Activity {
    let busy = beyond(
        readings,
        |reading| &reading.busy,
        |percent| *percent <= MAX_BUSY_AFTER_RELEASE_PERCENT,
        |percent| format!("{percent}% busy"),
    );
    match busy {
        Err(why) => Activity::Unreadable(why),
        Ok(busy) if busy.is_empty() => Activity::Idle,
        Ok(busy) => Activity::Busy(busy),
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::preflight::{Thresholds, Vram};

    const GIB: u64 = 1024 * 1024 * 1024;

    /// GPU `id`'s reading: `used` of a 100 GiB GPU, idle, by amd-smi.
    fn used(id: u32, used: u64) -> GpuReading {
        busy(id, used, 0)
    }

    /// GPU `id`'s reading: `used` of a 100 GiB GPU, `percent` busy, by amd-smi.
    fn busy(id: u32, used: u64, percent: u8) -> GpuReading {
        let memory = Ok((Vram { total: 100 * GIB, used }, "amd-smi"));
        GpuReading { id, memory, busy: Ok((percent, "amd-smi")) }
    }

    fn unreadable(id: u32, problem: &str) -> GpuReading {
        GpuReading { id, memory: Err(problem.to_owned()), busy: Err(problem.to_owned()) }
    }

    /// GPU `id`'s reading: its memory freed, its activity unreadable for `problem`.
    fn activity_unreadable(id: u32, problem: &str) -> GpuReading {
        GpuReading { busy: Err(problem.to_owned()), ..used(id, 0) }
    }

    fn check(readings: &[GpuReading], expect: &str) {
        let judged = match judge(readings) {
            Judged::Freed => "freed".to_owned(),
            Judged::Held(held) => format!("held: {held}"),
            Judged::Unreadable(why) => format!("unreadable: {why}"),
        };
        assert_eq!(judged, expect, "{readings:?}");
    }

    #[test]
    fn a_release_counts_when_each_gpu_has_the_preflights_share_free() {
        // The threshold is the preflight's: 90% of every GPU free, 10 GiB of a 100 GiB GPU
        // used at most. A test of both, so that neither moves alone.
        assert_eq!(MIN_FREE_AFTER_RELEASE_PERCENT, 90);
        assert_eq!(Thresholds::default().min_free_vram_percent, MIN_FREE_AFTER_RELEASE_PERCENT);
        check(&[used(0, 283 * 1024 * 1024)], "freed");
        check(&[used(0, 10 * GIB), used(1, 0)], "freed");
        check(&[used(0, 10 * GIB + 1)], "held: GPU 0: 10.0 GiB of 100.0 GiB used (amd-smi)");
        check(
            &[used(0, 80 * GIB), used(1, GIB), used(2, 95 * GIB)],
            "held: GPU 0: 80.0 GiB of 100.0 GiB used (amd-smi), GPU 2: 95.0 GiB of 100.0 GiB used (amd-smi)",
        );
        // Fail closed: a GPU that cannot be read, or no GPU at all, is no proof of a release.
        check(
            &[used(0, 0), unreadable(1, "amd-smi: cannot start; sysfs: cannot read")],
            "unreadable: GPU 1: amd-smi: cannot start; sysfs: cannot read",
        );
        check(&[], "unreadable: the server holds no GPU to read");
        let zero = GpuReading { memory: Ok((Vram { total: 0, used: 0 }, "sysfs")), ..used(3, 0) };
        check(&[zero], "held: GPU 3: 0.0 GiB of 0.0 GiB used (sysfs)");
    }

    #[test]
    fn held_gpus_are_read_again_after_a_release_once_after_its_pause_and_unreadable_is_final() {
        let reads = Cell::new(0);
        // Freed on the third reading: a release the device took a moment to show.
        let freed_late = || {
            reads.set(reads.get() + 1);
            vec![used(0, if reads.get() < 3 { 90 * GIB } else { 0 })]
        };
        let minute = Duration::from_secs(60);
        let wait = Wait { within: minute, every: Duration::ZERO };
        assert_eq!(settle(freed_late, Moment::AfterRelease, wait), Freed::Yes);
        assert_eq!(reads.replace(0), 3);
        // Held throughout: kept, once the settle time has passed.
        let held = || {
            reads.set(reads.get() + 1);
            vec![used(0, 90 * GIB)]
        };
        let wait = Wait { within: Duration::from_millis(30), every: Duration::from_millis(10) };
        let kept = settle(held, Moment::AfterRelease, wait);
        assert_eq!(
            kept,
            Freed::Kept(
                "GPU 0: 90.0 GiB of 100.0 GiB used (amd-smi) 0 s after the release, where a released server must leave 90% free"
                    .to_owned()
            )
        );
        assert!(reads.replace(0) >= 2);
        // Once paused: one reading, never waited for (a paused server changes nothing).
        let wait = Wait { within: Duration::ZERO, every: minute };
        let kept = settle(held, Moment::OncePaused, wait);
        assert_eq!(
            kept,
            Freed::Kept(
                "GPU 0: 90.0 GiB of 100.0 GiB used (amd-smi) once it was paused, where a released server must leave 90% free"
                    .to_owned()
            )
        );
        assert_eq!(reads.replace(0), 1);
        // Unreadable: final at once, never waited for.
        let broken = || {
            reads.set(reads.get() + 1);
            vec![unreadable(0, "amd-smi: exit status: 1")]
        };
        let found = settle(broken, Moment::AfterRelease, Wait { within: minute, every: minute });
        assert_eq!(found, Freed::Unreadable("GPU 0: amd-smi: exit status: 1".to_owned()));
        assert_eq!(reads.get(), 1);
    }

    fn check_activity(readings: &[GpuReading], expect: &str) {
        let judged = match judge_activity(readings) {
            Activity::Idle => "idle".to_owned(),
            Activity::Busy(busy) => format!("busy: {busy}"),
            Activity::Unreadable(why) => format!("unreadable: {why}"),
        };
        assert_eq!(judged, expect, "{readings:?}");
    }

    #[test]
    fn a_paused_servers_gpus_count_as_idle_at_two_percent_busy_within_ten_seconds() {
        // The threshold and the settle time, pinned: docs/schedule.md ("A release is read")
        // argues for both, and a change must change the words there too.
        assert_eq!(MAX_BUSY_AFTER_RELEASE_PERCENT, 2);
        assert_eq!(IDLE_SETTLE, Duration::from_secs(10));
        assert!(IDLE_SETTLE <= RELEASE_SETTLE);
        check_activity(&[busy(0, 0, 0)], "idle");
        check_activity(&[busy(0, 0, 2), busy(1, 0, 1)], "idle");
        check_activity(&[busy(0, 0, 3)], "busy: GPU 0: 3% busy (amd-smi)");
        check_activity(
            &[busy(0, 0, 100), busy(1, 0, 0), busy(2, 0, 57)],
            "busy: GPU 0: 100% busy (amd-smi), GPU 2: 57% busy (amd-smi)",
        );
        // Fail closed: a GPU whose activity cannot be read, or no GPU, is no proof of idleness.
        check_activity(
            &[
                busy(0, 0, 0),
                activity_unreadable(1, "amd-smi gives no activity; sysfs: cannot read"),
            ],
            "unreadable: GPU 1: amd-smi gives no activity; sysfs: cannot read",
        );
        check_activity(&[], "unreadable: the server holds no GPU to read");
    }

    #[test]
    fn busy_gpus_are_read_again_once_paused_until_idle_and_their_memory_is_judged_first() {
        let reads = Cell::new(0);
        let minute = Duration::from_secs(60);
        // Idle on the third reading: queued work that drained within the settle time.
        let drained_late = || {
            reads.set(reads.get() + 1);
            vec![busy(0, 0, if reads.get() < 3 { 100 } else { 0 })]
        };
        let wait = Wait { within: minute, every: Duration::ZERO };
        assert_eq!(settle(drained_late, Moment::OncePaused, wait), Freed::Yes);
        assert_eq!(reads.replace(0), 3);
        // Busy throughout: busy, once the settle time has passed.
        let spinning = || {
            reads.set(reads.get() + 1);
            vec![busy(0, 0, 100)]
        };
        let wait = Wait { within: Duration::from_millis(30), every: Duration::from_millis(10) };
        assert_eq!(
            settle(spinning, Moment::OncePaused, wait),
            Freed::Busy(
                "GPU 0: 100% busy (amd-smi) 0 s after it was paused, where a released server's GPUs must be at most 2% busy"
                    .to_owned()
            )
        );
        assert!(reads.replace(0) >= 2);
        // After the release (before the pause) the activity is not judged: the server may
        // still be running its release's last work, and it is read again once paused.
        let wait = Wait { within: minute, every: minute };
        assert_eq!(settle(spinning, Moment::AfterRelease, wait), Freed::Yes);
        assert_eq!(reads.replace(0), 1);
        // Memory taken back and GPUs busy: the memory is the finding, at once.
        let both = || {
            reads.set(reads.get() + 1);
            vec![busy(0, 90 * GIB, 100)]
        };
        let Freed::Kept(kept) = settle(both, Moment::OncePaused, wait) else {
            panic!("the memory held once paused is kept");
        };
        assert!(kept.ends_with(" once it was paused, where a released server must leave 90% free"));
        assert_eq!(reads.replace(0), 1);
        // Activity that cannot be read: final at once, never waited for.
        let no_activity = || {
            reads.set(reads.get() + 1);
            vec![activity_unreadable(0, "rocm-smi gives no activity; sysfs: cannot read")]
        };
        assert_eq!(
            settle(no_activity, Moment::OncePaused, wait),
            Freed::ActivityUnreadable(
                "GPU 0: rocm-smi gives no activity; sysfs: cannot read".to_owned()
            )
        );
        assert_eq!(reads.get(), 1);
    }
}
