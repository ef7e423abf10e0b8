//! Prefill/decode instances on real sockets, driven as sglang-router's PD mode drives them: the
//! same body, with the three bootstrap fields, to a prefill and a decode instance at once.

use super::*;
use crate::disaggregation::{Disaggregation, Mode};

/// A free port on 127.0.0.1 (bound and let go: what the bootstrap server binds next).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a port")
        .local_addr()
        .expect("an address")
        .port()
}

struct Pair {
    prefill: RunningServer,
    decode: RunningServer,
    bootstrap_port: u16,
    decode_log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

fn pair(transport: &str) -> Pair {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let bootstrap_port = free_port();
    let prefill = start(Profile {
        time_to_first_token: Duration::from_millis(60),
        disaggregation: Some(Disaggregation {
            bootstrap_port,
            ..Disaggregation::new(Mode::Prefill)
        }),
        log_file: Some(dir.path().join("prefill.log")),
        ..fast()
    });
    let decode_log = dir.path().join("decode.log");
    let decode = start(Profile {
        time_per_output_token: Duration::from_millis(5),
        disaggregation: Some(Disaggregation {
            transport: transport.to_owned(),
            bootstrap_timeout: Duration::from_millis(400),
            ..Disaggregation::new(Mode::Decode)
        }),
        log_file: Some(decode_log.clone()),
        ..fast()
    });
    Pair { prefill, decode, bootstrap_port, decode_log, _dir: dir }
}

fn routed(body: Value, port: u16, room: u64) -> Value {
    let mut body = body;
    body["bootstrap_host"] = json!("127.0.0.1");
    body["bootstrap_port"] = json!(port);
    body["bootstrap_room"] = json!(room);
    body
}

#[test]
fn a_decode_instance_streams_once_its_prefill_peer_hands_the_room_over() {
    let pair = pair("rdma");
    let room = 5_976_266_185_992_719_238_u64;
    let body = routed(
        json!({"prompt": "question\nexpected: 42", "max_tokens": 8, "stream": true}),
        pair.bootstrap_port,
        room,
    );
    let (prefill, decode) = thread::scope(|scope| {
        let prefill = scope.spawn(|| {
            let client = Client::new(&pair.prefill);
            let sent = Instant::now();
            (sent, client.post("/v1/completions", &body))
        });
        let decode = scope.spawn(|| Client::new(&pair.decode).stream("/v1/completions", &body));
        (prefill.join().expect("the prefill"), decode.join().expect("the decode"))
    });
    let (prefill_sent, prefill) = prefill;
    assert_eq!(prefill.0, 200, "{}", prefill.1);
    // The prefill makes the first token only; the decode the answer, after the prefill's time.
    assert_eq!(prefill.1.matches("data: {").count(), 1, "{}", prefill.1);
    let text: String = decode.events.iter().map(|(_, event)| token_text(event)).collect();
    assert_eq!(text, "42");
    assert!(decode.done);
    // On one clock, whatever the machine's load: the decode's first token came after the
    // prefill's request was sent plus the prefill's time to first token (60 ms).
    let first = decode.sent + decode.events[0].0;
    assert!(
        first >= prefill_sent + Duration::from_millis(60),
        "the first token {:?} after the prefill was sent",
        first.saturating_duration_since(prefill_sent)
    );
    let log = std::fs::read_to_string(&pair.decode_log).expect("the decode log");
    assert!(
        log.contains("[disaggregation] mode=decode transfer-backend=mooncake transport=rdma"),
        "{log}"
    );
    let transfer = format!(
        "room={room} kv from 127.0.0.1:{} transfer-backend=mooncake transport=rdma",
        pair.bootstrap_port
    );
    assert!(log.contains(&transfer), "{log}");
}

#[test]
fn a_decode_instance_fails_cleanly_without_the_fields_or_for_a_room_its_peer_never_saw() {
    let pair = pair("tcp");
    let client = Client::new(&pair.decode);
    let plain = json!({"prompt": "hello", "max_tokens": 4, "stream": true});
    let (status, body) = client.post("/v1/completions", &plain);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("bootstrap_room"), "{body}");
    let started = Instant::now();
    let (status, body) =
        client.post("/v1/completions", &routed(plain.clone(), pair.bootstrap_port, 7));
    assert_eq!(status, 500, "{body}");
    assert!(
        body.contains("room 7") && body.contains(&format!("127.0.0.1:{}", pair.bootstrap_port)),
        "{body}"
    );
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    // No prefill there at all: the bootstrap port refuses.
    let (status, body) = client.post("/v1/completions", &routed(plain, free_port(), 8));
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("cannot reach its bootstrap server"), "{body}");
    // A prefill instance refuses a request that did not come through a PD router.
    let (status, _) = Client::new(&pair.prefill).post("/generate", &json!({"text": "x"}));
    assert_eq!(status, 400);
    let log = std::fs::read_to_string(&pair.decode_log).expect("the decode log");
    assert!(log.contains("transport=tcp") && !log.contains("transport=rdma"), "{log}");
}

#[test]
fn a_router_learns_the_model_from_server_info() {
    let server = start(Profile { model: "qwen-pd".to_owned(), ..fast() });
    let client = Client::new(&server);
    for path in ["/server_info", "/get_server_info"] {
        let (status, body) = client.get(path);
        let info: Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!((status, info["served_model_name"].as_str()), (200, Some("qwen-pd")), "{path}");
        // No path: a router would try to load a tokenizer from it.
        assert!(info.get("model_path").is_none() && info.get("tokenizer_path").is_none());
    }
    for path in ["/model_info", "/get_model_info"] {
        let (status, body) = client.get(path);
        assert_eq!(status, 200, "{path}: {body}");
        assert!(body.contains("is_generation"), "{body}");
    }
}
