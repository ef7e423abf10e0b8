//! Tests of the untrusted reader on real files: symbolic links at the end and in the middle,
//! a fifo, a socket, a directory, oversize files and paths that leave the tree.

use std::os::unix::fs::symlink;
use std::path::Path;

use super::*;

/// A tree with a regular file, links to a "host" file outside it (at the end, and as a folder
/// on the way), a fifo, a socket and a folder; and the host file itself beside the tree.
struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    _socket: std::os::unix::net::UnixListener,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let host = dir.path().join("host");
    std::fs::create_dir(&host).expect("the host folder");
    std::fs::write(host.join("secret"), "host content\n").expect("the host file");
    let root = dir.path().join("tree");
    std::fs::create_dir_all(root.join("out/deep")).expect("the tree");
    std::fs::write(root.join("out/result.json"), "{}\n").expect("a result");
    std::fs::write(root.join("out/deep/log"), "line\n").expect("a deep file");
    std::fs::write(root.join("big"), vec![b'x'; 1025]).expect("a big file");
    std::fs::write(root.join("exact"), vec![b'x'; 1024]).expect("a file at the limit");
    symlink(host.join("secret"), root.join("out/link.json")).expect("a link at the end");
    symlink(&host, root.join("hostdir")).expect("a link in the middle");
    symlink("result.json", root.join("out/relative-link")).expect("a relative link");
    symlink("deep", root.join("out/deep-link")).expect("a link to a folder in the tree");
    rustix::fs::mknodat(CWD, root.join("fifo"), FileType::Fifo, Mode::RUSR | Mode::WUSR, 0)
        .expect("a fifo");
    let socket = std::os::unix::net::UnixListener::bind(root.join("socket")).expect("a socket");
    Fixture { _dir: dir, root, _socket: socket }
}

/// Reads `relative` with a limit of 1024 bytes: its text, or the error's message with the
/// root replaced by `<root>`.
fn check(relative: &str, expect: &str) {
    let fixture = fixture();
    let got = match read_to_string(&fixture.root, Path::new(relative), 1024) {
        Ok(text) if text.len() > 40 => format!("ok: {} bytes", text.len()),
        Ok(text) => format!("ok: {text:?}"),
        Err(error) => error.to_string().replace(&fixture.root.display().to_string(), "<root>"),
    };
    assert_eq!(got, expect, "reading {relative}");
}

#[test]
fn a_regular_file_inside_the_tree_is_read() {
    check("out/result.json", r#"ok: "{}\n""#);
    check("./out/deep/log", r#"ok: "line\n""#);
    check("exact", "ok: 1024 bytes");
}

#[test]
fn a_link_as_the_file_itself_is_refused() {
    check(
        "out/link.json",
        "<root>/out/link.json: `out/link.json` is a symbolic link, which is not followed; it is \
         not read",
    );
    // Even a link that stays inside the tree: the reader never follows one.
    check(
        "out/relative-link",
        "<root>/out/relative-link: `out/relative-link` is a symbolic link, which is not \
         followed; it is not read",
    );
}

#[test]
fn a_link_as_a_folder_on_the_way_is_refused() {
    check(
        "hostdir/secret",
        "<root>/hostdir/secret: `hostdir` is a symbolic link, which is not followed; it is not \
         read",
    );
    check(
        "out/deep-link/log",
        "<root>/out/deep-link/log: `out/deep-link` is a symbolic link, which is not followed; \
         it is not read",
    );
}

#[test]
fn what_is_not_a_regular_file_is_refused_without_blocking() {
    check("fifo", "<root>/fifo: not a regular file (a fifo); it is not read");
    check("socket", "<root>/socket: not a regular file (a socket); it is not read");
    check("out", "<root>/out: not a regular file (a directory); it is not read");
    check(
        "out/result.json/x",
        "<root>/out/result.json/x: `out/result.json` is not a directory; it is not read",
    );
}

#[test]
fn a_file_over_the_limit_is_refused() {
    check("big", "<root>/big: more than the 1024 bytes allowed (at least 1025); it is not read");
}

#[test]
fn a_missing_file_is_named() {
    check("out/none.json", "<root>/out/none.json: no such file; it is not read");
    check("nowhere/none.json", "<root>/nowhere/none.json: no such file; it is not read");
}

#[test]
fn a_path_that_leaves_the_tree_is_refused_before_anything_is_opened() {
    check(
        "../host/secret",
        "<root>/../host/secret: the path leaves its tree (`..`); it is not read",
    );
    check(
        "out/../../host/secret",
        "<root>/out/../../host/secret: the path leaves its tree (`..`); it is not read",
    );
    let fixture = fixture();
    let error = read(&fixture.root, Path::new("/etc/hostname"), 1024).expect_err("refused");
    assert!(matches!(error.problem, Problem::Escapes { .. }), "{error}");
    let error = read(&fixture.root, Path::new(""), 1024).expect_err("refused");
    assert!(matches!(error.problem, Problem::NotRegular { kind: "directory" }), "{error}");
}

#[test]
fn a_full_path_must_lie_below_its_root() {
    let fixture = fixture();
    let inside = fixture.root.join("out/result.json");
    assert_eq!(read_path(&fixture.root, &inside, 1024).expect("read"), b"{}\n");
    let outside = fixture.root.parent().expect("a parent").join("host/secret");
    let error = read_path(&fixture.root, &outside, 1024).expect_err("refused");
    assert!(matches!(error.problem, Problem::NotBelow { .. }), "{error}");
}

#[test]
fn a_tail_reads_only_the_end() {
    let fixture = fixture();
    let opened = open(&fixture.root, Path::new("big")).expect("opened");
    assert_eq!(opened.len, 1025);
    let (bytes, cut) = read_tail(opened, 10).expect("the tail");
    assert_eq!((bytes.len(), cut), (10, true));
    let opened = open(&fixture.root, Path::new("out/deep/log")).expect("opened");
    assert_eq!(read_tail(opened, 10).expect("the tail"), (b"line\n".to_vec(), false));
}

#[test]
fn the_result_limit_is_64_mib() {
    assert_eq!(MAX_RESULT_FILE, 67_108_864);
}
