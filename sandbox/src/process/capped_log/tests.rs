use super::*;

/// Pushes `pushes` into a ring of `capacity`; expects what it holds and what fell out.
fn check_ring(capacity: usize, pushes: &[&str], holds: &str, evicted: u64, evicted_lines: u64) {
    let mut ring = Ring::new(capacity);
    for push in pushes {
        ring.push(push.as_bytes());
    }
    let (older, newer) = ring.slices();
    let held = [older, newer].concat();
    assert_eq!(String::from_utf8_lossy(&held), holds, "{pushes:?} into {capacity}");
    assert_eq!((ring.evicted, ring.evicted_lines), (evicted, evicted_lines), "{pushes:?}");
    assert_eq!(ring.len(), held.len());
}

#[test]
fn a_ring_keeps_the_latest_bytes_and_counts_what_falls_out() {
    check_ring(8, &[], "", 0, 0);
    check_ring(8, &["abc"], "abc", 0, 0);
    check_ring(8, &["abcdefgh"], "abcdefgh", 0, 0);
    check_ring(8, &["abc\n", "defg"], "abc\ndefg", 0, 0);
    // One byte too many, then wrapping round more than once.
    check_ring(8, &["abc\ndefg", "h"], "bc\ndefgh", 1, 0);
    check_ring(8, &["a\nb\n", "c\nd\n", "e\nf\n"], "c\nd\ne\nf\n", 4, 2);
    check_ring(8, &["12345", "678", "9\n", "abc", "defgh"], "abcdefgh", 10, 1);
    // A push longer than the ring: the ring and the push's front fall out.
    check_ring(4, &["a\nb", "\n\n123456"], "3456", 7, 3);
    check_ring(4, &["ab", "cdef"], "cdef", 2, 0);
    check_ring(0, &["a\nb"], "", 3, 1);
}

#[test]
fn a_rings_latest_bytes_and_its_oldest_lines() {
    let mut ring = Ring::new(6);
    ring.push(b"a\nb\ncd");
    ring.push(b"e\n");
    // Holds "b\ncde\n", stored wrapped: the oldest part is "b\ncd", the newest "e\n".
    assert_eq!(ring.last(3), (&b"d"[..], &b"e\n"[..]));
    assert_eq!(ring.last(1), (&b""[..], &b"\n"[..]));
    assert_eq!(ring.last(99), (&b"b\ncd"[..], &b"e\n"[..]));
    assert_eq!(ring.lines_in_oldest(2), 1);
    assert_eq!(ring.lines_in_oldest(5), 1);
    assert_eq!(ring.lines_in_oldest(6), 2);
}

#[test]
fn the_cut_line_says_what_was_cut_and_what_is_kept() {
    let cut = Cut { bytes: 1_070_596_096, lines: 12_345_678 };
    assert_eq!(
        cut.final_line(Caps::DEFAULT, true),
        "[prgate: 1,070,596,096 bytes in 12,345,678 lines cut here; the log keeps its first 1 MiB and its last 1 MiB]\n"
    );
    // A head that ends inside a line: the cut line is a line of its own.
    assert!(cut.final_line(Caps::DEFAULT, false).starts_with("\n[prgate: 1,070,596,096 bytes"));
    assert_eq!(
        Cut { bytes: 5, lines: 0 }.live_line(Caps::DEFAULT, true),
        "[prgate: 5 bytes in 0 lines cut here so far; while the command runs the log shows its latest 64 KiB, once it ends its last 1 MiB]\n"
    );
    let odd = Caps { head: 3 * 1024, tail: 100, live_tail: 10 };
    assert_eq!(
        Cut { bytes: 999, lines: 1000 }.final_line(odd, true),
        "[prgate: 999 bytes in 1,000 lines cut here; the log keeps its first 3 KiB and its last 100 bytes]\n"
    );
}

#[test]
fn numbers_are_grouped_in_thousands() {
    for (number, text) in [(0, "0"), (999, "999"), (1000, "1,000"), (123_456_789, "123,456,789")] {
        assert_eq!(grouped(number), text);
    }
}

/// A log with a head of 4 bytes, a tail of 6 and a live tail of 2, written by `pushes` after
/// `before` (an earlier command's output).
fn small_log(before: &str, pushes: &[&str]) -> (tempfile::TempDir, CappedLog) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("logs").join("child.log");
    std::fs::create_dir_all(path.parent().expect("a folder")).expect("the folder");
    std::fs::write(&path, before).expect("the earlier output");
    let mut log = CappedLog::open(&path, Caps { head: 4, tail: 6, live_tail: 2 }).expect("opened");
    for push in pushes {
        log.push(push.as_bytes());
    }
    (dir, log)
}

fn check_log(before: &str, pushes: &[&str], expect: &str) {
    let (dir, log) = small_log(before, pushes);
    log.finish().expect("written");
    let text = std::fs::read_to_string(dir.path().join("logs/child.log")).expect("read");
    assert_eq!(text, expect, "{pushes:?}");
}

#[test]
fn a_log_keeps_its_head_and_tail_with_the_cut_between() {
    // Up to the head and the tail together, the output as printed.
    check_log("", &[], "");
    check_log("", &["ab\n"], "ab\n");
    check_log("", &["ab\ncdefghi"], "ab\ncdefghi");
    check_log("", &["ab\nc", "def", "ghi"], "ab\ncdefghi");
    // One byte more: the cut line between the head (which ends inside a line) and the last
    // 6 bytes.
    check_log(
        "",
        &["ab\ncdefghi", "\n"],
        "ab\nc\n[prgate: 1 byte in 0 lines cut here; the log keeps its first 4 bytes and its last 6 bytes]\nefghi\n",
    );
    check_log(
        "",
        &["ab\ncdefghij", "k\n"],
        "ab\nc\n[prgate: 3 bytes in 0 lines cut here; the log keeps its first 4 bytes and its last 6 bytes]\nghijk\n",
    );
    check_log(
        "",
        &["abcd", "\n1\n2\n3\n"],
        "abcd\n[prgate: 1 byte in 1 line cut here; the log keeps its first 4 bytes and its last 6 bytes]\n1\n2\n3\n",
    );
    check_log(
        "",
        &["abc\n", "1\n2\n3\n4\n5\n6\n"],
        "abc\n[prgate: 6 bytes in 3 lines cut here; the log keeps its first 4 bytes and its last 6 bytes]\n4\n5\n6\n",
    );
    // A second command appends to the first one's output, with a head and a tail of its own.
    check_log(
        "earlier\n",
        &["abc\n1\n2\n3\n4\n5\n6\n"],
        "earlier\nabc\n[prgate: 6 bytes in 3 lines cut here; the log keeps its first 4 bytes and its last 6 bytes]\n4\n5\n6\n",
    );
}

#[test]
fn a_live_reader_sees_the_cut_so_far_and_the_latest_bytes() {
    let (dir, mut log) = small_log("", &["abc\n", "1\n2\n3\n", "4\n5\n6\n"]);
    let path = dir.path().join("logs/child.log");
    assert!(log.live_pending());
    log.write_live();
    assert!(!log.live_pending());
    let live = std::fs::read_to_string(&path).expect("read");
    assert_eq!(
        live,
        "abc\n[prgate: 10 bytes in 5 lines cut here so far; while the command runs the log shows its latest 2 bytes, once it ends its last 6 bytes]\n6\n"
    );
    // Ended, the whole tail replaces the live view.
    log.push(b"7\n");
    log.finish().expect("written");
    assert_eq!(
        std::fs::read_to_string(&path).expect("read"),
        "abc\n[prgate: 8 bytes in 4 lines cut here; the log keeps its first 4 bytes and its last 6 bytes]\n5\n6\n7\n"
    );
}

#[test]
fn a_log_replaced_by_a_link_is_not_opened() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let host = dir.path().join("host-file");
    std::fs::write(&host, "host\n").expect("a host file");
    let link = dir.path().join("child.log");
    std::os::unix::fs::symlink(&host, &link).expect("a link");
    assert!(CappedLog::open(&link, Caps::DEFAULT).is_err());
    assert_eq!(std::fs::read_to_string(&host).expect("read"), "host\n");
}
