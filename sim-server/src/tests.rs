//! Tests of the simulated server: its profile, its answers, and the server itself on real
//! sockets on 127.0.0.1 with a real HTTP client.
//!
//! Timing is only checked as a floor (a delay the profile asks for is at least that long);
//! how fast the server can go is the benchmark's business.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::generate::{self, Endpoint, Output};
use super::rng::{self, SplitMix64};
use super::*;

// ---------------------------------------------------------------------------------------------
// The profile.

#[test]
fn the_default_profile_file_is_the_default() {
    assert_eq!(Profile::from_toml_str(DEFAULT_PROFILE), Ok(Profile::default()));
    assert_eq!(Profile::from_toml_str(""), Ok(Profile::default()));
}

#[test]
fn profile_files() {
    let toml = r#"
        model = "qwen"
        ttft-ms = 120
        tpot-ms = 2.5
        noise-cv = 0.02
        seed = 7
        startup-delay-ms = 3000
        wake-delay-ms = 500
        memory-api = "vllm"
        vram-dir = "gpu0"
        vram-bytes = 1024
        release-keeps-memory = true
        retake-memory-after-ms = 250
        busy-after-release-ms = 60000
        never-healthy = true
        die-after-requests = 40
        error-rate = 0.1
        accuracy = 0.75
        monokernel = true
        log-file = "server.log"
        max-concurrency = 8
    "#;
    let expected = Profile {
        model: "qwen".to_owned(),
        time_to_first_token: Duration::from_millis(120),
        time_per_output_token: Duration::from_micros(2500),
        sglang_time_per_output_token: None,
        noise: CoefficientOfVariation::try_from(0.02).expect("in range"),
        seed: 7,
        startup_delay: Duration::from_secs(3),
        wake_delay: Duration::from_millis(500),
        memory_api: MemoryApi::Vllm,
        vram_dir: Some("gpu0".into()),
        vram_bytes: 1024,
        release_keeps_memory: true,
        retake_memory_after: Some(Duration::from_millis(250)),
        busy_after_release: Some(Duration::from_secs(60)),
        never_healthy: true,
        die_after_requests: Some(40),
        eos_after_tokens: None,
        error_rate: Probability::try_from(0.1).expect("in range"),
        accuracy: Probability::try_from(0.75).expect("in range"),
        monokernel: true,
        log_file: Some("server.log".into()),
        max_concurrency: NonZeroUsize::new(8),
        disaggregation: None,
    };
    assert_eq!(Profile::from_toml_str(toml), Ok(expected.clone()));
    let json = r#"{"model": "qwen", "ttft-ms": 120, "tpot-ms": 2.5, "noise-cv": 0.02, "seed": 7,
        "startup-delay-ms": 3000, "wake-delay-ms": 500, "memory-api": "vllm", "never-healthy": true, "die-after-requests": 40,
        "vram-dir": "gpu0", "vram-bytes": 1024, "release-keeps-memory": true, "retake-memory-after-ms": 250, "busy-after-release-ms": 60000,
        "error-rate": 0.1, "accuracy": 0.75, "monokernel": true, "log-file": "server.log",
        "max-concurrency": 8}"#;
    assert_eq!(Profile::from_json_str(json), Ok(expected));
}

#[test]
fn profile_errors() {
    check_profile_error("accuracy = 1.5", "'accuracy': 1.5 is not a probability from 0 to 1");
    check_profile_error("error-rate = -0.1", "'error-rate': -0.1 is not a probability from 0 to 1");
    check_profile_error("tpot-ms = -1", "'tpot-ms': -1 is not a finite number, zero or more");
    check_profile_error("noise-cv = -0.5", "'noise-cv': -0.5 is not a finite number, zero or more");
    check_profile_error("ttft-ms = 1e300", "'ttft-ms': 1e300 ms is too long");
    check_profile_error("tpot = 3", "unknown field `tpot`");
    check_profile_error("max-concurrency = 0", "nonzero");
    check_profile_error("monokernel = \"yes\"", "invalid type");
}

fn check_profile_error(toml: &str, expected: &str) {
    let error = Profile::from_toml_str(toml).expect_err(toml).to_string();
    assert!(error.contains(expected), "{toml}: {error}");
}

#[test]
fn loading_a_profile_file_names_it_in_errors() {
    let directory = tempfile::tempdir().expect("a temporary directory");
    let json = directory.path().join("fast.json");
    std::fs::write(&json, r#"{"tpot-ms": 1}"#).expect("writable");
    let loaded = Profile::load(&json).expect("a valid profile");
    assert_eq!(loaded.time_per_output_token, Duration::from_millis(1));

    let toml = directory.path().join("bad.toml");
    std::fs::write(&toml, "accuracy = 2").expect("writable");
    let error = Profile::load(&toml).expect_err("out of range").to_string();
    assert!(error.starts_with("error parsing the simulated server's profile "), "{error}");
    assert!(error.contains("bad.toml") && error.contains("'accuracy'"), "{error}");

    let missing = directory.path().join("missing.toml");
    assert!(matches!(Profile::load(&missing), Err(SimServerError::ReadProfile { .. })));
}

// ---------------------------------------------------------------------------------------------
// Answers, as plain data.

#[test]
fn expected_answers() {
    let cases = [
        ("What is 6 * 7?\nexpected: 42", Some("42")),
        ("  expected:   Paris  \nmore", Some("Paris")),
        ("expected: New York\nexpected: Boston", Some("New York")),
        ("expected:", None),
        ("unexpected: 3", None),
        ("no answer here", None),
    ];
    for (prompt, expected) in cases {
        assert_eq!(generate::expected_answer(prompt), expected, "{prompt:?}");
    }
}

#[test]
fn wrong_answers() {
    let cases = [("42", "43"), ("-1", "0"), ("9223372036854775807", "9223372036854775806")];
    for (expected, wrong) in cases {
        assert_eq!(generate::wrong_answer(expected), wrong);
    }
    assert_eq!(generate::wrong_answer("Paris"), "not Paris");
}

#[test]
fn outputs() {
    // (answer, max_tokens, ignore_eos) -> (text, finish_reason)
    let cases = [
        (Some("42"), 16, false, "42", "stop"),
        (Some("New York"), 16, false, "New York", "stop"),
        (Some("New York"), 1, false, "New", "length"),
        (Some("42"), 3, true, "42 sim sim", "length"),
        (None, 3, false, "sim sim sim", "length"),
        (None, 1, true, "sim", "length"),
    ];
    for (answer, max_tokens, ignore_eos, text, finish_reason) in cases {
        let output = Output::new(answer, max_tokens, ignore_eos);
        assert_eq!(
            (output.text().as_str(), output.finish_reason()),
            (text, finish_reason),
            "{answer:?} {max_tokens} {ignore_eos}"
        );
        assert_eq!(output.len(), text.split_whitespace().count());
    }
}

#[test]
fn generation_requests() {
    let request = generate::parse_request(
        Endpoint::Completions,
        r#"{"prompt": "one two  three\nfour", "max_tokens": 5, "ignore_eos": true,
            "stream": true, "stream_options": {"include_usage": true}}"#,
    )
    .expect("valid");
    assert_eq!(
        (request.prompt_tokens, request.max_tokens, request.ignore_eos, request.stream),
        (4, 5, true, true)
    );
    assert!(request.include_usage);

    let defaults =
        generate::parse_request(Endpoint::Completions, r#"{"prompt": ["a b"]}"#).expect("valid");
    assert_eq!((defaults.prompt_tokens, defaults.max_tokens), (2, generate::DEFAULT_MAX_TOKENS));
    assert!(!defaults.stream && !defaults.ignore_eos && !defaults.include_usage);

    let token_ids =
        generate::parse_request(Endpoint::Completions, r#"{"prompt": [1, 2, 3]}"#).expect("valid");
    assert_eq!((token_ids.prompt.as_str(), token_ids.prompt_tokens), ("", 3));

    let chat = generate::parse_request(
        Endpoint::ChatCompletions,
        r#"{"messages": [{"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "expected: 4"}]}],
            "max_completion_tokens": 2}"#,
    )
    .expect("valid");
    assert_eq!(chat.prompt, "be brief\nexpected: 4");
    assert_eq!((chat.prompt_tokens, chat.max_tokens), (4, 2));

    let errors = [
        (Endpoint::Completions, "not json", "the body is not JSON"),
        (Endpoint::Completions, "[]", "not a JSON object"),
        (Endpoint::Completions, r#"{}"#, "prompt must be"),
        (Endpoint::Completions, r#"{"prompt": ["a", "b"]}"#, "one prompt per request"),
        (Endpoint::Completions, r#"{"prompt": "a", "max_tokens": 0}"#, "max_tokens must be"),
        (Endpoint::Completions, r#"{"prompt": "a", "max_tokens": 1e9}"#, "max_tokens must be"),
        (Endpoint::Completions, r#"{"prompt": "a", "stream": "yes"}"#, "stream must be"),
        (Endpoint::ChatCompletions, r#"{"prompt": "a"}"#, "messages must be"),
    ];
    for (endpoint, body, expected) in errors {
        let error = generate::parse_request(endpoint, body).expect_err(body).to_string();
        assert!(error.contains(expected), "{body}: {error}");
    }
}

#[test]
fn noise_has_mean_one_and_the_asked_spread() {
    let mut rng = SplitMix64::new(3);
    let draws: Vec<f64> = (0..20_000).map(|_| rng.noise_factor(0.1)).collect();
    let mean = draws.iter().sum::<f64>() / draws.len() as f64;
    let variance = draws.iter().map(|draw| (draw - mean).powi(2)).sum::<f64>() / draws.len() as f64;
    assert!((mean - 1.0).abs() < 0.01, "mean {mean}");
    assert!((variance.sqrt() - 0.1).abs() < 0.01, "standard deviation {}", variance.sqrt());
    assert_eq!(SplitMix64::new(3).noise_factor(0.0), 1.0);
    assert!(draws.iter().all(|draw| *draw >= rng::MIN_NOISE_FACTOR));
}

#[test]
fn prompt_draws_depend_on_the_prompt_and_the_seed_only() {
    let first = rng::prompt_uniform(1, "expected: 4");
    assert_eq!(first, rng::prompt_uniform(1, "expected: 4"));
    assert_ne!(first, rng::prompt_uniform(2, "expected: 4"));
    assert_ne!(first, rng::prompt_uniform(1, "expected: 5"));
    assert!((0.0..1.0).contains(&first));
}

#[test]
fn a_seeded_answer_is_drawn_per_question_and_seed_at_the_profiles_accuracy() {
    let profile = Profile {
        accuracy: Probability::try_from(0.7).expect("a probability"),
        ..Profile::default()
    };
    let prompts: Vec<String> = (0..400).map(|q| format!("question {q}\nexpected: {q}")).collect();
    let right = |seed: Option<u64>| -> Vec<bool> {
        prompts
            .iter()
            .map(|prompt| {
                answer(&profile, prompt, seed)
                    == generate::expected_answer(prompt).map(str::to_owned)
            })
            .collect()
    };
    // Without a seed: one draw a prompt, as before seeds.
    let unseeded = right(None);
    assert_eq!(unseeded, right(None));
    let first = prompts.first().expect("a prompt");
    assert_eq!(unseeded[0], rng::prompt_uniform(profile.seed, first) < profile.accuracy.value());
    // Each seed draws anew; the same seed draws alike; each near the accuracy.
    let seeds: Vec<Vec<bool>> = (0..4).map(|seed| right(Some(seed))).collect();
    assert_eq!(seeds[1], right(Some(1)));
    for (seed, answers) in seeds.iter().enumerate() {
        let share = answers.iter().filter(|a| **a).count() as f64 / answers.len() as f64;
        assert!((share - 0.7).abs() < 0.08, "seed {seed}: {share}");
        assert_ne!(answers, &unseeded, "seed {seed}");
    }
    let disagree = seeds[0].iter().zip(&seeds[1]).filter(|(a, b)| a != b).count();
    // Independent draws at 0.7 disagree on 2 * 0.7 * 0.3 = 42% of the questions.
    assert!((120..220).contains(&disagree), "{disagree}");
}

// ---------------------------------------------------------------------------------------------
// The server, on real sockets.

#[test]
fn health_waits_for_the_startup_delay() {
    let delay = Duration::from_millis(600);
    let started = Instant::now();
    let server = start(Profile { startup_delay: delay, ..fast() });
    let client = Client::new(&server);

    let (status, _) = client.get("/health");
    assert!(status == 503 || started.elapsed() >= delay, "healthy too early: {status}");
    let (status, _) = client.post("/v1/completions", &json!({"prompt": "hi"}));
    assert!(status == 503 || started.elapsed() >= delay, "answered too early: {status}");

    for path in ["/health", "/health_generate"] {
        let became_healthy = client.wait_for_health(path, started, Duration::from_secs(10));
        assert!(became_healthy >= delay, "{path}: healthy after {became_healthy:?}");
    }
    assert_eq!(client.post("/v1/completions", &json!({"prompt": "hi"})).0, 200);
}

#[test]
fn a_never_healthy_server_answers_503() {
    let server = start(Profile { never_healthy: true, ..fast() });
    let client = Client::new(&server);
    thread::sleep(Duration::from_millis(100));
    assert_eq!(client.get("/health").0, 503);
    assert_eq!(client.get("/health_generate").0, 503);
    assert_eq!(client.get("/v1/models").0, 503);
    assert_eq!(client.post("/v1/chat/completions", &chat("hi", 2)).0, 503);
}

#[test]
fn models_and_unknown_endpoints() {
    let server = start(Profile { model: "qwen-sim".to_owned(), ..fast() });
    let client = Client::new(&server);
    let (status, body) = client.get("/v1/models");
    assert_eq!(status, 200);
    let models: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"][0]["id"], "qwen-sim");
    assert_eq!(client.get("/v1/nothing").0, 404);
    assert_eq!(client.get("/v1/completions").0, 405);
    let (status, body) = client.post("/v1/completions", &json!({"prompt": 3}));
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("prompt must be"), "{body}");
}

/// Sends `head` and `body` over a raw connection (what a hostile client can send) and returns
/// the status line of the answer.
fn raw_exchange(server: &RunningServer, head: &str, body: &[u8]) -> String {
    use std::io::Write as _;
    let address = server.url().trim_start_matches("http://").to_owned();
    let mut stream = std::net::TcpStream::connect(&address).expect("a connection");
    stream.set_read_timeout(Some(Duration::from_secs(30))).expect("a read timeout");
    stream.write_all(head.as_bytes()).expect("the head is sent");
    // The server may answer (and close) before the body is all sent: that is the point.
    let _ = stream.write_all(body);
    let mut status = String::new();
    BufReader::new(stream).read_line(&mut status).expect("an answer");
    status.trim_end().to_owned()
}

#[test]
fn a_request_body_over_the_limit_is_refused_without_being_read() {
    assert_eq!(MAX_REQUEST_BODY, 1_048_576);
    let server = start(fast());
    let announced = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
                     Content-Length: 99999999999\r\n\r\n";
    assert_eq!(raw_exchange(&server, announced, b"{}"), "HTTP/1.1 413 Payload Too Large");
    // A chunked body announces no length: it is cut off after the limit.
    let chunked = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
                   Transfer-Encoding: chunked\r\n\r\n";
    let size = MAX_REQUEST_BODY + 1;
    let mut body = format!("{size:x}\r\n").into_bytes();
    body.extend(std::iter::repeat_n(b' ', size));
    body.extend_from_slice(b"\r\n0\r\n\r\n");
    assert_eq!(raw_exchange(&server, chunked, &body), "HTTP/1.1 413 Payload Too Large");
    // A body at the limit is read (and is then not a valid request).
    let exact = format!(
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         Content-Length: {MAX_REQUEST_BODY}\r\n\r\n"
    );
    let body = vec![b' '; MAX_REQUEST_BODY];
    assert_eq!(raw_exchange(&server, &exact, &body), "HTTP/1.1 400 Bad Request");
    assert_eq!(Client::new(&server).get("/health").0, 200, "the server still serves");
}

#[test]
fn non_streaming_answers() {
    let server = start(Profile { model: "qwen-sim".to_owned(), ..fast() });
    let client = Client::new(&server);

    let (status, body) = client.post(
        "/v1/completions",
        &json!({"prompt": "one two three", "max_tokens": 4, "ignore_eos": true}),
    );
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(answer["object"], "text_completion");
    assert_eq!(answer["model"], "qwen-sim");
    assert!(answer["id"].as_str().is_some_and(|id| id.starts_with("cmpl-")));
    assert!(answer["created"].as_u64().is_some());
    assert_eq!(answer["choices"][0]["text"], "sim sim sim sim");
    assert_eq!(answer["choices"][0]["finish_reason"], "length");
    assert_eq!(
        answer["usage"],
        json!({"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7})
    );

    let (status, body) = client.post("/v1/chat/completions", &chat("What is 2+2?\nexpected: 4", 8));
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(answer["object"], "chat.completion");
    assert_eq!(answer["choices"][0]["message"], json!({"role": "assistant", "content": "4"}));
    assert_eq!(answer["choices"][0]["finish_reason"], "stop");
    assert_eq!(answer["usage"]["prompt_tokens"], 5);
    assert_eq!(answer["usage"]["completion_tokens"], 1);
}

#[test]
fn streams_one_chunk_per_token_spaced_by_the_token_delay() {
    let per_token = Duration::from_millis(40);
    let first_token = Duration::from_millis(30);
    let server = start(Profile {
        time_to_first_token: first_token,
        time_per_output_token: per_token,
        ..fast()
    });
    let client = Client::new(&server);
    let max_tokens = 6;

    for (path, request) in [
        (
            "/v1/completions",
            json!({"prompt": "a b c", "max_tokens": max_tokens, "stream": true,
            "ignore_eos": true, "stream_options": {"include_usage": true}}),
        ),
        (
            "/v1/chat/completions",
            json!({"messages": [{"role": "user", "content": "a b c"}],
            "max_tokens": max_tokens, "stream": true, "ignore_eos": true}),
        ),
    ] {
        let sent = Instant::now();
        let stream = client.stream(path, &request);
        let tokens: Vec<&(Duration, Value)> =
            stream.events.iter().filter(|(_, event)| has_choices(event)).collect();
        assert_eq!(tokens.len(), max_tokens, "{path}");
        assert!(stream.done, "{path}: no [DONE]");

        let (first, _) = tokens[0];
        let (last, last_event) = tokens[max_tokens - 1];
        assert!(*first >= first_token, "{path}: first token after {first:?}");
        let spread = *last - *first;
        let floor = per_token * (u32::try_from(max_tokens).expect("small") - 1);
        // Arrival times may bunch a little on a busy machine; emission cannot come early.
        assert!(spread >= floor.mul_f64(0.8), "{path}: tokens spread over {spread:?}");
        assert!(sent.elapsed() >= first_token + floor, "{path}: done in {:?}", sent.elapsed());
        assert_eq!(last_event["choices"][0]["finish_reason"], "length", "{path}");

        let text: String = tokens.iter().map(|(_, event)| token_text(event)).collect();
        assert_eq!(text, "sim sim sim sim sim sim", "{path}");
        for (_, event) in &tokens[..max_tokens - 1] {
            assert_eq!(event["choices"][0]["finish_reason"], Value::Null, "{path}");
        }
        if path == "/v1/completions" {
            let usage = stream.events.last().map(|(_, event)| event["usage"].clone());
            assert_eq!(
                usage,
                Some(json!({"prompt_tokens": 3, "completion_tokens": 6, "total_tokens": 9}))
            );
        } else {
            assert_eq!(tokens[0].1["object"], "chat.completion.chunk");
            assert_eq!(tokens[0].1["choices"][0]["delta"]["role"], "assistant");
            assert_eq!(stream.events.len(), max_tokens, "no usage chunk unless asked");
        }
    }
}

#[test]
fn a_stream_without_ignore_eos_ends_at_the_answer() {
    let server = start(fast());
    let client = Client::new(&server);
    let request =
        json!({"prompt": "Capital?\nexpected: New York", "max_tokens": 10, "stream": true});
    let stream = client.stream("/v1/completions", &request);
    let texts: Vec<String> = stream.events.iter().map(|(_, event)| token_text(event)).collect();
    assert_eq!(texts, ["New", " York"]);
    assert_eq!(stream.events[1].1["choices"][0]["finish_reason"], "stop");
    assert!(stream.done);
}

#[test]
fn a_server_dies_after_its_requests() {
    let server = start(Profile { die_after_requests: Some(2), ..fast() });
    let client = Client::new(&server);
    let addr = server.addr();
    for _ in 0..2 {
        assert_eq!(client.post("/v1/completions", &json!({"prompt": "hi"})).0, 200);
    }
    assert_eq!(client.get("/health").0, 200, "health checks do not count");
    let third = client.try_post("/v1/completions", &json!({"prompt": "hi"}));
    assert!(third.is_err(), "the third request got an answer: {third:?}");
    match server.wait() {
        Err(SimServerError::Died { requests: 2 }) => {}
        other => panic!("expected the server to die after 2 requests, got {other:?}"),
    }
    assert!(std::net::TcpStream::connect(addr).is_err(), "still listening after dying");
}

#[test]
fn dying_breaks_streams_in_flight() {
    let server = start(Profile {
        die_after_requests: Some(1),
        time_per_output_token: Duration::from_millis(50),
        ..fast()
    });
    let client = Client::new(&server);
    let request = json!({"prompt": "hi", "max_tokens": 40, "stream": true, "ignore_eos": true});
    let streaming = thread::scope(|scope| {
        let streaming = scope.spawn(|| client.try_stream("/v1/completions", &request));
        thread::sleep(Duration::from_millis(300));
        assert!(client.try_post("/v1/completions", &json!({"prompt": "hi"})).is_err());
        streaming.join().expect("the streaming thread")
    });
    match streaming {
        Err(_) => {}
        Ok(stream) => {
            panic!("a stream of a dead server ended cleanly: {} events", stream.events.len())
        }
    }
    assert!(matches!(server.wait(), Err(SimServerError::Died { requests: 1 })));
}

#[test]
fn an_error_rate_of_one_answers_500() {
    let server = start(Profile { error_rate: Probability::ALWAYS, ..fast() });
    let client = Client::new(&server);
    assert_eq!(client.get("/health").0, 200);
    for path in ["/v1/completions", "/v1/chat/completions"] {
        let (status, body) = client.post(path, &json!({"prompt": "hi", "messages": []}));
        assert_eq!(status, 500, "{path}: {body}");
        let error: Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(error["error"]["type"], "server_error");
    }
}

#[test]
fn accuracy_decides_the_answers() {
    // (accuracy, how many of 40 questions are answered right)
    let questions: Vec<(String, String)> = (0..40)
        .map(|n| (format!("What is {n} + {n}?\nexpected: {}", 2 * n), (2 * n).to_string()))
        .collect();
    let right_answers = |accuracy: Probability, seed: u64| -> Vec<bool> {
        let server = start(Profile { accuracy, seed, ..fast() });
        let client = Client::new(&server);
        questions
            .iter()
            .map(|(question, right)| {
                let (status, body) = client.post("/v1/chat/completions", &chat(question, 8));
                assert_eq!(status, 200, "{body}");
                let answer: Value = serde_json::from_str(&body).expect("JSON");
                answer["choices"][0]["message"]["content"] == right.as_str()
            })
            .collect()
    };
    assert!(right_answers(Probability::ALWAYS, 0).iter().all(|right| *right));
    assert!(right_answers(Probability::NEVER, 0).iter().all(|right| !*right));

    let half = Probability::try_from(0.5).expect("in range");
    let first = right_answers(half, 11);
    assert_eq!(first, right_answers(half, 11), "the same seed answers the same");
    let right = first.iter().filter(|right| **right).count();
    assert!((8..=32).contains(&right), "{right} of 40 right at accuracy 0.5");
}

#[test]
fn monokernel_routing_is_logged_when_on() {
    for monokernel in [true, false] {
        let directory = tempfile::tempdir().expect("a temporary directory");
        let log_file = directory.path().join("server.log");
        let server = start(Profile {
            model: "qwen-sim".to_owned(),
            monokernel,
            log_file: Some(log_file.clone()),
            ..fast()
        });
        let client = Client::new(&server);
        assert_eq!(client.post("/v1/completions", &json!({"prompt": "hi"})).0, 200);
        server.stop().expect("a clean stop");

        let log = std::fs::read_to_string(&log_file).expect("the log");
        let routing: Vec<&str> = log.lines().filter(|line| line.contains("[monokernel]")).collect();
        assert!(log.contains("[sim-server] ready"), "{log}");
        if monokernel {
            assert_eq!(
                routing, ["[monokernel] routed qwen-sim decode batch=1"; 2],
                "one line at startup, one for the request:\n{log}"
            );
        } else {
            assert_eq!(routing, Vec::<&str>::new(), "{log}");
        }
    }
}

#[test]
fn concurrent_requests_each_keep_their_own_clock() {
    let per_token = Duration::from_millis(50);
    let server = start(Profile { time_per_output_token: per_token, ..fast() });
    let client = Client::new(&server);
    let requests = 8;
    let started = Instant::now();
    let streams: Vec<Stream> = thread::scope(|scope| {
        let handles: Vec<_> = (0..requests)
            .map(|_| {
                scope.spawn(|| {
                    let request =
                        json!({"prompt": "hi", "max_tokens": 10, "stream": true, "ignore_eos": true});
                    client.stream("/v1/completions", &request)
                })
            })
            .collect();
        handles.into_iter().map(|handle| handle.join().expect("a client thread")).collect()
    });
    let elapsed = started.elapsed();
    assert!(streams.iter().all(|stream| stream.done && stream.events.len() == 10));
    // One request takes at least 9 x 50 ms; eight served one after another would take 3.6 s.
    assert!(elapsed >= per_token * 9, "{elapsed:?}");
    assert!(elapsed < per_token * 9 * 4, "requests were not served at once: {elapsed:?}");
}

#[test]
fn max_concurrency_queues_requests() {
    let first_token = Duration::from_millis(150);
    let server = start(Profile {
        time_to_first_token: first_token,
        max_concurrency: NonZeroUsize::new(1),
        ..fast()
    });
    let client = Client::new(&server);
    let started = Instant::now();
    thread::scope(|scope| {
        for _ in 0..3 {
            scope.spawn(|| {
                let (status, body) =
                    client.post("/v1/completions", &json!({"prompt": "hi", "max_tokens": 1}));
                assert_eq!(status, 200, "{body}");
            });
        }
    });
    assert!(started.elapsed() >= first_token * 3, "{:?}", started.elapsed());
}

#[test]
fn stopping_closes_the_socket() {
    let server = start(fast());
    let addr = server.addr();
    assert_ne!(addr.port(), 0);
    assert_eq!(server.url(), format!("http://127.0.0.1:{}", addr.port()));
    assert_eq!(Client::new(&server).get("/health").0, 200);
    let stopper = server.stopper();
    stopper.stop();
    server.wait().expect("a clean stop");
    assert!(std::net::TcpStream::connect(addr).is_err(), "still listening after stopping");
}

/// How many idle connections the server must hold open while it still answers.
const IDLE_CONNECTIONS: usize = 1_500;

#[test]
fn idle_connections_take_no_thread_each_and_the_server_still_answers() {
    let server = start(fast());
    let idle: Vec<std::net::TcpStream> = (0..IDLE_CONNECTIONS)
        .map(|_| std::net::TcpStream::connect(server.addr()).expect("an idle connection"))
        .collect();
    // The listen queue is first come, first served: this connection is accepted after them.
    assert_eq!(Client::new(&server).get("/health").0, 200, "answered past the idle ones");
    // Every idle connection is still open: a thread per connection would be 1,500 threads
    // here; the server has one (the test harness has a few more).
    let status = std::fs::read_to_string("/proc/self/status").expect("the process's status");
    let threads: usize = status
        .lines()
        .find_map(|line| line.strip_prefix("Threads:"))
        .and_then(|count| count.trim().parse().ok())
        .expect("a thread count");
    assert!(threads < IDLE_CONNECTIONS / 10, "{threads} threads for {} connections", idle.len());
    for mut connection in idle {
        use std::io::Read as _;
        connection.set_nonblocking(true).expect("a non-blocking socket");
        let mut byte = [0u8; 1];
        let read = connection.read(&mut byte);
        assert!(
            matches!(&read, Err(error) if error.kind() == std::io::ErrorKind::WouldBlock),
            "an idle connection was closed or answered: {read:?}"
        );
    }
}

#[test]
fn binding_a_busy_port_names_it() {
    let server = start(fast());
    let error = serve(fast(), server.addr()).expect_err("the port is taken");
    assert_eq!(error.to_string(), format!("error listening on {}", server.addr()));
}

// ---------------------------------------------------------------------------------------------
// Helpers.

/// A profile fast enough for tests.
fn fast() -> Profile {
    Profile {
        time_to_first_token: Duration::from_millis(1),
        time_per_output_token: Duration::from_millis(1),
        ..Profile::default()
    }
}

fn start(profile: Profile) -> RunningServer {
    let localhost: SocketAddr = "127.0.0.1:0".parse().expect("an address");
    serve(profile, localhost).expect("the server starts")
}

fn chat(content: &str, max_tokens: usize) -> Value {
    json!({"messages": [{"role": "user", "content": content}], "max_tokens": max_tokens})
}

fn has_choices(event: &Value) -> bool {
    event["choices"].as_array().is_some_and(|choices| !choices.is_empty())
}

fn token_text(event: &Value) -> String {
    let choice = &event["choices"][0];
    choice["text"]
        .as_str()
        .or_else(|| choice["delta"]["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// A stream's events, each with when it arrived (since the request was sent), and whether it
/// ended with `data: [DONE]`.
#[derive(Debug)]
struct Stream {
    /// When the request was sent: each event's time is since then.
    sent: Instant,
    events: Vec<(Duration, Value)>,
    done: bool,
}

struct Client {
    agent: ureq::Agent,
    url: String,
}

impl Client {
    fn new(server: &RunningServer) -> Client {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .new_agent();
        Client { agent, url: server.url() }
    }

    fn get(&self, path: &str) -> (u16, String) {
        let mut response =
            self.agent.get(format!("{}{path}", self.url)).call().expect("a response");
        let body = response.body_mut().read_to_string().expect("a body");
        (response.status().as_u16(), body)
    }

    fn post(&self, path: &str, body: &Value) -> (u16, String) {
        self.try_post(path, body).expect("a response")
    }

    fn try_post(&self, path: &str, body: &Value) -> Result<(u16, String), ureq::Error> {
        let mut response = self
            .agent
            .post(format!("{}{path}", self.url))
            .header("Content-Type", "application/json")
            .send(body.to_string())?;
        let body = response.body_mut().read_to_string()?;
        Ok((response.status().as_u16(), body))
    }

    fn stream(&self, path: &str, body: &Value) -> Stream {
        self.try_stream(path, body).expect("a whole stream")
    }

    fn try_stream(
        &self,
        path: &str,
        body: &Value,
    ) -> Result<Stream, Box<dyn std::error::Error + Send + Sync>> {
        let sent = Instant::now();
        let response = self
            .agent
            .post(format!("{}{path}", self.url))
            .header("Content-Type", "application/json")
            .send(body.to_string())?;
        assert_eq!(response.status().as_u16(), 200);
        let reader = BufReader::new(response.into_body().into_reader());
        let mut stream = Stream { sent, events: Vec::new(), done: false };
        for line in reader.lines() {
            let line = line?;
            let Some(data) = line.strip_prefix("data: ") else {
                assert_eq!(line, "", "only data lines and the blank lines between events");
                continue;
            };
            assert!(!stream.done, "an event after [DONE]");
            if data == "[DONE]" {
                stream.done = true;
            } else {
                stream.events.push((sent.elapsed(), serde_json::from_str(data)?));
            }
        }
        Ok(stream)
    }

    /// Polls `path` until it answers 200; returns when, since `started`.
    fn wait_for_health(&self, path: &str, started: Instant, timeout: Duration) -> Duration {
        loop {
            if self.get(path).0 == 200 {
                return started.elapsed();
            }
            assert!(started.elapsed() < timeout, "{path} never became healthy");
            thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn generate_requests_read_sglangs_native_fields() {
    let request = generate::parse_request(
        Endpoint::Generate,
        r#"{"text": "one two three", "sampling_params": {"temperature": 0.0,
            "max_new_tokens": 5, "ignore_eos": true}, "stream": true, "return_logprob": false,
            "logprob_start_len": -1}"#,
    )
    .expect("valid");
    assert_eq!(
        (request.prompt_tokens, request.max_tokens, request.ignore_eos, request.stream),
        (3, 5, true, true)
    );
    let defaults =
        generate::parse_request(Endpoint::Generate, r#"{"input_ids": [7, 8]}"#).expect("token ids");
    assert_eq!(
        (defaults.prompt_tokens, defaults.max_tokens, defaults.stream),
        (2, generate::DEFAULT_MAX_NEW_TOKENS, false)
    );
    let errors = [
        (r#"{"text": ["a", "b"]}"#, "one prompt per request"),
        (r#"{"text": "a", "sampling_params": {"max_new_tokens": 0}}"#, "max_new_tokens must be"),
        (r#"{"text": "a", "sampling_params": 3}"#, "sampling_params must be"),
        (r#"{"text": "a", "sampling_params": {"ignore_eos": 1}}"#, "ignore_eos must be"),
    ];
    for (body, expected) in errors {
        let error = generate::parse_request(Endpoint::Generate, body).expect_err(body).to_string();
        assert!(error.contains(expected), "{body}: {error}");
    }
}

/// What sglang's `bench_serving --backend sglang` reads of a stream: each event's `text` is the
/// whole text so far and `meta_info.completion_tokens` the tokens so far; the last one has
/// the finish reason; then `[DONE]`.
#[test]
fn generate_streams_the_whole_text_so_far_with_meta_info() {
    let server = start(fast());
    let client = Client::new(&server);
    let request = json!({"text": "a b c d", "sampling_params": {"max_new_tokens": 4,
        "ignore_eos": true}, "stream": true});
    let stream = client.stream("/generate", &request);
    assert!(stream.done, "the stream ends with [DONE]");
    let got: Vec<(String, u64, Value)> = stream
        .events
        .iter()
        .map(|(_, event)| {
            (
                event["text"].as_str().expect("text").to_owned(),
                event["meta_info"]["completion_tokens"].as_u64().expect("tokens"),
                event["meta_info"]["finish_reason"].clone(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("sim".to_owned(), 1, Value::Null),
            ("sim sim".to_owned(), 2, Value::Null),
            ("sim sim sim".to_owned(), 3, Value::Null),
            ("sim sim sim sim".to_owned(), 4, json!({"type": "length", "length": 4})),
        ]
    );
    for (_, event) in &stream.events {
        assert_eq!(event["meta_info"]["prompt_tokens"], 4);
        assert_eq!(event["index"], 0);
    }

    let (status, body) = client.post(
        "/generate",
        &json!({"text": "What is 2+2?\nexpected: 4", "sampling_params": {"max_new_tokens": 8}}),
    );
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(answer["text"], "4");
    assert_eq!(answer["meta_info"]["completion_tokens"], 1);
    assert_eq!(answer["meta_info"]["finish_reason"], json!({"type": "stop", "matched": null}));
    assert_eq!(client.get("/generate").0, 405);
}

mod disaggregation;
mod vram;

#[test]
fn memory_is_released_and_taken_back_with_either_engines_api() {
    let server = start(fast());
    let client = Client::new(&server);
    let generate = || client.post("/v1/completions", &json!({"prompt": "hi", "max_tokens": 2}));
    assert_eq!(generate().0, 200);
    // SGLang: a JSON body with optional tags; 200 with null.
    let (status, body) = client.post("/release_memory_occupation", &json!({"tags": ["weights"]}));
    assert_eq!((status, body.as_str()), (200, "null"));
    let (status, body) = generate();
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("released"), "{body}");
    assert_eq!(client.get("/health").0, 200, "a released server stays healthy");
    assert_eq!(client.post("/release_memory_occupation", &json!({"tags": 3})).0, 400);
    assert_eq!(client.post("/resume_memory_occupation", &json!({})).0, 200);
    assert_eq!(generate().0, 200);
    // vLLM: /sleep?level=1, /is_sleeping, /wake_up.
    assert_eq!(client.get("/is_sleeping"), (200, r#"{"is_sleeping":false}"#.to_owned()));
    assert_eq!(client.post("/sleep?level=1", &json!({})).0, 200);
    assert_eq!(client.get("/is_sleeping"), (200, r#"{"is_sleeping":true}"#.to_owned()));
    assert_eq!(generate().0, 503);
    assert_eq!(client.post("/sleep?level=3", &json!({})).0, 400);
    assert_eq!(client.post("/wake_up", &json!({})).0, 200);
    assert_eq!(client.get("/is_sleeping"), (200, r#"{"is_sleeping":false}"#.to_owned()));
    assert_eq!(generate().0, 200);

    // A server that speaks neither: the endpoints are unknown.
    let server = start(Profile { memory_api: MemoryApi::None, ..fast() });
    let client = Client::new(&server);
    assert_eq!(client.post("/release_memory_occupation", &json!({})).0, 404);
    assert_eq!(client.post("/sleep?level=1", &json!({})).0, 404);
    // One engine's only.
    let server = start(Profile { memory_api: MemoryApi::Sglang, ..fast() });
    let client = Client::new(&server);
    assert_eq!(client.get("/is_sleeping").0, 404);
    assert_eq!(client.post("/release_memory_occupation", &json!({})).0, 200);
}
