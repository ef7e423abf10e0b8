//! `prgate sim-server`: the simulated OpenAI-compatible server, for tests, the demo and trying
//! the runner without a GPU. The server itself is the `prgate-sim-server` crate's; this is its CLI.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use prgate_sim_server::{self as sim_server, Profile};

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
    let mut profile = match &args.profile {
        Some(path) => Profile::load(path)?,
        None => Profile::default(),
    };
    if let Some(model) = &args.model {
        profile.model.clone_from(model);
    }
    measured_flags(args, &mut profile)?;
    behaviour_flags(args, &mut profile)?;
    if let Some(log) = &args.log_file {
        profile.log_file = Some(log.clone());
    }
    disaggregation_flags(args, &mut profile)?;
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

/// The flags of what the server measures as over the profile's: its times, noise, seed and
/// accuracy (checked in this order: the first bad one is the error).
fn measured_flags(args: &SimServerArgs, profile: &mut Profile) -> anyhow::Result<()> {
    let millis = |value: f64, flag: &str| -> anyhow::Result<Duration> {
        anyhow::ensure!(
            value.is_finite() && value >= 0.0,
            "{flag} {value}: not a time in milliseconds"
        );
        Ok(Duration::from_secs_f64(value / 1000.0))
    };
    if let Some(ms) = args.ttft_ms {
        profile.time_to_first_token = millis(ms, "--ttft-ms")?;
    }
    if let Some(ms) = args.tpot_ms {
        profile.time_per_output_token = millis(ms, "--tpot-ms")?;
    }
    if let Some(cv) = args.noise_cv {
        profile.noise =
            cv.try_into().map_err(|error| anyhow::anyhow!("--noise-cv {cv}: {error}"))?;
    }
    if let Some(seed) = args.seed {
        profile.seed = seed;
    }
    if let Some(accuracy) = args.accuracy {
        profile.accuracy = accuracy
            .try_into()
            .map_err(|error| anyhow::anyhow!("--accuracy {accuracy}: {error}"))?;
    }
    if let Some(ms) = args.startup_delay_ms {
        profile.startup_delay = millis(ms, "--startup-delay-ms")?;
    }
    if let Some(ms) = args.wake_delay_ms {
        profile.wake_delay = millis(ms, "--wake-delay-ms")?;
    }
    Ok(())
}

/// The flags of how the server behaves over the profile's: its memory API, and the ways it
/// breaks.
fn behaviour_flags(args: &SimServerArgs, profile: &mut Profile) -> anyhow::Result<()> {
    if let Some(api) = args.memory_api {
        profile.memory_api = api;
    }
    profile.never_healthy |= args.never_healthy;
    if let Some(count) = args.die_after_requests {
        profile.die_after_requests = Some(count);
    }
    if let Some(tokens) = args.eos_after_tokens {
        profile.eos_after_tokens = Some(tokens);
    }
    if let Some(rate) = args.error_rate {
        profile.error_rate =
            rate.try_into().map_err(|error| anyhow::anyhow!("--error-rate {rate}: {error}"))?;
    }
    profile.monokernel |= args.monokernel;
    Ok(())
}

/// The `--disaggregation-*` flags over the profile's `[disaggregation]` table.
fn disaggregation_flags(args: &SimServerArgs, profile: &mut Profile) -> anyhow::Result<()> {
    if let Some(mode) = args.disaggregation_mode {
        let pd =
            profile.disaggregation.get_or_insert_with(|| sim_server::Disaggregation::new(mode));
        pd.mode = mode;
    }
    let given = args.disaggregation_bootstrap_port.is_some()
        || args.disaggregation_transfer_backend.is_some()
        || args.disaggregation_transport.is_some();
    let Some(pd) = profile.disaggregation.as_mut() else {
        anyhow::ensure!(
            !given,
            "the --disaggregation-* flags need --disaggregation-mode (or a profile's [disaggregation] table)"
        );
        return Ok(());
    };
    if let Some(port) = args.disaggregation_bootstrap_port {
        anyhow::ensure!(port != 0, "--disaggregation-bootstrap-port 0: not a port");
        pd.bootstrap_port = port;
    }
    let word = |flag: &str, text: &str| -> anyhow::Result<String> {
        anyhow::ensure!(
            !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || "-_".contains(c)),
            "{flag} {text:?}: not one word of letters, digits, '-' and '_'"
        );
        Ok(text.to_owned())
    };
    if let Some(backend) = &args.disaggregation_transfer_backend {
        pd.transfer_backend = word("--disaggregation-transfer-backend", backend)?;
    }
    if let Some(transport) = &args.disaggregation_transport {
        pd.transport = word("--disaggregation-transport", transport)?;
    }
    Ok(())
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
    };
    let result = prgate_runner::bench::run(&config)?;
    crate::files::print(
        &(serde_json::to_string_pretty(&result).context("writing the result")? + "\n"),
    )
}
