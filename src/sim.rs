//! `prgate sim-server`: the simulated OpenAI-compatible server, for tests, the demo and trying
//! the runner without a GPU. The server itself is the `prgate-sim-server` crate's; this is its CLI.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use prgate_sim_server::{self as sim_server, DisaggregationOverrides, Overrides, Profile};

/// Serve a simulated OpenAI-compatible model server (completions, chat, streaming, /health,
/// /v1/models) whose speed, noise, failures and accuracy come from a profile file and flags.
///
/// Prints the address it listens on, then serves until stopped. The profile format:
/// docs/sim-server.md.
#[derive(Debug, Args)]
pub(crate) struct SimServerArgs {
    /// A profile file (TOML, or JSON when it ends in .json); flags override its keys.
    #[arg(long, value_name = "FILE")]
    profile: Option<PathBuf>,
    /// The address to listen on; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// The model name to report.
    #[arg(long)]
    model: Option<String>,
    /// Time to first token, in milliseconds.
    #[arg(long, value_name = "MS")]
    ttft_ms: Option<f64>,
    /// Time per output token after the first, in milliseconds.
    #[arg(long, value_name = "MS")]
    tpot_ms: Option<f64>,
    /// Run-to-run noise, as a coefficient of variation (0.02 is 2%).
    #[arg(long, value_name = "CV")]
    noise_cv: Option<f64>,
    /// The seed of every random draw.
    #[arg(long)]
    seed: Option<u64>,
    /// The probability that an answer with an `expected:` line is right.
    #[arg(long, value_name = "P")]
    accuracy: Option<f64>,
    /// How long after start the server is not ready (503 everywhere), in milliseconds.
    #[arg(long, value_name = "MS")]
    startup_delay_ms: Option<f64>,
    /// How long taking released memory back takes (SGLang's resume, vLLM's wake-up), in
    /// milliseconds.
    #[arg(long, value_name = "MS")]
    wake_delay_ms: Option<f64>,
    /// Which memory-release API to answer: both, sglang, vllm or none.
    #[arg(long, value_name = "API")]
    memory_api: Option<prgate_sim_server::MemoryApi>,
    /// Keep the bytes of a fake GPU's memory the server holds in DIR/<pid>-<port>; a load or
    /// wake that does not fit beside the folder's other live servers under DIR/total fails.
    #[arg(long, value_name = "DIR")]
    vram_dir: Option<PathBuf>,
    /// The bytes of fake GPU memory the server holds once loaded (with --vram-dir).
    #[arg(long, value_name = "BYTES")]
    vram_bytes: Option<u64>,
    /// Answer a memory release as the engines do but keep the memory: a server that lies.
    #[arg(long)]
    release_keeps_memory: bool,
    /// Take the memory back this long after a release, unless paused by then: a server that
    /// lies later.
    #[arg(long, value_name = "MS")]
    retake_memory_after_ms: Option<f64>,
    /// Leave the fake GPU busy this long after a release, paused or not: a server that queued
    /// GPU work before it answered.
    #[arg(long, value_name = "MS")]
    busy_after_release_ms: Option<f64>,
    /// Never become ready: 503 for ever.
    #[arg(long)]
    never_healthy: bool,
    /// Answer this many generation requests; the next one kills the server.
    #[arg(long, value_name = "N")]
    die_after_requests: Option<u64>,
    /// End every answer after at most N tokens, whatever max_tokens and ignore_eos ask (a
    /// server that ignores ignore_eos).
    #[arg(long, value_name = "N")]
    eos_after_tokens: Option<usize>,
    /// The fraction of generation requests answered with a 500.
    #[arg(long, value_name = "P")]
    error_rate: Option<f64>,
    /// Log monokernel routing lines, as a server started with monokernels on does.
    #[arg(long = "enable-amd-monokernel")]
    monokernel: bool,
    /// Where the log goes [default: standard error].
    #[arg(long, value_name = "FILE")]
    log_file: Option<PathBuf>,
    /// Write the address listened on to this file too (for scripts and the runner).
    #[arg(long, value_name = "FILE")]
    address_file: Option<PathBuf>,
    /// Serve one half of a disaggregated model, as SGLang's flag of the same name: a prefill
    /// instance (with a bootstrap server) or a decode instance (docs/sim-server.md).
    #[arg(long, value_name = "MODE")]
    disaggregation_mode: Option<sim_server::disaggregation::Mode>,
    /// A prefill instance's bootstrap port [default: 8998].
    #[arg(long, value_name = "PORT")]
    disaggregation_bootstrap_port: Option<u16>,
    /// The KV transfer backend the server reports [default: mooncake].
    #[arg(long, value_name = "NAME")]
    disaggregation_transfer_backend: Option<String>,
    /// The transport the backend reports it uses [default: rdma]; `tcp` simulates a fallback.
    #[arg(long, value_name = "NAME")]
    disaggregation_transport: Option<String>,
}

pub(crate) fn run(args: &SimServerArgs) -> anyhow::Result<()> {
    let profile = match &args.profile {
        Some(path) => Profile::load(path)?,
        None => Profile::default(),
    };
    let profile = profile.overridden(&args.overrides())?;
    let server = sim_server::serve(profile, args.listen)?;
    let url = server.url();
    if let Some(path) = &args.address_file {
        std::fs::write(path, format!("{url}\n"))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on {url}")
        .and_then(|()| stdout.flush())
        .context("writing to standard output")?;
    drop(stdout);
    server.wait()?;
    Ok(())
}

impl SimServerArgs {
    /// The profile's keys the flags give (each flag is `--` and its key; the checks are the
    /// profile's).
    fn overrides(&self) -> Overrides {
        Overrides {
            model: self.model.clone(),
            ttft_ms: self.ttft_ms,
            tpot_ms: self.tpot_ms,
            noise_cv: self.noise_cv,
            seed: self.seed,
            accuracy: self.accuracy,
            startup_delay_ms: self.startup_delay_ms,
            wake_delay_ms: self.wake_delay_ms,
            memory_api: self.memory_api,
            vram_dir: self.vram_dir.clone(),
            vram_bytes: self.vram_bytes,
            release_keeps_memory: self.release_keeps_memory,
            retake_memory_after_ms: self.retake_memory_after_ms,
            busy_after_release_ms: self.busy_after_release_ms,
            never_healthy: self.never_healthy,
            die_after_requests: self.die_after_requests,
            eos_after_tokens: self.eos_after_tokens,
            error_rate: self.error_rate,
            monokernel: self.monokernel,
            log_file: self.log_file.clone(),
            disaggregation: DisaggregationOverrides {
                mode: self.disaggregation_mode,
                bootstrap_port: self.disaggregation_bootstrap_port,
                transfer_backend: self.disaggregation_transfer_backend.clone(),
                transport: self.disaggregation_transport.clone(),
            },
        }
    }
}

/// Benchmark an OpenAI-compatible server at fixed input and output lengths and one
/// concurrency, streaming, and print TTFT, TPOT, ITL and throughput as JSON, with
/// sglang bench_serving's definitions (docs/bench.md).
#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    /// The server, e.g. http://127.0.0.1:30000.
    #[arg(long, value_name = "URL")]
    url: String,
    /// The model name sent with every request.
    #[arg(long, default_value = "default")]
    model: String,
    /// Use the chat completions API instead of completions.
    #[arg(long)]
    chat: bool,
    /// Prompt length, in tokens.
    #[arg(long, default_value_t = 1024)]
    input_len: u32,
    /// Output length, in tokens (max_tokens, with ignore_eos).
    #[arg(long, default_value_t = 1024)]
    output_len: u32,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 1)]
    concurrency: u32,
    /// Measured requests.
    #[arg(long, default_value_t = 16)]
    requests: u32,
    /// Requests sent first and not counted.
    #[arg(long, default_value_t = 2)]
    warmup: u32,
    /// The longest one request may take, in seconds.
    #[arg(long, default_value_t = 600)]
    timeout_s: u64,
    /// The seed of the prompts (the result's `prompt_seed`): the same seed sends the same
    /// prompts again. Fresh for each run when not given.
    #[arg(long)]
    seed: Option<u64>,
}

pub(crate) fn bench(args: &BenchArgs) -> anyhow::Result<()> {
    use prgate_runner::bench::{BenchConfig, Endpoint};
    let config = BenchConfig {
        base_url: args.url.clone(),
        model: args.model.clone(),
        endpoint: if args.chat { Endpoint::Chat } else { Endpoint::Completions },
        input_len: args.input_len,
        output_len: args.output_len,
        concurrency: args.concurrency,
        requests: args.requests,
        warmup: args.warmup,
        timeout: Duration::from_secs(args.timeout_s),
        prompt_seed: args.seed.unwrap_or_else(prgate_runner::bench::fresh_prompt_seed),
    };
    let result = prgate_runner::bench::run(&config)?;
    crate::files::print(
        &(serde_json::to_string_pretty(&result).context("writing the result")? + "\n"),
    )
}
