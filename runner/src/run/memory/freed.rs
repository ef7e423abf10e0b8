//! Whether a server's memory release gave its GPUs back. A server's `200` to a release is its
//! own word, and a PR's server is PR code: it can answer and keep its memory, so that the other
//! side's server loads or wakes into less (slower, or out of memory: a base side that fails).
//! So after every release, of either side's server (base's is trusted code, but the check is
//! cheap and the same for both), the step loop reads the memory of the GPUs the released server
//! holds with the preflight's sources ([`crate::preflight::read_gpus`]: `amd-smi`, else
//! `rocm-smi`, else sysfs under the preflight's root), and the release counts only when each
//! of them has [`MIN_FREE_AFTER_RELEASE_PERCENT`] of its memory free within [`RELEASE_SETTLE`].
//! Once a released server is paused (frozen: it can take nothing back), its GPUs are read once
//! more ([`ReleaseCheck::once_paused`]), so that a server that frees its memory for the reading
//! and takes it back before its pause is caught too. A release that does not count is no
//! release: the step loop stops the server instead, and from then on switches that side by
//! reloads ([`Freed::Kept`]). A reading that cannot be made (no tool answers and sysfs has no
//! figures) fails closed the same way ([`Freed::Unreadable`]): a stop and a reload cost
//! minutes, a base server loaded beside a PR's that kept its memory costs the verdict.
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

/// How long to wait between two readings of GPUs still held after a release.
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
    /// Every GPU the server holds has [`MIN_FREE_AFTER_RELEASE_PERCENT`] free.
    Yes,
    /// Not read: the preflight is off.
    Unread,
    /// The GPUs are still held [`RELEASE_SETTLE`] after the release: which, how much, by which
    /// source, in words.
    Kept(String),
    /// The GPUs' memory could not be read: why, in words.
    Unreadable(String),
}

impl ReleaseCheck<'_> {
    /// Reads GPUs `gpus` (a released server's) until they are freed or [`RELEASE_SETTLE`] has
    /// passed; one reading when the release freed them at once, or when none can be made.
    pub(in crate::run) fn after_release(&self, gpus: &[u32]) -> Freed {
        self.read(gpus, Moment::AfterRelease)
    }

    /// Reads GPUs `gpus` once more, their released server paused since [`Self::after_release`]
    /// found them freed: a paused server changes nothing, so there is nothing to wait for.
    pub(in crate::run) fn once_paused(&self, gpus: &[u32]) -> Freed {
        self.read(gpus, Moment::OncePaused)
    }

    fn read(&self, gpus: &[u32], moment: Moment) -> Freed {
        let ReleaseCheck::Read { node, root, commands } = self else {
            return Freed::Unread;
        };
        let probes = Probes { commands, root };
        let within = match moment {
            Moment::AfterRelease => RELEASE_SETTLE,
            Moment::OncePaused => Duration::ZERO,
        };
        let read = || read_gpus(node, probes, gpus);
        settle(read, moment, Wait { within, every: READING_INTERVAL })
    }
}

/// When GPUs are read: after a release, or once its server is paused.
#[derive(Debug, Clone, Copy)]
enum Moment {
    AfterRelease,
    OncePaused,
}

/// How long GPUs still held are read again (`within`), and how far apart (`every`).
#[derive(Debug, Clone, Copy)]
struct Wait {
    within: Duration,
    every: Duration,
}

/// Readings from `read` until one judges the GPUs freed, one cannot be made, or `wait` has
/// passed (then the last one's GPUs are [`Freed::Kept`] at `moment`).
fn settle(mut read: impl FnMut() -> Vec<GpuReading>, moment: Moment, wait: Wait) -> Freed {
    let Wait { within, every } = wait;
    let began = Instant::now();
    loop {
        match judge(&read()) {
            Judged::Freed => return Freed::Yes,
            Judged::Unreadable(why) => return Freed::Unreadable(why),
            Judged::Held(held) if began.elapsed() >= within => {
                let when = match moment {
                    Moment::AfterRelease => {
                        format!("{} s after the release", began.elapsed().as_secs())
                    }
                    Moment::OncePaused => "once it was paused".to_owned(),
                };
                return Freed::Kept(format!(
                    "{held} {when}, where a released server must leave {MIN_FREE_AFTER_RELEASE_PERCENT}% free"
                ));
            }
            Judged::Held(_) => std::thread::sleep(every),
        }
    }
}

/// One reading, judged.
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
    if readings.is_empty() {
        return Judged::Unreadable("the server holds no GPU to read".to_owned());
    }
    let mut held = Vec::new();
    for GpuReading { id, memory, .. } in readings {
        match memory {
            Err(problem) => return Judged::Unreadable(format!("GPU {id}: {problem}")),
            Ok((vram, _)) if has_free_percent(*vram, MIN_FREE_AFTER_RELEASE_PERCENT) => {}
            Ok((vram, source)) => held.push(format!(
                "GPU {id}: {} of {} used ({source})",
                gib(vram.used),
                gib(vram.total)
            )),
        }
    }
    if held.is_empty() { Judged::Freed } else { Judged::Held(held.join(", ")) }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::preflight::{Thresholds, Vram};

    const GIB: u64 = 1024 * 1024 * 1024;

    /// GPU `id`'s reading: `used` of a 100 GiB GPU, idle, by amd-smi.
    fn used(id: u32, used: u64) -> GpuReading {
        let memory = Ok((Vram { total: 100 * GIB, used }, "amd-smi"));
        GpuReading { id, memory, busy: Ok((0, "amd-smi")) }
    }

    fn unreadable(id: u32, problem: &str) -> GpuReading {
        GpuReading { id, memory: Err(problem.to_owned()), busy: Err(problem.to_owned()) }
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
}
