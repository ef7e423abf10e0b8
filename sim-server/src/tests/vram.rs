//! The fake GPU's memory (`vram-dir`) on real sockets: what a server's file holds through a
//! load, a release and a wake, the server that keeps its memory, one that takes it back, one
//! that leaves its GPU busy, and a load or a wake that does not fit.

use super::*;

const GIB: u64 = 1024 * 1024 * 1024;

/// A server on a fake GPU of `total` bytes in `dir`, holding 100 GiB once loaded.
fn on_gpu(dir: &std::path::Path, keeps: bool) -> Result<RunningServer, SimServerError> {
    let profile = Profile {
        vram_dir: Some(dir.to_owned()),
        vram_bytes: 100 * GIB,
        release_keeps_memory: keeps,
        ..fast()
    };
    serve(profile, "127.0.0.1:0".parse().expect("an address"))
}

/// What the server listening on `server`'s port holds, by its file (its first line).
fn held(dir: &std::path::Path, server: &RunningServer) -> Option<u64> {
    let lines = file_lines(dir, server)?;
    Some(lines.first().expect("a first line").parse().expect("bytes"))
}

/// The lines of the file of the server listening on `server`'s port.
fn file_lines(dir: &std::path::Path, server: &RunningServer) -> Option<Vec<String>> {
    let file = dir.join(format!("{}-{}", std::process::id(), server.addr().port()));
    let text = std::fs::read_to_string(file).ok()?;
    Some(text.lines().map(str::to_owned).collect())
}

#[test]
fn a_server_holds_its_memory_until_it_releases_it_unless_it_lies() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join(VRAM_TOTAL_FILE), format!("{}\n", 288 * GIB)).expect("total");
    let honest = on_gpu(dir.path(), false).expect("it fits");
    let client = Client::new(&honest);
    assert_eq!(held(dir.path(), &honest), Some(100 * GIB), "taken at its load");
    assert_eq!(client.post("/release_memory_occupation", &json!({})).0, 200);
    assert_eq!(held(dir.path(), &honest), Some(0), "given back at its release");
    assert_eq!(client.post("/resume_memory_occupation", &json!({})).0, 200);
    assert_eq!(held(dir.path(), &honest), Some(100 * GIB), "taken again at its wake");

    // The liar answers the release as the honest one does, and keeps its memory.
    let liar = on_gpu(dir.path(), true).expect("it fits beside the other");
    let liars = Client::new(&liar);
    assert_eq!(liars.post("/sleep?level=1", &json!({})).0, 200);
    assert_eq!(held(dir.path(), &liar), Some(100 * GIB), "kept");
    assert_eq!(liars.get("/is_sleeping").1, r#"{"is_sleeping":true}"#);

    // A third does not fit beside them (200 of 288 GiB held): its start is out of memory.
    let error = on_gpu(dir.path(), false).expect_err("no room");
    assert!(error.to_string().starts_with("out of memory: 107374182400 bytes asked"), "{error}");

    // The honest server released, the liar's wake fits; then the honest one's does not (a 500,
    // and it stays released); once the liar is stopped, its file is gone and the wake fits.
    assert_eq!(client.post("/release_memory_occupation", &json!({})).0, 200);
    let third = on_gpu(dir.path(), false).expect("it fits now");
    let (status, body) = client.post("/resume_memory_occupation", &json!({}));
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("out of memory"), "{body}");
    assert_eq!(held(dir.path(), &honest), Some(0));
    drop(third);
    assert_eq!(liars.post("/wake_up", &json!({})).0, 200);
    liar.stop().expect("stopped");
    assert_eq!(client.post("/resume_memory_occupation", &json!({})).0, 200);
    assert_eq!(held(dir.path(), &honest), Some(100 * GIB));
}

#[test]
fn a_server_that_lies_later_takes_its_memory_back_after_a_release() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let profile = Profile {
        vram_dir: Some(dir.path().to_owned()),
        vram_bytes: 100 * GIB,
        retake_memory_after: Some(Duration::from_millis(200)),
        ..fast()
    };
    let server = start(profile);
    let client = Client::new(&server);
    assert_eq!(client.post("/release_memory_occupation", &json!({})).0, 200);
    assert_eq!(held(dir.path(), &server), Some(0), "given back at its release");
    let deadline = Instant::now() + Duration::from_secs(10);
    while held(dir.path(), &server) == Some(0) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(held(dir.path(), &server), Some(100 * GIB), "taken back unasked");
}

#[test]
fn a_server_that_queued_work_leaves_its_gpu_busy_after_a_release() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join(VRAM_TOTAL_FILE), format!("{}\n", 288 * GIB)).expect("total");
    let profile = Profile {
        vram_dir: Some(dir.path().to_owned()),
        vram_bytes: 100 * GIB,
        busy_after_release: Some(Duration::from_secs(60)),
        ..fast()
    };
    let server = start(profile);
    let client = Client::new(&server);
    assert_eq!(file_lines(dir.path(), &server), Some(vec![(100 * GIB).to_string()]), "idle");
    let released = std::time::SystemTime::now();
    assert_eq!(client.post("/release_memory_occupation", &json!({})).0, 200);
    // The memory is given back, and the second line says until when the GPU is busy: a
    // deadline, since a paused server writes nothing.
    let lines = file_lines(dir.path(), &server).expect("its file");
    assert_eq!(lines[0], "0", "{lines:?}");
    let until: u128 = lines[1]
        .strip_prefix(&format!("{VRAM_BUSY_UNTIL} "))
        .and_then(|ms| ms.parse().ok())
        .unwrap_or_else(|| panic!("a busy line: {lines:?}"));
    let since_epoch = released.duration_since(std::time::UNIX_EPOCH).expect("after 1970");
    let ahead = until.saturating_sub(since_epoch.as_millis());
    assert!((59_000..=61_000).contains(&ahead), "busy {ahead} ms ahead");
    // Another server still fits beside it (its file's bytes are read from its first line), and
    // the wake keeps the deadline.
    let other = on_gpu(dir.path(), false).expect("it fits");
    drop(other);
    assert_eq!(client.post("/resume_memory_occupation", &json!({})).0, 200);
    let lines = file_lines(dir.path(), &server).expect("its file");
    assert_eq!(lines, [(100 * GIB).to_string(), format!("{VRAM_BUSY_UNTIL} {until}")]);
}
