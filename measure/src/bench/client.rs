//! The HTTP side of the built-in client: prompts, requests, reading the event stream, and the
//! worker threads that keep `concurrency` requests in flight.
//!
//! The per-request timing follows `bench_serving`'s `async_request_openai_completions` and
//! `async_request_openai_chat_completions`: TTFT at the first chunk with non-empty content, one
//! ITL gap per further such chunk, latency at the last non-empty line. The metrics are
//! computed by [`super::summarize`].

use std::io::{BufRead, BufReader, Read};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{BenchConfig, BenchError, BenchResult, Endpoint, RequestOutcome, RequestRecord};

/// The longest line of the event stream the client accepts.
const MAX_LINE_BYTES: u64 = 1 << 20;

/// Words most BPE tokenizers encode as one token each, with their leading space.
const WORDS: [&str; 64] = [
    "the", "time", "people", "year", "way", "day", "man", "thing", "woman", "life", "child",
    "world", "school", "state", "family", "student", "group", "country", "problem", "hand", "part",
    "place", "case", "week", "company", "system", "program", "question", "work", "number", "night",
    "point", "home", "water", "room", "mother", "area", "money", "story", "fact", "month", "lot",
    "right", "study", "book", "eye", "job", "word", "business", "issue", "side", "kind", "head",
    "house", "service", "friend", "father", "power", "hour", "game", "line", "end", "member",
    "law",
];

/// Runs the benchmark described by `config`: the warm-up requests, then the measured ones.
///
/// Failed requests are counted in the result, not returned as errors; the run itself fails
/// only when the configuration is invalid, when every warm-up request fails, or when a thread
/// cannot start.
pub fn run(config: &BenchConfig) -> Result<BenchResult, BenchError> {
    if config.concurrency == 0 {
        return Err(BenchError::InvalidConfig { reason: "concurrency must be at least 1".into() });
    }
    if config.output_len == 0 {
        return Err(BenchError::InvalidConfig { reason: "output_len must be at least 1".into() });
    }
    let url = format!("{}{}", config.base_url.trim_end_matches('/'), config.endpoint.path());
    // A fresh connection per request, as bench_serving's (a new aiohttp session each): on a
    // connection kept alive from the request before, a router's first chunks wait for the
    // client's delayed acknowledgement and arrive in a burst (measured through sglang-router
    // 0.3.2: TTFT 47 ms against 8 ms direct, TPOT 4.4 against 5.0 ms; docs/topology.md).
    let agent = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(config.timeout))
            .max_idle_connections(0)
            .max_idle_connections_per_host(0)
            .build(),
    );
    let client = Client { agent, url, config };

    if config.warmup > 0 {
        let warmup_seed = config.prompt_seed.wrapping_add(WARMUP_SEED_BASE);
        let (outcomes, _) = client.phase(config.warmup as usize, warmup_seed)?;
        let all_failed = outcomes.iter().all(|o| matches!(o, RequestOutcome::Failed { .. }));
        if let (true, Some(RequestOutcome::Failed { error })) = (all_failed, outcomes.first()) {
            return Err(BenchError::WarmupFailed {
                url: client.url.clone(),
                first_error: error.clone(),
            });
        }
    }
    let (outcomes, duration) = client.phase(config.requests as usize, config.prompt_seed)?;
    Ok(super::summarize(config, &outcomes, duration))
}

/// Warm-up prompts are seeded from here on past the run's seed, so they differ from the measured
/// ones.
const WARMUP_SEED_BASE: u64 = 1 << 32;

struct Client<'a> {
    agent: ureq::Agent,
    url: String,
    config: &'a BenchConfig,
}

impl Client<'_> {
    /// Sends `count` requests with at most `concurrency` in flight; returns their outcomes in
    /// request order and the phase's wall-clock duration.
    fn phase(
        &self,
        count: usize,
        seed_base: u64,
    ) -> Result<(Vec<RequestOutcome>, Duration), BenchError> {
        let next = AtomicUsize::new(0);
        let outcomes: Mutex<Vec<Option<RequestOutcome>>> = Mutex::new(vec![None; count]);
        let workers = count.min(self.config.concurrency as usize);
        let start = Instant::now();
        std::thread::scope(|scope| {
            for worker in 0..workers {
                let next = &next;
                let outcomes = &outcomes;
                std::thread::Builder::new()
                    .name(format!("bench-{worker}"))
                    .spawn_scoped(scope, move || {
                        loop {
                            let index = next.fetch_add(1, Ordering::Relaxed);
                            if index >= count {
                                break;
                            }
                            let outcome = self.request(seed_base.wrapping_add(index as u64));
                            let mut slots = outcomes.lock().unwrap_or_else(|e| e.into_inner());
                            slots[index] = Some(outcome);
                        }
                    })
                    .map_err(BenchError::Thread)?;
            }
            Ok::<(), BenchError>(())
        })?;
        let duration = start.elapsed();
        let outcomes = outcomes
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .into_iter()
            .map(|slot| {
                slot.unwrap_or_else(|| RequestOutcome::Failed {
                    error: "the request was never sent: its worker stopped".into(),
                })
            })
            .collect();
        Ok((outcomes, duration))
    }

    /// Sends one streamed request and measures it.
    fn request(&self, seed: u64) -> RequestOutcome {
        let body = request_body(self.config, &prompt(self.config.input_len, seed));
        let start = Instant::now();
        let response = match self
            .agent
            .post(&self.url)
            .header("content-type", "application/json")
            .header("connection", "close")
            .header("accept", "text/event-stream")
            .send(body.to_string())
        {
            Ok(response) => response,
            Err(error) => return self.failed(format!("{error}")),
        };
        let status = response.status();
        if status != 200 {
            let mut text = String::new();
            let _ = response.into_body().into_reader().take(512).read_to_string(&mut text);
            let text = text.trim();
            return self.failed(if text.is_empty() {
                format!("http status {}", status.as_u16())
            } else {
                format!("http status {}: {text}", status.as_u16())
            });
        }
        let reader = BufReader::new(response.into_body().into_reader());
        match read_stream(reader, self.config.endpoint, start) {
            Ok(stream) => match stream.into_record(self.config.input_len) {
                Some(record) => match super::workload_mismatch(self.config, &record) {
                    None => RequestOutcome::Completed(record),
                    Some(mismatch) => self.failed(mismatch),
                },
                None => self.failed("the stream ended without a content token".into()),
            },
            Err(error) => self.failed(error.to_string()),
        }
    }

    fn failed(&self, error: String) -> RequestOutcome {
        RequestOutcome::Failed { error: format!("{}: {error}", self.url) }
    }
}

/// The JSON body of one request.
fn request_body(config: &BenchConfig, prompt: &str) -> Value {
    let mut body = json!({
        "model": config.model,
        "max_tokens": config.output_len,
        "temperature": 0.0,
        "ignore_eos": true,
        "stream": true,
        "stream_options": { "include_usage": true },
    });
    match config.endpoint {
        Endpoint::Completions => body["prompt"] = json!(prompt),
        Endpoint::Chat => body["messages"] = json!([{ "role": "user", "content": prompt }]),
    }
    body
}

/// A prompt of `tokens` words, chosen by a pseudo-random sequence seeded by `seed`.
pub(super) fn prompt(tokens: u32, seed: u64) -> String {
    let mut state = seed;
    let mut text = String::with_capacity(tokens as usize * 7);
    for i in 0..tokens {
        if i > 0 {
            text.push(' ');
        }
        text.push_str(WORDS[(splitmix64(&mut state) % WORDS.len() as u64) as usize]);
    }
    text
}

/// The SplitMix64 generator: a deterministic, well-mixed sequence from any seed.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// What one stream showed.
#[derive(Debug, Default)]
struct Stream {
    ttft: Option<f64>,
    itl: Vec<f64>,
    latency: f64,
    content_chunks: u64,
    completion_tokens: Option<u64>,
    prompt_tokens: Option<u64>,
}

impl Stream {
    fn into_record(self, input_len: u32) -> Option<RequestRecord> {
        Some(RequestRecord {
            ttft: self.ttft?,
            itl: self.itl,
            latency: self.latency,
            output_tokens: self.completion_tokens.unwrap_or(self.content_chunks),
            input_tokens: self.prompt_tokens.unwrap_or(u64::from(input_len)),
            reported_input_tokens: self.prompt_tokens,
        })
    }
}

/// Why a stream cannot be read to its end; the request fails with it.
#[derive(Debug, thiserror::Error)]
enum StreamError {
    /// The connection broke, or a line is longer than the client accepts.
    #[error("reading the stream: {0}")]
    Read(#[source] std::io::Error),
    /// A `data:` line that is not JSON; `data` is its start.
    #[error("a stream chunk is not JSON ({error}): {data}")]
    NotJson { error: serde_json::Error, data: String },
    /// A chunk with an `error` field; `error` is its start.
    #[error("the stream reported an error: {error}")]
    Reported { error: String },
}

/// Reads a server-sent event stream to its end, timing each content chunk from `start`.
fn read_stream(
    mut reader: impl BufRead,
    endpoint: Endpoint,
    start: Instant,
) -> Result<Stream, StreamError> {
    let mut stream = Stream::default();
    let mut last_token_at = start;
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = reader
            .by_ref()
            .take(MAX_LINE_BYTES)
            .read_until(b'\n', &mut line)
            .map_err(StreamError::Read)?;
        if read == 0 {
            return Ok(stream);
        }
        let now = Instant::now();
        let text = String::from_utf8_lossy(&line);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        stream.latency = (now - start).as_secs_f64();
        let Some(data) = text.strip_prefix("data:") else {
            // Comments (`:`), `event:`, `id:` and `retry:` lines carry no token.
            continue;
        };
        let data = data.trim_start();
        if data == "[DONE]" {
            continue;
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|error| StreamError::NotJson { error, data: shorten(data) })?;
        if let Some(error) = chunk.get("error") {
            return Err(StreamError::Reported { error: shorten(&error.to_string()) });
        }
        let content = match endpoint {
            Endpoint::Completions => chunk.pointer("/choices/0/text"),
            Endpoint::Chat => chunk.pointer("/choices/0/delta/content"),
        };
        if content.and_then(Value::as_str).is_some_and(|text| !text.is_empty()) {
            match stream.ttft {
                None => stream.ttft = Some((now - start).as_secs_f64()),
                Some(_) => stream.itl.push((now - last_token_at).as_secs_f64()),
            }
            last_token_at = now;
            stream.content_chunks += 1;
        }
        if let Some(usage) = chunk.get("usage").filter(|usage| !usage.is_null()) {
            if let Some(tokens) = usage.get("completion_tokens").and_then(Value::as_u64) {
                stream.completion_tokens = Some(tokens);
            }
            if let Some(tokens) = usage.get("prompt_tokens").and_then(Value::as_u64) {
                stream.prompt_tokens = Some(tokens);
            }
        }
    }
}

/// The start of a stream's chunk or error for a message: its first 200 characters and `...`.
/// Not `prgate_scope::text::clip`, whose `…` would change these messages' bytes.
fn shorten(text: &str) -> String {
    const KEEP: usize = 200;
    match text.char_indices().nth(KEEP) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_has_the_requested_number_of_words_and_depends_on_its_seed() {
        for tokens in [0, 1, 7, 1024] {
            let text = prompt(tokens, 3);
            assert_eq!(text.split(' ').filter(|w| !w.is_empty()).count(), tokens as usize);
            assert_eq!(text, prompt(tokens, 3));
        }
        assert_ne!(prompt(16, 0), prompt(16, 1));
    }

    fn check(endpoint: Endpoint, body: &str, expect: Result<(u64, usize, Option<u64>), &str>) {
        let got = read_stream(body.as_bytes(), endpoint, Instant::now())
            .map(|s| (s.content_chunks, s.itl.len(), s.completion_tokens));
        match (got, expect) {
            (Ok(got), Ok(expect)) => assert_eq!(got, expect, "{body}"),
            (Err(got), Err(expect)) => assert!(got.to_string().contains(expect), "{got}"),
            (got, expect) => panic!("{body}: got {got:?}, expected {expect:?}"),
        }
    }

    #[test]
    fn streams_are_read_as_bench_serving_reads_them() {
        use Endpoint::{Chat, Completions};
        let text = |t: &str| format!("data: {{\"choices\":[{{\"text\":\"{t}\"}}]}}\n\n");
        let three = format!("{}{}{}data: [DONE]\n\n", text("a"), text("b"), text("c"));
        check(Completions, &three, Ok((3, 2, None)));
        // An empty text, a usage-only final chunk, comments and `event:` lines are no token.
        let with_usage = format!(
            ": ping\nevent: message\n{}{}data: {{\"choices\":[],\"usage\":{{\"completion_tokens\":5}}}}\n\ndata: [DONE]\n",
            text("a"),
            text("")
        );
        check(Completions, &with_usage, Ok((1, 0, Some(5))));
        let chat = "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\
                    data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\
                    data: {\"choices\":[{\"delta\":{\"content\":\"y\"}}],\"usage\":null}\n";
        check(Chat, chat, Ok((2, 1, None)));
        check(Completions, "data: {not json\n", Err("not JSON"));
        check(Completions, "data: {\"error\":{\"message\":\"boom\"}}\n", Err("boom"));
    }
}
