//! `prgate sim-server` as a real process on a real socket.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Sends one HTTP/1.1 request and returns the whole answer.
fn http(address: &str, request: &str) -> String {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(10))).expect("a timeout");
    stream.write_all(request.as_bytes()).expect("send");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}

#[test]
fn the_simulated_server_answers_like_an_openai_server_and_logs_routing() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let address_file = dir.path().join("address");
    let log = dir.path().join("server.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_prgate"))
        .args(["sim-server", "--tpot-ms", "2", "--model", "kimi_k31", "--enable-amd-monokernel"])
        .arg("--address-file")
        .arg(&address_file)
        .arg("--log-file")
        .arg(&log)
        .stdout(Stdio::null())
        .spawn()
        .expect("prgate sim-server starts");
    let started = Instant::now();
    let url = loop {
        if let Ok(text) = std::fs::read_to_string(&address_file)
            && text.ends_with('\n')
        {
            break text.trim().to_owned();
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the server never said where it listens"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let address = url.trim_start_matches("http://").to_owned();

    let health = http(&address, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    let body =
        r#"{"model": "kimi_k31", "prompt": "one two three", "max_tokens": 5, "ignore_eos": true}"#;
    let request = format!(
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let answer = http(&address, &request);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let json = &answer[answer.find('{').expect("a JSON body")..];
    let value: serde_json::Value = serde_json::from_str(json.trim()).expect("JSON");
    assert_eq!(value["usage"]["completion_tokens"], 5, "{value}");
    assert_eq!(value["usage"]["prompt_tokens"], 3, "{value}");

    // The built-in client against it. A loaded machine only makes a token later, never earlier
    // than the server's schedule (50 ms to the first, 2 ms a token after it, no noise): what
    // holds whatever the load is that every request took at least that long, and a TPOT was
    // measured. How close the client comes to the server's 2 ms is a benchmark's question
    // (bench/client.sh), not a test's.
    let bench = std::process::Command::new(env!("CARGO_BIN_EXE_prgate"))
        .args([
            "bench",
            "--url",
            &url,
            "--model",
            "kimi_k31",
            "--input-len",
            "8",
            "--output-len",
            "40",
        ])
        .args(["--concurrency", "2", "--requests", "6", "--warmup", "1"])
        .output()
        .expect("prgate bench runs");
    assert!(bench.status.success(), "{}", String::from_utf8_lossy(&bench.stderr));
    let result: serde_json::Value = serde_json::from_slice(&bench.stdout).expect("JSON");
    assert_eq!(result["completed"], 6, "{result}");
    assert_eq!(result["failed"], 0, "{result}");
    let tpot = result["median_tpot_ms"].as_f64().expect("a median TPOT");
    assert!(tpot.is_finite() && tpot > 0.0, "median TPOT {tpot} ms");
    let scheduled = 50.0 + 39.0 * 2.0;
    for key in ["median_e2e_latency_ms", "mean_e2e_latency_ms"] {
        let latency = result[key].as_f64().expect("a latency");
        assert!(
            latency >= scheduled,
            "{key} {latency} ms: earlier than the server's {scheduled} ms"
        );
    }

    child.kill().expect("stop the server");
    child.wait().expect("the server ends");
    let logged = std::fs::read_to_string(&log).expect("the log");
    assert!(logged.contains("[monokernel] routed kimi_k31"), "{logged}");
}

#[test]
fn a_flag_the_profiles_rule_refuses_is_named_and_nothing_is_served() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    // Were a flag accepted, the server would stop at once on an address file it cannot write
    // (and this test fail), not serve for ever.
    let unwritable = dir.path().join("no/such/folder/address");
    let unwritable = unwritable.to_str().expect("UTF-8");
    for (flags, said) in [
        (&["--noise-cv=-0.5"][..], "--noise-cv: -0.5 is not a finite number, zero or more"),
        (&["--accuracy", "2"][..], "--accuracy: 2 is not a probability from 0 to 1"),
        (&["--tpot-ms", "1e300"][..], "--tpot-ms: 1e300 ms is too long"),
        (
            &["--disaggregation-mode", "prefill", "--disaggregation-transport", "r d m a"][..],
            "--disaggregation-transport: \"r d m a\" is not one word",
        ),
        (&["--disaggregation-transport", "tcp"][..], "need --disaggregation-mode"),
    ] {
        let args = [&["sim-server", "--address-file", unwritable][..], flags].concat();
        let run = crate::support::prgate(dir.path(), &args);
        assert_eq!(run.code, 2, "{flags:?}: {}", run.stderr);
        assert!(run.stderr.contains(said), "{flags:?}: {}", run.stderr);
        assert!(!run.stdout.contains("listening on"), "{}", run.stdout);
    }
}
