//! The built-in speed client (`prgate bench`) and the parsers of external speed results.
//!
//! [`run`] drives an OpenAI-compatible server with fixed-length streamed requests at a fixed
//! concurrency and reports TTFT, TPOT, ITL, end-to-end latency and throughput with the
//! definitions of sglang's `bench_serving` (`calculate_metrics` in
//! `python/sglang/bench_serving.py`); [`summarize`] is that computation on plain data.
//! [`parse_bench_serving_jsonl`] and [`parse_inferencex_json`] read the results of the external
//! benchmarks a recipe may name into [`SpeedRecord`]s.
//!
//! It measures and parses; whether a difference in speed matters is the gate's question, and
//! pairing base and PR runs is the runner's. The reference is `docs/bench.md`.
//!
//! # How a prompt of N tokens is made
//!
//! A prompt of `input_len` tokens is `input_len` words separated by single spaces, drawn from a
//! fixed list of common lowercase English words that the usual BPE tokenizers (Llama, Qwen,
//! DeepSeek, GPT) encode as one token each with their leading space. The words are chosen by a
//! deterministic pseudo-random sequence seeded by the run's seed and the request's index
//! ([`BenchConfig::prompt_seed`], fresh for each run: a server cannot know the measured prompts
//! before they come, nor serve them from a cache of an earlier run), so no two requests share a
//! prefix a server could cache, and a run with the same seed sends the same prompts. The count is an
//! approximation: a chat template adds its own tokens, and a tokenizer may split a word. When the
//! server reports `usage.prompt_tokens`, that count is used for the input throughput.
//!
//! # A run measures what it asked for
//!
//! A server that stops early (one that accepts `ignore_eos` and ignores it, as llama.cpp's
//! does) would be timed on another workload. So every request's output tokens
//! (`usage.completion_tokens`, else the chunks with content) must be within
//! [`OUTPUT_TOLERANCE`] of `output_len`, and its prompt tokens, when the server reports them,
//! within [`INPUT_TOLERANCE`] (plus [`INPUT_TOLERANCE_TOKENS`]) of `input_len`; a request outside them is failed with the numbers,
//! so the run has no TPOT.

mod client;
mod metrics;
mod parse;

use std::time::Duration;

use serde::Serialize;

pub use client::run;
pub use metrics::summarize;
pub use parse::{
    EXTERNAL_LENGTH_FLOOR, Location, ParseError, RunError, SpeedRecord, check_workload,
    median_tpot_at, parse_bench_serving_jsonl, parse_inferencex_json, record_at,
};

/// Which OpenAI-compatible API the client calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Endpoint {
    /// `POST /v1/completions` with a `prompt`; each chunk's `choices[0].text` is a token.
    Completions,
    /// `POST /v1/chat/completions` with one user message; each chunk's
    /// `choices[0].delta.content` is a token.
    Chat,
}

impl Endpoint {
    /// The path appended to the base URL.
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::Completions => "/v1/completions",
            Endpoint::Chat => "/v1/chat/completions",
        }
    }
}

/// What one benchmark run sends, and how.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchConfig {
    /// The server's base URL, e.g. `http://127.0.0.1:30000` (a trailing `/` is ignored).
    pub base_url: String,
    /// The `model` field of every request.
    pub model: String,
    /// The API called.
    pub endpoint: Endpoint,
    /// Prompt length in tokens (approximately: see the module documentation).
    pub input_len: u32,
    /// `max_tokens` of every request; `ignore_eos` is set, so the server generates all of them.
    pub output_len: u32,
    /// How many requests are in flight at once (one worker thread each); at least 1.
    pub concurrency: u32,
    /// How many measured requests are sent.
    pub requests: u32,
    /// How many requests are sent, at the same concurrency, before the measured ones; they are
    /// not counted. If every one of them fails, the run stops with [`BenchError::WarmupFailed`].
    pub warmup: u32,
    /// The longest one request may take, from sending it to the end of its stream.
    pub timeout: Duration,
    /// The seed of the run's prompts: measured request `i`'s is `prompt_seed + i`, the warm-up's
    /// `prompt_seed + 2^32 + i`. Give each run a fresh one: a server
    /// that knew the seed would know the measured prompts before they came (and could serve
    /// them by a fast path, or from a cache of an earlier run). The caller draws it (the
    /// runner's `bench::fresh_prompt_seed`): this crate reads no random source.
    pub prompt_seed: u64,
}

/// One successful request, as the client measured it. Times are in seconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestRecord {
    /// From sending the request to the first chunk with content.
    pub ttft: f64,
    /// The gaps between successive chunks with content (one fewer than such chunks).
    pub itl: Vec<f64>,
    /// From sending the request to the last line of the stream (`data: [DONE]` when sent).
    pub latency: f64,
    /// `usage.completion_tokens` when the server reports it, else the chunks with content.
    pub output_tokens: u64,
    /// `usage.prompt_tokens` when the server reports it, else the configured `input_len`.
    pub input_tokens: u64,
    /// `usage.prompt_tokens` as the server reported it, if it did.
    #[serde(skip)]
    pub reported_input_tokens: Option<u64>,
}

/// How one request ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RequestOutcome {
    /// The stream ended normally with at least one content token.
    Completed(RequestRecord),
    /// An HTTP error status, a transport error or timeout, a malformed or error chunk, or a
    /// stream without content: counted in `failed`, never averaged in.
    Failed {
        /// What went wrong, naming the URL.
        error: String,
    },
}

/// The result of a run: `bench_serving`'s metrics under `bench_serving`'s JSON names.
///
/// A statistic over an empty set (no successful request, no request with two tokens or
/// more) is `null`, where `bench_serving` writes 0 or NaN.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchResult {
    /// The model requested.
    pub model: String,
    /// `completions` or `chat`.
    pub endpoint: Endpoint,
    /// The configured concurrency (`--max-concurrency` in `bench_serving`).
    pub max_concurrency: u32,
    /// The configured prompt length in tokens.
    pub input_len: u32,
    /// The configured output length in tokens.
    pub output_len: u32,
    /// The measured requests sent.
    pub num_prompts: u32,
    /// The warm-up requests sent first and not counted.
    pub warmup_requests: u32,
    /// The seed of the run's prompts ([`BenchConfig::prompt_seed`]): the run again sends the
    /// same prompts with it.
    pub prompt_seed: u64,
    /// Seconds from the first measured request to the end of the last.
    pub duration: f64,
    /// Successful requests.
    pub completed: u64,
    /// Failed requests.
    pub failed: u64,
    /// Input tokens of the successful requests.
    pub total_input_tokens: u64,
    /// Output tokens of the successful requests.
    pub total_output_tokens: u64,
    /// `completed / duration`.
    pub request_throughput: f64,
    /// `total_input_tokens / duration`.
    pub input_throughput: f64,
    /// `total_output_tokens / duration`.
    pub output_throughput: f64,
    /// `(total_input_tokens + total_output_tokens) / duration`.
    pub total_throughput: f64,
    /// The measured concurrency: the sum of the successful requests' latencies over `duration`.
    pub concurrency: f64,
    /// Time to first token: mean over successful requests, in milliseconds.
    pub mean_ttft_ms: Option<f64>,
    /// Time to first token: median.
    pub median_ttft_ms: Option<f64>,
    /// Time to first token: population standard deviation.
    pub std_ttft_ms: Option<f64>,
    /// Time to first token: 90th percentile (linear interpolation, as numpy).
    pub p90_ttft_ms: Option<f64>,
    /// Time to first token: 99th percentile.
    pub p99_ttft_ms: Option<f64>,
    /// Time per output token, `(latency - ttft) / (output_tokens - 1)` per request with two
    /// tokens or more: mean.
    pub mean_tpot_ms: Option<f64>,
    /// Time per output token: median.
    pub median_tpot_ms: Option<f64>,
    /// Time per output token: population standard deviation.
    pub std_tpot_ms: Option<f64>,
    /// Time per output token: 90th percentile.
    pub p90_tpot_ms: Option<f64>,
    /// Time per output token: 99th percentile.
    pub p99_tpot_ms: Option<f64>,
    /// Inter-token latency, over all gaps of all successful requests: mean.
    pub mean_itl_ms: Option<f64>,
    /// Inter-token latency: median.
    pub median_itl_ms: Option<f64>,
    /// Inter-token latency: population standard deviation.
    pub std_itl_ms: Option<f64>,
    /// Inter-token latency: 90th percentile.
    pub p90_itl_ms: Option<f64>,
    /// Inter-token latency: 95th percentile.
    pub p95_itl_ms: Option<f64>,
    /// Inter-token latency: 99th percentile.
    pub p99_itl_ms: Option<f64>,
    /// Inter-token latency: the largest gap.
    pub max_itl_ms: Option<f64>,
    /// End-to-end latency of successful requests: mean.
    pub mean_e2e_latency_ms: Option<f64>,
    /// End-to-end latency: median.
    pub median_e2e_latency_ms: Option<f64>,
    /// End-to-end latency: population standard deviation.
    pub std_e2e_latency_ms: Option<f64>,
    /// End-to-end latency: 90th percentile.
    pub p90_e2e_latency_ms: Option<f64>,
    /// End-to-end latency: 99th percentile.
    pub p99_e2e_latency_ms: Option<f64>,
    /// The distinct errors of the failed requests, in the order first seen, at most
    /// [`MAX_ERRORS_KEPT`].
    pub errors: Vec<String>,
}

/// How far a request's output tokens may be from `output_len`: 2% of it, and at least one
/// token.
pub const OUTPUT_TOLERANCE: f64 = 0.02;

/// How far a request's reported prompt tokens may be from `input_len`: this fraction of it
/// plus [`INPUT_TOLERANCE_TOKENS`] (a chat template's and a beginning-of-sequence token's
/// worth; the prompt's words are one token each in the usual tokenizers, see above).
pub const INPUT_TOLERANCE: f64 = 0.10;
/// See [`INPUT_TOLERANCE`].
pub const INPUT_TOLERANCE_TOKENS: u64 = 64;

/// How many output tokens a request may be off `output_len`: [`OUTPUT_TOLERANCE`] of it, at
/// least one.
pub fn output_slack(output_len: u64) -> u64 {
    ((output_len as f64 * OUTPUT_TOLERANCE).ceil() as u64).max(1)
}

/// How many prompt tokens a request may be off `input_len`: [`INPUT_TOLERANCE`] of it plus
/// [`INPUT_TOLERANCE_TOKENS`].
pub fn input_slack(input_len: u64) -> u64 {
    (input_len as f64 * INPUT_TOLERANCE).ceil() as u64 + INPUT_TOLERANCE_TOKENS
}

/// Why a completed request did not measure what it asked for; `None` when it did.
pub fn workload_mismatch(config: &BenchConfig, record: &RequestRecord) -> Option<String> {
    let asked = u64::from(config.output_len);
    let slack = output_slack(asked);
    if record.output_tokens.abs_diff(asked) > slack {
        return Some(format!(
            "asked for {asked} output tokens (max_tokens, ignore_eos) and received {}, beyond the tolerance of {slack}: a server that stops early is timed on another workload",
            record.output_tokens
        ));
    }
    let input = u64::from(config.input_len);
    let slack = input_slack(input);
    match record.reported_input_tokens {
        Some(reported) if reported.abs_diff(input) > slack => Some(format!(
            "sent a prompt of {input} tokens and the server counted {reported}, beyond the tolerance of {slack}"
        )),
        _ => None,
    }
}

/// How many distinct error messages a [`BenchResult`] keeps.
pub const MAX_ERRORS_KEPT: usize = 10;

/// Why a run could not produce a result. Failed requests are not errors: they are counted.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The configuration cannot be run.
    #[error("invalid benchmark configuration: {reason}")]
    InvalidConfig {
        /// What is wrong.
        reason: String,
    },
    /// Every warm-up request failed: the server is not serving.
    #[error("every warm-up request to {url} failed; the first: {first_error}")]
    WarmupFailed {
        /// The URL requested.
        url: String,
        /// The first warm-up request's error.
        first_error: String,
    },
    /// A worker thread could not be started.
    #[error("cannot start a benchmark worker thread")]
    Thread(#[source] std::io::Error),
}
