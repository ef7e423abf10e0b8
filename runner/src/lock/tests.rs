//! The host lock with real `flock` locks: two holders in this process (a lock belongs to an
//! open file, so two opens of one path conflict like two processes do), and a holder in a
//! separate `python3` process killed with `SIGKILL`.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant, UNIX_EPOCH};

use super::{HostLock, LockError, format_duration, rfc3339_utc};

fn lock_file(dir: &Path) -> std::path::PathBuf {
    dir.join("cache").join("prgate.lock")
}

fn busy_holder(error: LockError) -> (Option<super::Holder>, Option<Duration>, String) {
    let message = error.to_string();
    match error {
        LockError::Busy { holder, waited, .. } => (holder, waited, message),
        LockError::Io { path, source } => {
            panic!("expected busy, got an I/O error on {path:?}: {source}")
        }
    }
}

/// A `python3` holding an exclusive `flock` on `path` until it is killed; returns once it holds it.
fn python_holder(path: &Path) -> Child {
    let script = "import fcntl, sys, time\n\
                  f = open(sys.argv[1], 'a')\n\
                  fcntl.flock(f, fcntl.LOCK_EX)\n\
                  print('locked', flush=True)\n\
                  time.sleep(600)\n";
    #[expect(clippy::disallowed_methods, reason = "a test holds the lock from another process")]
    let mut child = Command::new("python3")
        .args(["-c", script])
        .arg(path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 starts");
    let stdout = child.stdout.take().expect("a pipe");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).expect("python3 says it holds the lock");
    assert_eq!(line.trim(), "locked");
    child
}

#[test]
fn a_second_holder_is_refused_and_told_who_holds_the_host() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = lock_file(dir.path());
    let first = HostLock::acquire(&path, "prgate run for PR #12", None).expect("the first holder");
    assert_eq!(first.holder().pid, std::process::id());
    assert_eq!(first.holder().run, "prgate run for PR #12");

    let refused = HostLock::acquire(&path, "prgate run for PR #13", None).expect_err("busy");
    let (holder, waited, message) = busy_holder(refused);
    assert_eq!(holder.as_ref(), Some(first.holder()));
    assert_eq!(waited, None);
    let expect = format!(
        "the host is busy: prgate run for PR #12 (pid {} on {}) since {}\n\
         hint: wait for it with --wait-lock DURATION",
        std::process::id(),
        first.holder().host,
        first.holder().since
    );
    assert_eq!(message, expect);

    // A zero wait is no wait.
    let refused = HostLock::acquire(&path, "prgate run for PR #13", Some(Duration::ZERO));
    assert_eq!(busy_holder(refused.expect_err("busy")).1, None);
}

#[test]
fn a_waiting_holder_gets_the_lock_when_the_first_lets_go() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = lock_file(dir.path());
    let first = HostLock::acquire(&path, "prgate run for PR #12", None).expect("the first holder");
    let started = Instant::now();
    let releaser = thread::spawn(move || {
        thread::sleep(Duration::from_millis(300));
        first.release();
    });
    let second = HostLock::acquire(&path, "prgate run for PR #13", Some(Duration::from_secs(20)))
        .expect("the lock once the first lets go");
    assert!(started.elapsed() >= Duration::from_millis(300), "it waited for the first holder");
    releaser.join().expect("the releasing thread");
    assert_eq!(second.holder().run, "prgate run for PR #13");
    let text = std::fs::read_to_string(&path).expect("the lock file");
    assert!(text.contains("run = \"prgate run for PR #13\""), "{text}");
    assert!(text.contains(&format!("pid = {}", std::process::id())), "{text}");
}

#[test]
fn a_wait_that_runs_out_says_how_long_it_waited() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = lock_file(dir.path());
    let _first = HostLock::acquire(&path, "prgate run for PR #12", None).expect("the first holder");
    let started = Instant::now();
    let refused = HostLock::acquire(&path, "prgate run for PR #13", Some(Duration::from_secs(1)));
    let (_holder, waited, message) = busy_holder(refused.expect_err("still busy"));
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert!(waited.is_some_and(|waited| waited >= Duration::from_secs(1)), "{waited:?}");
    assert!(
        message.starts_with("the host is still busy after 1s: prgate run for PR #12"),
        "{message}"
    );
}

#[test]
fn a_holder_killed_with_sigkill_leaves_no_stale_lock() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = lock_file(dir.path());
    std::fs::create_dir_all(path.parent().expect("a folder")).expect("the cache dir");
    let mut python = python_holder(&path);

    // It holds the lock but wrote nothing: the refusal says so.
    let refused = HostLock::acquire(&path, "prgate run for PR #12", None).expect_err("busy");
    let (holder, _waited, message) = busy_holder(refused);
    assert_eq!(holder, None);
    assert_eq!(
        message,
        format!(
            "the host is busy: another process holds {} and has not said who it is\n\
             hint: wait for it with --wait-lock DURATION",
            path.display()
        )
    );

    python.kill().expect("SIGKILL");
    python.wait().expect("the killed holder is reaped");
    let lock = HostLock::acquire(&path, "prgate run for PR #12", None)
        .expect("a dead holder's lock does not block");
    assert_eq!(lock.holder().run, "prgate run for PR #12");
}

#[test]
fn the_lock_file_content_is_information_only() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = lock_file(dir.path());
    std::fs::create_dir_all(path.parent().expect("a folder")).expect("the cache dir");
    let cases: &[&[u8]] = &[
        b"garbage \x00\xff not toml",
        b"pid = 4242\nhost = \"mi355x-1\"\nrun = \"prgate run for PR #7\"\nsince = \"2026-11-29T18:00:00Z\"\n",
        b"",
    ];
    for content in cases {
        std::fs::write(&path, content).expect("the old content");
        let lock = HostLock::acquire(&path, "prgate run for PR #12", None)
            .unwrap_or_else(|error| panic!("{content:?} blocked the lock: {error}"));
        let text = std::fs::read_to_string(&path).expect("the lock file");
        let written: super::Holder = toml::from_str(&text).expect("the holder's own text");
        assert_eq!(&written, lock.holder(), "{content:?}");
        drop(lock);
        assert_eq!(std::fs::read(&path).expect("the lock file"), b"", "emptied on release");
    }
}

#[test]
fn times_are_rfc3339_utc_and_durations_read_like_the_flag() {
    let cases = [
        (0, "1970-01-01T00:00:00Z"),
        (951_782_400, "2000-02-29T00:00:00Z"),
        (1_795_975_200, "2026-11-29T18:00:00Z"),
        (4_102_444_799, "2099-12-31T23:59:59Z"),
    ];
    for (seconds, expect) in cases {
        let time = UNIX_EPOCH + Duration::from_secs(seconds);
        assert_eq!(rfc3339_utc(time), expect, "{seconds}");
    }

    let durations = [(0, "0s"), (45, "45s"), (90, "1m30s"), (3600, "1h"), (5430, "1h30m30s")];
    for (seconds, expect) in durations {
        assert_eq!(format_duration(Duration::from_secs(seconds)), expect, "{seconds}");
    }
}
