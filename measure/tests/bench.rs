//! Tests of `prgate_measure::bench`: the built-in client against a real streaming HTTP server of
//! the test's own (HTTP/1.1 on a std socket on 127.0.0.1 with TCP_NODELAY, known per-token
//! delay), and the parsers on samples written with the real field names of sglang
//! `bench_serving` and InferenceX.
//!
//! The timing assertions compare the client's measurement with the test server's own record of
//! when it wrote each token (`Counters::streams`), never with the delay it was told to sleep: on
//! two loaded cores a sleep of 40 ms can take 56, and then the truth is 56. What is left between
//! the two clocks is the delivery of a chunk over loopback, inside a generous window (10%); a
//! measurement that misses is taken again, up to three times (`with_retries`), since a
//! descheduled client can still stretch one read, but a wrong computation misses every time.
//! The client's absolute accuracy (2%) belongs to a benchmark (bench/client.sh). Each timing
//! test prints what it measured.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use prgate_measure::bench::{
    self, BenchConfig, BenchError, BenchResult, Endpoint, SpeedRecord, parse_bench_serving_jsonl,
    parse_inferencex_json,
};
use serde_json::Value;

/// How the test server answers.
#[derive(Debug, Clone)]
struct Behaviour {
    /// Content chunks per streamed response.
    tokens: usize,
    /// The pause before the first chunk.
    first_delay: Duration,
    /// The pause between two chunks.
    delay: Duration,
    /// The pause between two chunks for the first `slow_requests` requests.
    slow_delay: Duration,
    slow_requests: usize,
    /// Request numbers (from 0) divisible by this are answered with HTTP 500.
    fail_every: Option<usize>,
    /// Whether a final chunk carries `usage`.
    usage: bool,
}

impl Default for Behaviour {
    fn default() -> Self {
        Behaviour {
            tokens: 11,
            first_delay: Duration::from_millis(5),
            delay: Duration::from_millis(40),
            slow_delay: Duration::from_millis(40),
            slow_requests: 0,
            fail_every: None,
            usage: true,
        }
    }
}

#[derive(Debug, Default)]
struct Counters {
    requests: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    bodies: Mutex<Vec<(String, Value)>>,
    /// Every streamed answer, by request number: what the server itself did.
    streams: Mutex<Vec<(usize, Stream)>>,
}

/// When the server received a request and when it wrote each of its token chunks.
#[derive(Debug, Clone)]
struct Stream {
    received: Instant,
    tokens: Vec<Instant>,
}

impl Stream {
    /// The time per output token after the first, in milliseconds.
    fn tpot_ms(&self) -> f64 {
        let (Some(first), Some(last)) = (self.tokens.first(), self.tokens.last()) else {
            return f64::NAN;
        };
        let gaps = self.tokens.len().saturating_sub(1).max(1) as f64;
        last.duration_since(*first).as_secs_f64() * 1000.0 / gaps
    }

    /// The gaps between two token chunks, in milliseconds.
    fn gaps_ms(&self) -> impl Iterator<Item = f64> + '_ {
        self.tokens.windows(2).map(|pair| pair[1].duration_since(pair[0]).as_secs_f64() * 1000.0)
    }

    /// From the request's arrival to its second token, in milliseconds.
    fn second_token_ms(&self) -> f64 {
        self.tokens
            .get(1)
            .map_or(f64::NAN, |second| second.duration_since(self.received).as_secs_f64() * 1000.0)
    }
}

/// What the server's own clock says of the streams whose request number `counted` accepts.
#[derive(Debug)]
struct ServerTimes {
    median_tpot_ms: f64,
    mean_tpot_ms: f64,
    median_itl_ms: f64,
    max_itl_ms: f64,
    median_second_token_ms: f64,
}

impl Counters {
    fn server_times(&self, counted: impl Fn(usize) -> bool) -> ServerTimes {
        let streams: Vec<Stream> = self
            .streams
            .lock()
            .expect("streams")
            .iter()
            .filter(|(number, _)| counted(*number))
            .map(|(_, stream)| stream.clone())
            .collect();
        let tpots: Vec<f64> = streams.iter().map(Stream::tpot_ms).collect();
        let gaps: Vec<f64> = streams.iter().flat_map(Stream::gaps_ms).collect();
        let seconds: Vec<f64> = streams.iter().map(Stream::second_token_ms).collect();
        ServerTimes {
            median_tpot_ms: median(&tpots),
            mean_tpot_ms: tpots.iter().sum::<f64>() / tpots.len().max(1) as f64,
            median_itl_ms: median(&gaps),
            max_itl_ms: gaps.iter().copied().fold(f64::NAN, f64::max),
            median_second_token_ms: median(&seconds),
        }
    }
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

struct TestServer {
    url: String,
    /// Set when the server is dropped: its accept loop ends at its next connection.
    stopped: Arc<AtomicBool>,
    counters: Arc<Counters>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::SeqCst);
        // Wakes the accept loop so that it sees the flag.
        let _ = TcpStream::connect(self.url.trim_start_matches("http://"));
    }
}

fn start(behaviour: Behaviour) -> TestServer {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    let port = listener.local_addr().expect("an address").port();
    let counters = Arc::new(Counters::default());
    let stopped = Arc::new(AtomicBool::new(false));
    let (accepting_counters, accepting_stopped) = (Arc::clone(&counters), Arc::clone(&stopped));
    thread::spawn(move || {
        for stream in listener.incoming() {
            if accepting_stopped.load(Ordering::SeqCst) {
                return;
            }
            let Ok(stream) = stream else { continue };
            let (behaviour, counters) = (behaviour.clone(), Arc::clone(&accepting_counters));
            thread::spawn(move || answer(stream, &behaviour, &counters));
        }
    });
    TestServer { url: format!("http://127.0.0.1:{port}"), stopped, counters }
}

/// A request's path and body, read off `stream` (HTTP/1.1: the request line, headers up to a
/// blank line, then `Content-Length` bytes); `None` for anything else.
fn read_request(stream: &mut TcpStream) -> Option<(String, String)> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let path = line.split_whitespace().nth(1)?.to_owned();
    let mut length = 0;
    loop {
        line.clear();
        reader.read_line(&mut line).ok()?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((path, String::from_utf8_lossy(&body).into_owned()))
}

fn answer(mut writer: TcpStream, behaviour: &Behaviour, counters: &Counters) {
    // Each chunk goes out as it is written (no Nagle's algorithm waiting on the client's
    // delayed ACK): the test times the client against when the server wrote.
    let _ = writer.set_nodelay(true);
    let Some((path, body)) = read_request(&mut writer) else { return };
    let received = Instant::now();
    let number = counters.requests.fetch_add(1, Ordering::SeqCst);
    let json = serde_json::from_str(&body).unwrap_or(Value::Null);
    counters.bodies.lock().expect("bodies").push((path.clone(), json));
    if behaviour.fail_every.is_some_and(|every| number.is_multiple_of(every)) {
        let _ = writer.write_all(
            b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\nConnection: close\r\n\r\nboom",
        );
        let _ = writer.flush();
        return;
    }
    let now = counters.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    counters.max_in_flight.fetch_max(now, Ordering::SeqCst);
    let delay =
        if number < behaviour.slow_requests { behaviour.slow_delay } else { behaviour.delay };
    let chat = path.contains("chat");
    // The headers go out with the first chunk, as one write.
    let mut pending = String::from(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
    );
    let mut chunk = |writer: &mut TcpStream, data: &str| {
        let event = format!("data: {data}\n\n");
        pending.push_str(&format!("{:x}\r\n{event}\r\n", event.len()));
        let _ = writer.write_all(pending.as_bytes());
        let _ = writer.flush();
        pending.clear();
    };
    thread::sleep(behaviour.first_delay);
    let mut stream = Stream { received, tokens: Vec::new() };
    for i in 0..behaviour.tokens {
        if i > 0 {
            thread::sleep(delay);
        }
        if chat {
            chunk(&mut writer, r#"{"choices":[{"index":0,"delta":{"content":"tok"}}]}"#);
        } else {
            chunk(&mut writer, r#"{"choices":[{"index":0,"text":"tok"}]}"#);
        }
        stream.tokens.push(Instant::now());
    }
    counters.streams.lock().expect("streams").push((number, stream));
    if behaviour.usage {
        let usage = format!(
            r#"{{"choices":[],"usage":{{"prompt_tokens":9,"completion_tokens":{}}}}}"#,
            behaviour.tokens
        );
        chunk(&mut writer, &usage);
    }
    chunk(&mut writer, "[DONE]");
    counters.in_flight.fetch_sub(1, Ordering::SeqCst);
    let _ = write!(writer, "0\r\n\r\n");
    let _ = writer.flush();
}

fn config(url: &str) -> BenchConfig {
    BenchConfig {
        base_url: format!("{url}/"),
        model: "test-model".into(),
        endpoint: Endpoint::Completions,
        input_len: 8,
        output_len: 11,
        concurrency: 2,
        requests: 6,
        warmup: 0,
        timeout: Duration::from_secs(30),
        prompt_seed: 7,
    }
}

fn run(config: &BenchConfig) -> BenchResult {
    match bench::run(config) {
        Ok(result) => result,
        Err(error) => panic!("the benchmark failed: {error}"),
    }
}

/// Whether a measured time is within `tolerance` of the expected one: the message says by how much
/// it is not.
fn within(name: &str, measured: Option<f64>, expected: f64, tolerance: f64) -> Result<(), String> {
    let measured = measured.unwrap_or(f64::NAN);
    eprintln!("{name}: measured {measured:.3} ms, expected {expected:.3} ms");
    if (measured - expected).abs() <= expected * tolerance {
        Ok(())
    } else {
        Err(format!("{name}: {measured} ms is not within {}% of {expected} ms", tolerance * 100.0))
    }
}

/// How often a timing measurement is taken before its miss is a failure.
const TIMING_ATTEMPTS: usize = 3;

/// Runs `measure` (a fresh server and run each time) until its timing checks hold, at most
/// `TIMING_ATTEMPTS` times; fails with every attempt's miss. Assertions that are not about time
/// panic inside `measure` on the first attempt.
fn with_retries(mut measure: impl FnMut() -> Result<(), String>) {
    let mut misses = Vec::new();
    for attempt in 1..=TIMING_ATTEMPTS {
        match measure() {
            Ok(()) => return,
            Err(miss) => {
                eprintln!("attempt {attempt} missed: {miss}");
                misses.push(miss);
            }
        }
    }
    panic!("every attempt missed its timing: {misses:?}");
}

#[test]
fn tpot_and_itl_match_the_known_per_token_delay() {
    for (endpoint, usage) in
        [(Endpoint::Completions, true), (Endpoint::Completions, false), (Endpoint::Chat, true)]
    {
        with_retries(|| {
            let server = start(Behaviour { usage, ..Behaviour::default() });
            let result = run(&BenchConfig { endpoint, ..config(&server.url) });
            eprintln!("{endpoint:?}, usage {usage}:");
            assert_eq!((result.completed, result.failed), (6, 0), "{:?}", result.errors);
            assert_eq!(result.total_output_tokens, 66);
            let expected_input = if usage { 6 * 9 } else { 6 * 8 };
            assert_eq!(result.total_input_tokens, expected_input);
            let truth = server.counters.server_times(|_| true);
            within("median TPOT", result.median_tpot_ms, truth.median_tpot_ms, 0.10)?;
            within("mean TPOT", result.mean_tpot_ms, truth.mean_tpot_ms, 0.10)?;
            within("median ITL", result.median_itl_ms, truth.median_itl_ms, 0.10)?;
            // The time to the first token ends at the first token, before the second was
            // written.
            match result.median_ttft_ms {
                Some(ttft) if ttft < truth.median_second_token_ms => Ok(()),
                other => Err(format!(
                    "median TTFT {other:?} is not below the second token's {} ms",
                    truth.median_second_token_ms
                )),
            }
        });
    }
}

/// A server cannot know a run's measured prompts before they come: a run of another seed (the
/// runner draws a fresh one for each) sends others (none of an earlier run's), and the same
/// seed the same ones again.
#[test]
fn each_run_sends_prompts_of_its_own_seed() {
    let server = start(Behaviour { tokens: 2, delay: Duration::ZERO, ..Behaviour::default() });
    let prompts = |seed: u64| {
        server.counters.bodies.lock().expect("bodies").clear();
        let result = run(&BenchConfig { requests: 4, prompt_seed: seed, ..config(&server.url) });
        assert_eq!(result.prompt_seed, seed);
        let bodies = server.counters.bodies.lock().expect("bodies").clone();
        let mut prompts: Vec<String> =
            bodies.iter().map(|(_, body)| body["prompt"].as_str().unwrap_or("").into()).collect();
        prompts.sort();
        prompts
    };
    let (first, second) = (0x5eed_0000_0001, 0x7eed_0000_0001);
    let (a, b) = (prompts(first), prompts(second));
    assert_eq!(a.len(), 4);
    assert!(a.iter().all(|prompt| !b.contains(prompt)), "{a:?}\n{b:?}");
    assert_eq!(prompts(first), a, "the same seed sends the same prompts");
}

#[test]
fn requests_are_fixed_length_streamed_and_ignore_eos() {
    let server = start(Behaviour { tokens: 2, delay: Duration::ZERO, ..Behaviour::default() });
    for endpoint in [Endpoint::Completions, Endpoint::Chat] {
        let config = BenchConfig { endpoint, requests: 1, input_len: 32, ..config(&server.url) };
        let _ = run(&config);
    }
    let bodies = server.counters.bodies.lock().expect("bodies").clone();
    let [(completions_path, completions), (chat_path, chat)] = &bodies[..] else {
        panic!("expected two requests, got {bodies:?}");
    };
    assert_eq!(completions_path, "/v1/completions");
    assert_eq!(chat_path, "/v1/chat/completions");
    for body in [completions, chat] {
        assert_eq!(body["model"], "test-model");
        assert_eq!(body["max_tokens"], 11);
        assert_eq!(body["ignore_eos"], true);
        assert_eq!(body["stream"], true);
    }
    let words = |text: &Value| text.as_str().map(|t| t.split(' ').count());
    assert_eq!(words(&completions["prompt"]), Some(32));
    assert_eq!(words(&chat["messages"][0]["content"]), Some(32));
    assert_eq!(chat["messages"][0]["role"], "user");
}

#[test]
fn concurrency_is_respected_and_kept_full() {
    let behaviour =
        Behaviour { tokens: 4, delay: Duration::from_millis(20), ..Behaviour::default() };
    let server = start(behaviour);
    let result =
        run(&BenchConfig { concurrency: 4, requests: 12, output_len: 4, ..config(&server.url) });
    assert_eq!(result.completed, 12);
    assert_eq!(server.counters.max_in_flight.load(Ordering::SeqCst), 4);
    eprintln!("measured concurrency {:.2} for 4 configured", result.concurrency);
    assert_eq!(result.max_concurrency, 4);
    assert!(result.concurrency > 2.0 && result.concurrency <= 4.0 + 1e-9, "{}", result.concurrency);
}

#[test]
fn warmup_requests_are_sent_first_and_not_counted() {
    // The three warm-up requests are slow; the measured ones are not.
    with_retries(|| {
        let server = start(Behaviour {
            slow_requests: 3,
            slow_delay: Duration::from_millis(120),
            ..Behaviour::default()
        });
        let result =
            run(&BenchConfig { concurrency: 1, warmup: 3, requests: 4, ..config(&server.url) });
        assert_eq!(server.counters.requests.load(Ordering::SeqCst), 7);
        assert_eq!((result.completed, result.failed, result.num_prompts), (4, 0, 4));
        assert_eq!(result.warmup_requests, 3);
        assert_eq!(result.total_output_tokens, 44);
        // The measured requests are the server's requests 3 to 6; the slow ones are not in it.
        let measured = server.counters.server_times(|number| number >= 3);
        let warmup = server.counters.server_times(|number| number < 3);
        eprintln!("the server's warm-up TPOT: {:.3} ms", warmup.median_tpot_ms);
        within("median TPOT after warm-up", result.median_tpot_ms, measured.median_tpot_ms, 0.10)?;
        within("max ITL after warm-up", result.max_itl_ms, measured.max_itl_ms, 0.25)
    });
}

#[test]
fn failed_requests_are_counted_not_averaged() {
    with_retries(|| {
        let server = start(Behaviour { fail_every: Some(3), ..Behaviour::default() });
        let result = run(&BenchConfig { requests: 9, ..config(&server.url) });
        assert_eq!((result.completed, result.failed), (6, 3));
        assert_eq!(result.total_output_tokens, 66);
        let expected = format!("{}/v1/completions: http status 500: boom", server.url);
        assert_eq!(result.errors, [expected]);
        let truth = server.counters.server_times(|_| true);
        within("median TPOT with failures", result.median_tpot_ms, truth.median_tpot_ms, 0.10)
    });
}

#[test]
fn a_server_that_fails_every_warmup_request_stops_the_run() {
    let server = start(Behaviour { fail_every: Some(1), ..Behaviour::default() });
    let error = bench::run(&BenchConfig { warmup: 2, ..config(&server.url) });
    let message = error.as_ref().map_err(ToString::to_string).err().unwrap_or_default();
    assert!(matches!(error, Err(BenchError::WarmupFailed { .. })), "{message}");
    let url = format!("{}/v1/completions", server.url);
    assert_eq!(
        message,
        format!("every warm-up request to {url} failed; the first: {url}: http status 500: boom")
    );
    assert_eq!(server.counters.requests.load(Ordering::SeqCst), 2);
}

#[test]
fn an_unreachable_server_fails_every_request_with_its_url() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    drop(listener);
    let result = run(&config(&format!("http://127.0.0.1:{port}")));
    assert_eq!((result.completed, result.failed), (0, 6));
    assert_eq!(result.median_tpot_ms, None);
    assert_eq!(result.errors.len(), 1);
    assert!(result.errors[0].starts_with(&format!("http://127.0.0.1:{port}/v1/completions: ")));
}

#[test]
fn a_run_without_concurrency_is_refused() {
    let error = bench::run(&BenchConfig { concurrency: 0, ..config("http://127.0.0.1:1") });
    assert!(matches!(error, Err(BenchError::InvalidConfig { .. })));
}

#[test]
fn the_result_is_bench_serving_json_and_parses_back() {
    let server =
        start(Behaviour { tokens: 3, delay: Duration::from_millis(5), ..Behaviour::default() });
    let result = run(&BenchConfig { requests: 2, output_len: 3, ..config(&server.url) });
    let json = serde_json::to_string(&result).expect("serialize");
    let value: Value = serde_json::from_str(&json).expect("JSON");
    for field in [
        "max_concurrency",
        "completed",
        "failed",
        "duration",
        "request_throughput",
        "output_throughput",
        "median_ttft_ms",
        "median_tpot_ms",
        "mean_tpot_ms",
        "p99_tpot_ms",
        "median_itl_ms",
        "median_e2e_latency_ms",
        "concurrency",
    ] {
        assert!(value.get(field).is_some(), "no field {field} in {json}");
    }
    assert_eq!(value["endpoint"], "completions");
    let records = parse_bench_serving_jsonl(&json).expect("our JSON is bench_serving JSONL");
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].concurrency, 2);
    assert_eq!(Some(records[0].median_tpot_ms), result.median_tpot_ms);
    assert_eq!((records[0].input_len, records[0].output_len), (Some(8), Some(3)));
}

// The parsers.

/// A line as sglang `bench_serving` appends it (`request_rate` is Python's `inf`).
const SGLANG_LINE: &str = r#"{"backend": "sglang-oai", "dataset_name": "random", "request_rate": Infinity, "max_concurrency": 64, "sharegpt_output_len": null, "random_input_len": 1024, "random_output_len": 1024, "random_range_ratio": 1.0, "duration": 151.2, "completed": 640, "total_input_tokens": 655360, "total_output_tokens": 655360, "total_output_tokens_retokenized": 654998, "request_throughput": 4.23, "input_throughput": 4334.2, "output_throughput": 4334.2, "mean_e2e_latency_ms": 15110.4, "median_e2e_latency_ms": 15102.9, "std_e2e_latency_ms": 88.1, "p99_e2e_latency_ms": 15390.7, "mean_ttft_ms": 412.5, "median_ttft_ms": 380.1, "std_ttft_ms": 120.4, "p99_ttft_ms": 905.3, "mean_tpot_ms": 14.37, "median_tpot_ms": 14.35, "std_tpot_ms": 0.21, "p99_tpot_ms": 14.9, "mean_itl_ms": 14.37, "median_itl_ms": 13.9, "std_itl_ms": 6.2, "p95_itl_ms": 15.1, "p99_itl_ms": 40.2, "concurrency": 63.9, "accept_length": null}"#;

fn sglang_record() -> SpeedRecord {
    SpeedRecord {
        concurrency: 64,
        median_tpot_ms: 14.35,
        mean_tpot_ms: Some(14.37),
        p99_tpot_ms: Some(14.9),
        median_ttft_ms: Some(380.1),
        mean_ttft_ms: Some(412.5),
        p99_ttft_ms: Some(905.3),
        median_itl_ms: Some(13.9),
        mean_itl_ms: Some(14.37),
        median_e2e_latency_ms: Some(15102.9),
        request_throughput: Some(4.23),
        output_throughput: Some(4334.2),
        completed: Some(640),
        input_len: Some(1024),
        output_len: Some(1024),
        total_input_tokens: Some(655_360),
        total_output_tokens: Some(655_360),
    }
}

fn check(
    parse: fn(&str) -> Result<Vec<SpeedRecord>, bench::ParseError>,
    input: &str,
    expect: Result<Vec<SpeedRecord>, &str>,
) {
    match (parse(input), expect) {
        (Ok(got), Ok(expect)) => assert_eq!(got, expect, "{input}"),
        (Err(got), Err(expect)) => assert_eq!(got.to_string(), expect, "{input}"),
        (got, expect) => panic!("{input}\ngot {got:?}\nexpected {expect:?}"),
    }
}

#[test]
fn bench_serving_jsonl_is_read_by_its_field_names() {
    let parse = parse_bench_serving_jsonl;
    check(parse, SGLANG_LINE, Ok(vec![sglang_record()]));
    // Appended runs, a blank line between, and a run at another concurrency.
    let second = SGLANG_LINE.replace(r#""max_concurrency": 64"#, r#""max_concurrency": 8"#);
    let two = format!("{SGLANG_LINE}\n\n{second}\n");
    let at_8 = SpeedRecord { concurrency: 8, ..sglang_record() };
    check(parse, &two, Ok(vec![sglang_record(), at_8]));
    // The older `input_len`/`output_len` names; a minimal line.
    check(
        parse,
        r#"{"max_concurrency": 4, "input_len": 128, "output_len": 32, "median_tpot_ms": 9.5, "median_itl_ms": NaN}"#,
        Ok(vec![SpeedRecord {
            concurrency: 4,
            median_tpot_ms: 9.5,
            mean_tpot_ms: None,
            p99_tpot_ms: None,
            median_ttft_ms: None,
            mean_ttft_ms: None,
            p99_ttft_ms: None,
            median_itl_ms: None,
            mean_itl_ms: None,
            median_e2e_latency_ms: None,
            request_throughput: None,
            output_throughput: None,
            completed: None,
            input_len: Some(128),
            output_len: Some(32),
            total_input_tokens: None,
            total_output_tokens: None,
        }]),
    );
}

#[test]
fn bench_serving_errors_name_the_line_and_the_field() {
    let parse = parse_bench_serving_jsonl;
    let no_concurrency =
        SGLANG_LINE.replace(r#""max_concurrency": 64"#, r#""max_concurrency": null"#);
    check(
        parse,
        &format!("{SGLANG_LINE}\n{no_concurrency}"),
        Err(
            "line 2: missing field 'max_concurrency'\nhint: run the benchmark with --max-concurrency",
        ),
    );
    let text_tpot =
        SGLANG_LINE.replace(r#""median_tpot_ms": 14.35"#, r#""median_tpot_ms": "fast""#);
    check(
        parse,
        &text_tpot,
        Err(r#"line 1: field 'median_tpot_ms' must be a number, found "fast""#),
    );
    let no_tpot = SGLANG_LINE.replace(r#""median_tpot_ms": 14.35, "#, "");
    check(parse, &no_tpot, Err("line 1: missing field 'median_tpot_ms'"));
    let all_failed = SGLANG_LINE.replace(r#""completed": 640"#, r#""completed": 0"#);
    check(
        parse,
        &all_failed,
        Err("line 1: field 'completed' is 0: every request of this run failed"),
    );
    check(
        parse,
        r#"{"max_concurrency": 0.5, "median_tpot_ms": 1}"#,
        Err("line 1: field 'max_concurrency' must be a positive integer, found 0.5"),
    );
    check(parse, "[1, 2]", Err("line 1: expected a JSON object, found an array"));
    check(parse, "\n  \n", Err("no speed record in the input"));
    let error = parse("{\"max_concurrency\": 4,").map_err(|e| e.to_string());
    assert!(error.as_ref().is_err_and(|e| e.starts_with("line 1: invalid JSON: ")), "{error:?}");
}

/// The result JSON of InferenceX's `utils/bench_serving/benchmark_serving.py --save-result`.
const INFERENCEX_RAW: &str = r#"{"date": "20250914-031522", "backend": "openai", "model_id": "deepseek-ai/DeepSeek-R1-0528", "tokenizer_id": "deepseek-ai/DeepSeek-R1-0528", "best_of": 1, "num_prompts": 640, "request_rate": "inf", "burstiness": 1.0, "max_concurrency": 64, "duration": 420.7, "completed": 640, "total_input_tokens": 589312, "total_output_tokens": 590021, "request_throughput": 1.52, "request_goodput:": null, "output_throughput": 1402.5, "total_token_throughput": 2803.3, "mean_ttft_ms": 1210.4, "median_ttft_ms": 1105.2, "std_ttft_ms": 402.1, "p90_ttft_ms": 1750.3, "p99_ttft_ms": 2410.9, "p99.9_ttft_ms": 2600.1, "mean_tpot_ms": 43.1, "median_tpot_ms": 42.8, "std_tpot_ms": 1.9, "p90_tpot_ms": 45.0, "p99_tpot_ms": 48.2, "p99.9_tpot_ms": 49.0, "mean_itl_ms": 43.0, "median_itl_ms": 40.1, "std_itl_ms": 12.3, "p90_itl_ms": 52.0, "p99_itl_ms": 95.4, "p99.9_itl_ms": 180.2, "mean_e2el_ms": 40210.5, "median_e2el_ms": 40102.0, "std_e2el_ms": 900.2, "p90_e2el_ms": 41300.0, "p99_e2el_ms": 42800.7, "p99.9_e2el_ms": 43000.0}"#;

/// One `agg_*.json` of InferenceX's `utils/process_result.py` (times in seconds).
const INFERENCEX_AGG: &str = r#"{"hw": "mi355x", "conc": 64, "image": "rocm/sgl-dev:latest", "model": "deepseek-ai/DeepSeek-R1-0528", "infmax_model_prefix": "dsr1", "framework": "sglang", "precision": "fp8", "spec_decoding": "none", "disagg": false, "isl": 1024, "osl": 1024, "is_multinode": false, "tp": 8, "ep": 1, "dp_attention": "false", "tput_per_gpu": 350.4, "output_tput_per_gpu": 175.3, "input_tput_per_gpu": 175.1, "mean_ttft": 1.2104, "median_ttft": 1.1052, "std_ttft": 0.4021, "p99_ttft": 2.4109, "mean_tpot": 0.0431, "mean_intvty": 23.20, "median_tpot": 0.0428, "median_intvty": 23.36, "p99_tpot": 0.0482, "p99_intvty": 20.74, "mean_itl": 0.043, "median_itl": 0.0401, "mean_e2el": 40.2105, "median_e2el": 40.102}"#;

fn inferencex_raw_record() -> SpeedRecord {
    SpeedRecord {
        concurrency: 64,
        median_tpot_ms: 42.8,
        mean_tpot_ms: Some(43.1),
        p99_tpot_ms: Some(48.2),
        median_ttft_ms: Some(1105.2),
        mean_ttft_ms: Some(1210.4),
        p99_ttft_ms: Some(2410.9),
        median_itl_ms: Some(40.1),
        mean_itl_ms: Some(43.0),
        median_e2e_latency_ms: Some(40102.0),
        request_throughput: Some(1.52),
        output_throughput: Some(1402.5),
        completed: Some(640),
        input_len: None,
        output_len: None,
        total_input_tokens: Some(589_312),
        total_output_tokens: Some(590_021),
    }
}

#[test]
fn inferencex_results_are_read_in_all_three_shapes() {
    let parse = parse_inferencex_json;
    check(parse, INFERENCEX_RAW, Ok(vec![inferencex_raw_record()]));
    let agg = parse(INFERENCEX_AGG).expect("an agg_*.json");
    let [record] = &agg[..] else { panic!("one record expected, got {agg:?}") };
    assert_eq!(
        (record.concurrency, record.input_len, record.output_len),
        (64, Some(1024), Some(1024))
    );
    let near = |got: Option<f64>, expect: f64| got.is_some_and(|got| (got - expect).abs() < 1e-9);
    assert!(near(Some(record.median_tpot_ms), 42.8), "{record:?}");
    assert!(near(record.median_ttft_ms, 1105.2) && near(record.median_e2e_latency_ms, 40102.0));
    assert_eq!((record.request_throughput, record.completed), (None, None));
    // collect_results.py gathers agg objects into one array.
    let collected =
        format!("[{INFERENCEX_AGG}, {}]", INFERENCEX_AGG.replace(r#""conc": 64"#, r#""conc": 4"#));
    let records = parse(&collected).expect("a collected array");
    assert_eq!(records.iter().map(|r| r.concurrency).collect::<Vec<_>>(), [64, 4]);
}

#[test]
fn inferencex_errors_name_the_record_and_the_field() {
    let parse = parse_inferencex_json;
    let no_conc = INFERENCEX_AGG.replace(r#""conc": 64, "#, "");
    check(
        parse,
        &format!("[{INFERENCEX_AGG}, {no_conc}]"),
        Err(
            "record 2: not an InferenceX result: it has neither 'median_tpot_ms' (benchmark_serving.py), 'conc' and 'median_tpot' (process_result.py), nor 'max_concurrency' and 'median_tpot' (the token-position scripts)",
        ),
    );
    let bad_conc = INFERENCEX_AGG.replace(r#""conc": 64"#, r#""conc": "many""#);
    check(
        parse,
        &bad_conc,
        Err(r#"the result: field 'conc' must be a positive integer, found "many""#),
    );
    let no_max = INFERENCEX_RAW.replace(r#""max_concurrency": 64"#, r#""max_concurrency": null"#);
    check(
        parse,
        &no_max,
        Err(
            "the result: missing field 'max_concurrency'\nhint: run the benchmark with --max-concurrency",
        ),
    );
    check(parse, "[]", Err("no speed record in the input"));
}

/// A real sim-server that ignores `ignore_eos` (`eos-after-tokens`), as llama.cpp's does: its
/// answers stop early, so no request of the run is timed, and each error names the numbers.
#[test]
fn a_server_that_stops_early_gives_no_tpot_but_the_numbers() {
    use prgate_sim_server::{self as sim_server, Profile};
    let fast = Profile {
        time_to_first_token: Duration::from_millis(1),
        time_per_output_token: Duration::from_millis(1),
        ..Profile::default()
    };
    let config = |url: &str| BenchConfig {
        base_url: url.to_owned(),
        model: "sim-model".into(),
        endpoint: Endpoint::Completions,
        input_len: 8,
        output_len: 16,
        concurrency: 1,
        requests: 2,
        warmup: 0,
        timeout: Duration::from_secs(30),
        prompt_seed: 0,
    };
    let early = Profile { eos_after_tokens: Some(4), ..fast.clone() };
    let server =
        sim_server::serve(early, "127.0.0.1:0".parse().expect("an address")).expect("a server");
    let result = run(&config(&server.url()));
    assert_eq!((result.completed, result.failed), (0, 2), "{result:?}");
    assert_eq!(result.median_tpot_ms, None);
    let expected = "asked for 16 output tokens (max_tokens, ignore_eos) and received 4, beyond the tolerance of 1: a server that stops early is timed on another workload";
    assert!(result.errors.iter().all(|e| e.ends_with(expected)), "{:?}", result.errors);
    // Within the tolerance (2%, at least a token): 15 of 16 is measured.
    let one_short = Profile { eos_after_tokens: Some(15), ..fast.clone() };
    let server =
        sim_server::serve(one_short, "127.0.0.1:0".parse().expect("an address")).expect("a server");
    let result = run(&config(&server.url()));
    assert_eq!((result.completed, result.failed), (2, 0), "{result:?}");
    // An honest server gives all 16.
    let server =
        sim_server::serve(fast, "127.0.0.1:0".parse().expect("an address")).expect("a server");
    let result = run(&config(&server.url()));
    assert_eq!((result.completed, result.total_output_tokens), (2, 32), "{result:?}");
}

#[test]
fn an_external_run_of_another_workload_has_no_tpot() {
    use prgate_measure::bench::{check_workload, record_at};
    let record = sglang_record();
    assert_eq!(check_workload(&record, 1024, 1024), Ok(()));
    let cases = [
        // It was configured with other lengths than the run asked for.
        (
            record.clone(),
            1024,
            256,
            "the benchmark ran with output length 1024, the run asked for 256",
        ),
        // A server that stopped early: half the tokens asked for.
        (
            SpeedRecord { total_output_tokens: Some(204_800), output_len: None, ..record.clone() },
            1024,
            1024,
            "its 640 requests had 204800 output tokens, 320.0 a request, where the run asked for 1024 (at least 512 and at most 1045 a request)",
        ),
        (
            SpeedRecord { total_input_tokens: Some(64_000), input_len: None, ..record.clone() },
            1024,
            1024,
            "its 640 requests had 64000 prompt tokens, 100.0 a request, where the run asked for 1024 (at least 512 and at most 1191 a request)",
        ),
    ];
    for (record, input, output, detail) in cases {
        let error = check_workload(&record, input, output).expect_err(detail).to_string();
        assert!(
            error.starts_with(&format!(
                "at concurrency 64, {detail}: a run timed on another workload has no TPOT"
            )),
            "{error}"
        );
    }
    // Sampled lengths (bench_serving's --random-range-ratio 0.8: 0.9 of the asked on average)
    // are the run's; more than asked (beyond 2%, a token at least) is not.
    let sampled = SpeedRecord { total_output_tokens: Some(640 * 922), ..record.clone() };
    assert_eq!(check_workload(&sampled, 1024, 1024), Ok(()));
    let more = SpeedRecord { total_output_tokens: Some(640 * 1046), ..record.clone() };
    assert!(check_workload(&more, 1024, 1024).is_err());
    assert_eq!(check_workload(&inferencex_raw_record(), 1024, 1024), Ok(()));
    // The real files of bench_serving and InferenceX measured what they asked for.
    let real = std::fs::read_to_string("tests/fixtures/realworld/sglang-bench-serving/c1.jsonl")
        .expect("c1.jsonl");
    let records = parse_bench_serving_jsonl(&real).expect("records");
    let found = record_at(&records, 1, 16).expect("the c1 run");
    assert_eq!(check_workload(found, 256, 128), Ok(()));
    assert!(check_workload(found, 256, 64).is_err());
}
