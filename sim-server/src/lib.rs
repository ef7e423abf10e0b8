//! The simulated server: a real OpenAI-compatible HTTP server on a real socket, the stand-in
//! for an SGLang server so the runner, its tests and the demo run without a GPU.
//!
//! Its speed (time to first token, time per output token), run-to-run noise, failures (a slow
//! start, never healthy, dying after some requests, 500s), answer accuracy, monokernel
//! routing lines and the fake GPU memory it holds (`vram`) come from a [`Profile`]. [`serve`] starts it on a socket and returns a
//! [`RunningServer`]; [`run`] blocks until it dies, for `prgate sim-server`, whose command line
//! is the binary's: it maps its flags onto [`Overrides`], which the profile's own checks set. `docs/sim-server.md` is the reference of the profile and the endpoints.
//! A crate of its own: a test double the runner, its tests and the demo use, never part of
//! the runner that runs on a GPU node.
//!
//! Every request is handled on its own task with its own clock, like a server with spare
//! capacity, unless the profile's `max-concurrency` queues them: the HTTP layer is hyper's on a
//! tokio runtime of one thread, so an idle connection costs a task and a socket, never a thread
//! (a test holds 1,500 of them open and is still answered). Every response closes its
//! connection (`Connection: close`), so a stopped or dead server leaves no connection open; a
//! crash (dying, stopping mid-answer) drops the connection, or breaks a stream off mid-body.

pub mod disaggregation;
mod generate;
mod info;
mod memory;
mod overrides;
mod profile;
pub mod rng;
#[cfg(test)]
mod tests;
mod vram;

use std::io::{self, Write};
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::{Frame, Incoming};
use hyper::header::HeaderValue;
use hyper::{Method, Request, Response};

use disaggregation::Mode;
pub use disaggregation::{Disaggregation, DisaggregationError};
use generate::{Endpoint, GenerationRequest, Identity, Output};
pub use overrides::{DisaggregationOverrides, OverrideError, Overrides};
pub use profile::{
    Bounded, CoefficientOfVariation, DEFAULT_PROFILE, InvalidNumber, MemoryApi, NonNegative,
    Probability, Profile, ProfileError, Range, ZeroToOne,
};
use rng::SplitMix64;
pub use vram::{BUSY_UNTIL as VRAM_BUSY_UNTIL, TOTAL_FILE as VRAM_TOTAL_FILE, VramError};

/// Starts a simulated server on `addr` and returns at once; port 0 binds a free port, which
/// [`RunningServer::addr`] reports. The server runs until it is stopped, dropped or dies.
pub fn serve(profile: Profile, addr: SocketAddr) -> Result<RunningServer, SimServerError> {
    let log = open_log(profile.log_file.as_deref())?;
    let listener = std::net::TcpListener::bind(addr)
        .map_err(|source| SimServerError::Bind { addr, source })?;
    let local = listener.local_addr().map_err(|source| SimServerError::Bind { addr, source })?;
    listener.set_nonblocking(true).map_err(|source| SimServerError::Bind { addr, source })?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|error| SimServerError::Server { message: error.to_string() })?;
    // A prefill instance's bootstrap server listens on its own port of the same address.
    let bootstrap = match profile.disaggregation.as_ref().filter(|pd| pd.mode == Mode::Prefill) {
        Some(pd) => {
            let addr = SocketAddr::new(local.ip(), pd.bootstrap_port);
            let bound = std::net::TcpListener::bind(addr)
                .and_then(|listener| listener.set_nonblocking(true).map(|()| listener))
                .map_err(|source| SimServerError::Bind { addr, source })?;
            Some(bound)
        }
        None => None,
    };
    let shared = Arc::new(Shared::new(profile, log, local.port()));
    // Loading takes the fake GPU's memory, when the profile has one; no room is a failed start.
    shared.vram.as_ref().map(vram::FakeVram::take).transpose()?;
    shared.log(&format!(
        "[sim-server] listening on http://{local}, model {}, HIP_VISIBLE_DEVICES={}",
        shared.profile.model,
        std::env::var("HIP_VISIBLE_DEVICES").unwrap_or_default()
    ));
    if let Some(pd) = &shared.profile.disaggregation {
        shared.log(&pd.start_line(local));
    }
    if shared.profile.never_healthy {
        shared.log("[sim-server] never healthy, as the profile asks");
    }
    shared.check_ready();
    let thread = thread::Builder::new()
        .name("sim-server".to_owned())
        .spawn({
            let shared = Arc::clone(&shared);
            move || runtime.block_on(serve_loop(listener, bootstrap, shared))
        })
        .map_err(|error| SimServerError::Server { message: error.to_string() })?;
    Ok(RunningServer { addr: local, shared, thread: Some(thread) })
}

/// Runs a simulated server on `addr` until it dies (an error: [`SimServerError::Died`]) or
/// fails; for `prgate sim-server`, which exits non-zero when this returns.
pub fn run(profile: Profile, addr: SocketAddr) -> Result<(), SimServerError> {
    serve(profile, addr)?.wait()
}

/// A simulated server running on its own threads. Dropping it stops it.
pub struct RunningServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<Result<(), SimServerError>>>,
}

/// Stops a running server from another thread (a signal handler's, say).
#[derive(Clone)]
pub struct Stopper {
    shared: Arc<Shared>,
}

/// What can go wrong starting or running a simulated server.
#[derive(Debug, thiserror::Error)]
pub enum SimServerError {
    /// The profile file cannot be read.
    #[error("error reading the simulated server's profile {}", path.display())]
    ReadProfile {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The profile file is not valid TOML or JSON, has an unknown key, or a value out of range.
    #[error("error parsing the simulated server's profile {}: {message}", path.display())]
    ParseProfile { path: PathBuf, message: String },
    /// The log file cannot be opened.
    #[error("error opening the simulated server's log {}", path.display())]
    OpenLog {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The address cannot be listened on.
    #[error("error listening on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    /// The HTTP server stopped accepting connections, or a thread cannot be started.
    #[error("the simulated server failed: {message}")]
    Server { message: String },
    /// The server died, as its profile's `die-after-requests` asks.
    #[error(
        "the simulated server died after {requests} generation requests, as its profile asks \
         (die-after-requests)"
    )]
    Died { requests: u64 },
    /// The fake GPU's memory (`vram-dir`) cannot be taken or written.
    #[error(transparent)]
    Vram(#[from] VramError),
}

impl RunningServer {
    /// The address the server listens on, with the real port when port 0 was asked for.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server's base URL, `http://<addr>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A handle that stops the server from elsewhere.
    pub fn stopper(&self) -> Stopper {
        Stopper { shared: Arc::clone(&self.shared) }
    }

    /// Stops the server: it stops listening and breaks the connections of requests in flight.
    /// The error is why it had already stopped, if it had (it died, say).
    pub fn stop(mut self) -> Result<(), SimServerError> {
        self.shared.stop();
        self.join()
    }

    /// Blocks until the server stops: through a [`Stopper`] (`Ok`), or by dying or failing.
    pub fn wait(mut self) -> Result<(), SimServerError> {
        self.join()
    }

    fn join(&mut self) -> Result<(), SimServerError> {
        match self.thread.take() {
            Some(thread) => thread.join().unwrap_or_else(|_| {
                Err(SimServerError::Server { message: "the serve loop panicked".to_owned() })
            }),
            None => Ok(()),
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.shared.stop();
        // Dropping has nobody to tell why the server had stopped.
        let _stopped = self.join();
    }
}

impl std::fmt::Debug for RunningServer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("RunningServer").field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl Stopper {
    /// Stops the server, as [`RunningServer::stop`] does; returns at once.
    pub fn stop(&self) {
        self.shared.stop();
    }
}

impl std::fmt::Debug for Stopper {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Stopper").finish_non_exhaustive()
    }
}

/// How often the serve loop and waiting requests look whether the server is stopping.
const POLL: Duration = Duration::from_millis(20);

/// What a serve loop and its request tasks share.
struct Shared {
    profile: Profile,
    started: Instant,
    created: u64,
    ready: AtomicBool,
    ready_once: Once,
    stopping: AtomicBool,
    /// Tells every waiting task that the server stops.
    stop_signal: tokio::sync::watch::Sender<bool>,
    died: AtomicBool,
    /// Its GPU memory released (SGLang's release, vLLM's sleep): generation is refused.
    released: AtomicBool,
    /// Its share of a fake GPU's memory (`vram-dir`).
    vram: Option<vram::FakeVram>,
    generation_requests: AtomicU64,
    in_flight: Arc<AtomicUsize>,
    /// The `max-concurrency` queue (unbounded without it).
    slots: Arc<tokio::sync::Semaphore>,
    log: Mutex<Box<dyn Write + Send>>,
    /// A prefill instance's rooms, which its bootstrap server hands over.
    rooms: disaggregation::Rooms,
}

impl Shared {
    fn new(profile: Profile, log: Box<dyn Write + Send>, port: u16) -> Shared {
        let created = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        let permits =
            profile.max_concurrency.map_or(tokio::sync::Semaphore::MAX_PERMITS, usize::from);
        let vram = vram::FakeVram::of(&profile, port);
        Shared {
            profile,
            started: Instant::now(),
            created,
            ready: AtomicBool::new(false),
            ready_once: Once::new(),
            stopping: AtomicBool::new(false),
            stop_signal: tokio::sync::watch::Sender::new(false),
            died: AtomicBool::new(false),
            released: AtomicBool::new(false),
            vram,
            generation_requests: AtomicU64::new(0),
            in_flight: Arc::new(AtomicUsize::new(0)),
            slots: Arc::new(tokio::sync::Semaphore::new(permits)),
            log: Mutex::new(log),
            rooms: disaggregation::Rooms::default(),
        }
    }

    /// Writes one line to the server's log. A log that cannot be written is not a reason to
    /// stop serving.
    fn log(&self, line: &str) {
        let mut log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        let _unwritten = writeln!(log, "{line}").and_then(|()| log.flush());
    }

    /// Whether the server is ready; logs that it is, once, before anyone is told.
    fn check_ready(&self) -> bool {
        if self.ready.load(Ordering::Acquire) {
            return true;
        }
        if self.profile.never_healthy || self.started.elapsed() < self.profile.startup_delay {
            return false;
        }
        self.ready_once.call_once(|| {
            self.log("[sim-server] ready");
            if self.profile.monokernel {
                self.log_routing(1);
            }
            self.ready.store(true, Ordering::Release);
        });
        true
    }

    fn log_routing(&self, batch: usize) {
        self.log(&format!("[monokernel] routed {} decode batch={batch}", self.profile.model));
    }

    fn log_finished(&self, number: u64, prompt_tokens: usize, output: &Output) {
        self.log(&format!(
            "[sim-server] request {number}: prompt_tokens={prompt_tokens} completion_tokens={} \
             finish_reason={}",
            output.len(),
            output.finish_reason()
        ));
    }

    /// How long the serve loop may wait for a connection before it must look again.
    fn poll_interval(&self) -> Duration {
        if self.ready.load(Ordering::Acquire) || self.profile.never_healthy {
            return POLL;
        }
        let until_ready = self.profile.startup_delay.saturating_sub(self.started.elapsed());
        until_ready.clamp(Duration::from_millis(1), POLL)
    }

    fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        self.stop_signal.send_replace(true);
    }

    fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// What waits for the server to stop.
    fn stopped(&self) -> tokio::sync::watch::Receiver<bool> {
        self.stop_signal.subscribe()
    }

    fn die(&self, limit: u64) {
        if !self.died.swap(true, Ordering::AcqRel) {
            self.log(&format!(
                "[sim-server] dying after {limit} generation requests (die-after-requests)"
            ));
        }
        self.stop();
    }

    /// Sleeps until `deadline`; false when the server started stopping meanwhile.
    async fn sleep_until(&self, deadline: Instant) -> bool {
        let mut stopped = self.stopped();
        tokio::select! {
            _ = stopped.wait_for(|stop| *stop) => false,
            () = tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)) => {
                !self.is_stopping()
            }
        }
    }

    /// Waits for a free `max-concurrency` slot; `None` when the server started stopping
    /// meanwhile.
    async fn acquire_slot(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let mut stopped = self.stopped();
        tokio::select! {
            _ = stopped.wait_for(|stop| *stop) => None,
            permit = Arc::clone(&self.slots).acquire_owned() => permit.ok(),
        }
    }
}

/// A request counted in the decode batch while it lives.
struct InFlight {
    count: Arc<AtomicUsize>,
}

impl InFlight {
    /// Enters the batch; returns the guard and the batch's size with this request.
    fn enter(count: Arc<AtomicUsize>) -> (InFlight, usize) {
        let batch = count.fetch_add(1, Ordering::AcqRel) + 1;
        (InFlight { count }, batch)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::AcqRel);
    }
}

fn open_log(path: Option<&Path>) -> Result<Box<dyn Write + Send>, SimServerError> {
    match path {
        None => Ok(Box::new(io::stderr())),
        Some(path) => std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map(|file| Box::new(io::LineWriter::new(file)) as Box<dyn Write + Send>)
            .map_err(|source| SimServerError::OpenLog { path: path.to_owned(), source }),
    }
}

/// Accepts connections until the server stops, each served on a task of its own (an idle
/// connection costs a task, not a thread); stopping drops every connection, in flight or not,
/// and the listening socket with them.
async fn serve_loop(
    listener: std::net::TcpListener,
    bootstrap: Option<std::net::TcpListener>,
    shared: Arc<Shared>,
) -> Result<(), SimServerError> {
    let listener = tokio::net::TcpListener::from_std(listener)
        .map_err(|error| SimServerError::Server { message: error.to_string() })?;
    let mut connections = tokio::task::JoinSet::new();
    if let Some(bootstrap) = bootstrap {
        let bootstrap = tokio::net::TcpListener::from_std(bootstrap)
            .map_err(|error| SimServerError::Server { message: error.to_string() })?;
        connections.spawn(bootstrap_loop(bootstrap, Arc::clone(&shared)));
    }
    let mut stopped = shared.stopped();
    let failure = loop {
        shared.check_ready();
        tokio::select! {
            _ = stopped.wait_for(|stop| *stop) => break None,
            () = tokio::time::sleep(shared.poll_interval()) => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    connections.spawn(connection(stream, Arc::clone(&shared)));
                }
                // A connection that failed before it was accepted (reset, say) is its own.
                Err(error) if is_per_connection(&error) => {}
                Err(error) => {
                    shared.stop();
                    break Some(SimServerError::Server { message: error.to_string() });
                }
            },
            // Reaps finished connections so the set does not grow.
            Some(_done) = connections.join_next(), if !connections.is_empty() => {}
        }
    };
    drop(listener);
    connections.shutdown().await;
    if let Some(failure) = failure {
        return Err(failure);
    }
    if shared.died.load(Ordering::Acquire) {
        let requests = shared.profile.die_after_requests.unwrap_or_default();
        return Err(SimServerError::Died { requests });
    }
    Ok(())
}

/// A prefill instance's bootstrap server: each connection asks for one room's KV
/// ([`disaggregation::bootstrap_answer`]), until the server stops.
async fn bootstrap_loop(listener: tokio::net::TcpListener, shared: Arc<Shared>) {
    let mut stopped = shared.stopped();
    let mut asking = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = stopped.wait_for(|stop| *stop) => break,
            accepted = listener.accept() => {
                let Ok((mut stream, _peer)) = accepted else { continue };
                let shared = Arc::clone(&shared);
                asking.spawn(async move {
                    let Some(pd) = shared.profile.disaggregation.as_ref() else { return };
                    let Some(path) = disaggregation::read_request_path(&mut stream).await else {
                        return;
                    };
                    let (status, body) =
                        disaggregation::bootstrap_answer(&shared.rooms, pd, &path).await;
                    disaggregation::write_answer(&mut stream, status, &body).await;
                });
            }
            Some(_done) = asking.join_next(), if !asking.is_empty() => {}
        }
    }
    asking.shutdown().await;
}

/// Whether an `accept` error concerns only the connection being accepted.
fn is_per_connection(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    )
}

/// Serves one connection (one request: every response closes it) until it ends or the server
/// stops, which drops it mid-way.
async fn connection(stream: tokio::net::TcpStream, shared: Arc<Shared>) {
    let mut stopped = shared.stopped();
    let service = {
        let shared = Arc::clone(&shared);
        hyper::service::service_fn(move |request| {
            let shared = Arc::clone(&shared);
            async move { handle(request, &shared).await }
        })
    };
    let serving = hyper::server::conn::http1::Builder::new()
        .keep_alive(false)
        .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
    tokio::select! {
        // A connection broken off (a crash, a client gone) has nobody to tell.
        _served = serving => {}
        _ = stopped.wait_for(|stop| *stop) => {}
    }
}

/// Why a response is not sent: the connection is dropped instead, as a crashed server's would
/// be, so no client mistakes it for an answer.
#[derive(Debug)]
struct Crash;

impl std::fmt::Display for Crash {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("the simulated server broke the connection off")
    }
}

impl std::error::Error for Crash {}

type Answer = Result<Response<Body>, Crash>;

async fn handle(request: Request<Incoming>, shared: &Arc<Shared>) -> Answer {
    let path = request.uri().path().to_owned();
    let method = request.method().clone();
    match (method, path.as_str()) {
        (Method::GET, "/health") => health(shared, false).await,
        (Method::GET, "/health_generate") => health(shared, true).await,
        (Method::GET, "/v1/models") => {
            if shared.check_ready() {
                Ok(respond(200, generate::models_json(&shared.profile.model, shared.created)))
            } else {
                Ok(respond_not_ready())
            }
        }
        (Method::POST, "/v1/completions") => {
            generation(request, shared, Endpoint::Completions).await
        }
        (Method::POST, "/v1/chat/completions") => {
            generation(request, shared, Endpoint::ChatCompletions).await
        }
        (Method::POST, "/generate") => generation(request, shared, Endpoint::Generate).await,
        (Method::GET, "/server_info" | "/get_server_info") => {
            Ok(respond(200, info::server_info_json(&shared.profile)))
        }
        (Method::GET, "/model_info" | "/get_model_info") => {
            Ok(respond(200, info::model_info_json()))
        }
        (_, path) if memory::answers(&shared.profile, path) => {
            memory::handle(request, shared).await
        }
        (_, "/health" | "/health_generate" | "/v1/models" | "/v1/completions")
        | (_, "/v1/chat/completions" | "/generate") => Ok(respond(
            405,
            generate::error_json("method not allowed", "invalid_request_error", 405),
        )),
        _ => {
            Ok(respond(404, generate::error_json("no such endpoint", "invalid_request_error", 404)))
        }
    }
}

/// `/health` answers at once; `/health_generate` generates one token first (a time to first
/// token without noise).
async fn health(shared: &Shared, generates: bool) -> Answer {
    if !shared.check_ready() {
        return Ok(respond(503, String::new()));
    }
    if generates && !shared.sleep_until(Instant::now() + shared.profile.time_to_first_token).await {
        return Err(Crash);
    }
    Ok(respond(200, String::new()))
}

/// The largest request body the simulated server reads: 1 MiB. A longer one is answered 413:
/// one that says so in its `Content-Length` without being read, a chunked one once the limit
/// is passed; so a client cannot make the server allocate what it announces.
pub const MAX_REQUEST_BODY: usize = 1024 * 1024;

/// The body of `request` as text, at most [`MAX_REQUEST_BODY`] bytes, or the status and
/// message of the refusal (413 for a body too long, announced or sent; 400 for one that cannot
/// be read or is not UTF-8). An announced length over the limit is refused before any byte of
/// the body is read.
async fn request_body(request: Request<Incoming>) -> Result<String, (u16, String)> {
    let too_large = || (413, format!("the request's body is longer than {MAX_REQUEST_BODY} bytes"));
    let announced = request
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if announced.is_some_and(|length| length > MAX_REQUEST_BODY as u64) {
        return Err(too_large());
    }
    let body = http_body_util::Limited::new(request.into_body(), MAX_REQUEST_BODY);
    let bytes = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) if error.is::<http_body_util::LengthLimitError>() => return Err(too_large()),
        Err(error) => return Err((400, format!("error reading the request's body: {error}"))),
    };
    String::from_utf8(bytes.to_vec())
        .map_err(|_| (400, "the request's body is not UTF-8".to_owned()))
}

/// A generation request (`/v1/completions`, `/v1/chat/completions`, `/generate`): admitted
/// ([`admit`]), read ([`read_generation`]), let through a disaggregated model's gate
/// ([`pd_bootstrap`]), drawn ([`draw_output`]), then answered when its tokens are due, whole
/// or streamed. Each step's `Break` is the answer to give at once.
async fn generation(
    request: Request<Incoming>,
    shared: &Arc<Shared>,
    endpoint: Endpoint,
) -> Answer {
    let number = match admit(shared) {
        ControlFlow::Continue(number) => number,
        ControlFlow::Break(answer) => return answer,
    };
    let http10 = request.version() == hyper::Version::HTTP_10;
    let (body, parsed) = match read_generation(request, endpoint).await {
        ControlFlow::Continue(read) => read,
        ControlFlow::Break(answer) => return answer,
    };
    let bootstrap = match pd_bootstrap(shared, &body, number) {
        ControlFlow::Continue(bootstrap) => bootstrap,
        ControlFlow::Break(answer) => return answer,
    };
    let (output, factor) = match draw_output(shared, &parsed, number) {
        ControlFlow::Continue(drawn) => drawn,
        ControlFlow::Break(answer) => return answer,
    };
    let profile = &shared.profile;
    let Some(slot) = shared.acquire_slot().await else {
        return Err(Crash);
    };
    let timing = match start_timing(shared, bootstrap.as_ref(), &parsed, factor, number).await {
        ControlFlow::Continue(timing) => timing,
        ControlFlow::Break(answer) => return answer,
    };
    let (in_flight, batch) = InFlight::enter(Arc::clone(&shared.in_flight));
    if profile.monokernel {
        shared.log_routing(batch);
    }
    if parsed.stream {
        return Ok(stream(
            Arc::clone(shared),
            parsed,
            number,
            output,
            timing,
            (slot, in_flight),
            http10,
        ));
    }
    let last = timing.token_deadline(output.len().saturating_sub(1));
    if !shared.sleep_until(last).await {
        return Err(Crash);
    }
    let identity = Identity { endpoint, number, created: shared.created, model: &profile.model };
    let answer = generate::answer_json(identity, parsed.prompt_tokens, &output);
    shared.log_finished(number, parsed.prompt_tokens, &output);
    Ok(respond(200, answer))
}

/// Whether the server takes a generation request: ready, its memory not released, and not
/// past the profile's `die-after-requests` (the server dies instead). `Continue` is the request's
/// number, counted from 1 over every generation request admitted this far.
fn admit(shared: &Shared) -> ControlFlow<Answer, u64> {
    if !shared.check_ready() {
        return ControlFlow::Break(Ok(respond_not_ready()));
    }
    if shared.released.load(Ordering::Acquire) {
        return ControlFlow::Break(Ok(memory::refuse_released()));
    }
    let number = shared.generation_requests.fetch_add(1, Ordering::AcqRel) + 1;
    if let Some(limit) = shared.profile.die_after_requests
        && number > limit
    {
        shared.die(limit);
        return ControlFlow::Break(Err(Crash));
    }
    ControlFlow::Continue(number)
}

/// The body of a generation request and what it asks, or the client's error (413 or 400).
async fn read_generation(
    request: Request<Incoming>,
    endpoint: Endpoint,
) -> ControlFlow<Answer, (String, GenerationRequest)> {
    let body = match request_body(request).await {
        Ok(body) => body,
        Err((status, message)) => {
            return ControlFlow::Break(Ok(respond(
                status,
                generate::error_json(&message, "invalid_request_error", status),
            )));
        }
    };
    match generate::parse_request(endpoint, &body) {
        Ok(parsed) => ControlFlow::Continue((body, parsed)),
        Err(problem) => {
            let message = problem.to_string();
            ControlFlow::Break(Ok(respond(
                400,
                generate::error_json(&message, "invalid_request_error", 400),
            )))
        }
    }
}

/// The bootstrap of a request to an instance of a disaggregated model, which serves only what
/// a PD router sends it (else 400, or the refusal's status); `None` for a plain model.
fn pd_bootstrap(
    shared: &Shared,
    body: &str,
    number: u64,
) -> ControlFlow<Answer, Option<disaggregation::Bootstrap>> {
    let Some(pd) = shared.profile.disaggregation.as_ref() else {
        return ControlFlow::Continue(None);
    };
    let bootstrap = match disaggregation::bootstrap_of(body) {
        Ok(bootstrap) => bootstrap,
        Err(problem) => {
            let message = problem.to_string();
            let body = generate::error_json(&message, "invalid_request_error", 400);
            return ControlFlow::Break(Ok(respond(400, body)));
        }
    };
    if let Some((status, message)) = disaggregation::refusal(pd.mode, bootstrap.as_ref()) {
        shared.log(&format!("[sim-server] request {number}: refused: {message}"));
        let body = generate::error_json(&message, "invalid_request_error", status);
        return ControlFlow::Break(Ok(respond(status, body)));
    }
    ControlFlow::Continue(bootstrap)
}

/// Request `number`'s draws from the profile's seed: a simulated 500 (`error-rate`), else
/// its output and the noise factor of its timing.
fn draw_output(
    shared: &Shared,
    parsed: &GenerationRequest,
    number: u64,
) -> ControlFlow<Answer, (Output, f64)> {
    let profile = &shared.profile;
    let mut rng = SplitMix64::for_request(profile.seed, number);
    if rng.next_f64() < profile.error_rate.value() {
        shared.log(&format!("[sim-server] request {number}: simulated error 500 (error-rate)"));
        let body = generate::error_json("simulated server error (error-rate)", "server_error", 500);
        return ControlFlow::Break(Ok(respond(500, body)));
    }
    let factor = rng.noise_factor(profile.noise.value());
    // A prefill instance makes the first token only; the decode instance the rest.
    let prefill_only = profile.disaggregation.as_ref().is_some_and(|pd| pd.mode == Mode::Prefill);
    let mut output = Output::new(
        answer(profile, &parsed.prompt, parsed.seed).as_deref(),
        if prefill_only { 1 } else { parsed.max_tokens },
        parsed.ignore_eos,
    );
    if let Some(tokens) = profile.eos_after_tokens {
        output = output.ended_after(tokens);
    }
    ControlFlow::Continue((output, factor))
}

/// When request `number`'s tokens are due, from now: the profile's times scaled by the
/// request's noise `factor`, or for a disaggregated model after its prefill or handover
/// ([`disaggregated_start`]; a 500 when the handover failed).
async fn start_timing(
    shared: &Shared,
    bootstrap: Option<&disaggregation::Bootstrap>,
    parsed: &GenerationRequest,
    factor: f64,
    number: u64,
) -> ControlFlow<Answer, Timing> {
    let profile = &shared.profile;
    let timing = Timing {
        start: Instant::now(),
        first_token: profile.time_to_first_token.mul_f64(factor),
        per_token: profile.effective_time_per_output_token().mul_f64(factor),
    };
    let (Some(pd), Some(bootstrap)) = (profile.disaggregation.as_ref(), bootstrap) else {
        return ControlFlow::Continue(timing);
    };
    match disaggregated_start(shared, pd, bootstrap, parsed, &timing).await {
        Ok(Some(start)) => ControlFlow::Continue(start),
        Ok(None) => ControlFlow::Break(Err(Crash)),
        Err(problem) => {
            let message = problem.to_string();
            shared.log(&format!("[sim-server] request {number}: {message}"));
            ControlFlow::Break(Ok(respond(
                500,
                generate::error_json(&message, "server_error", 500),
            )))
        }
    }
}

/// When the tokens of a request of a disaggregated model are due, from now: a prefill instance
/// spends its time to first token on the room (marked arrived, then ready) and answers at
/// once; a decode instance first takes the room's KV from its prefill peer, then streams, its
/// first token at once (the prefill made it). `Ok(None)` when the server stopped meanwhile;
/// `Err` (a message for the client) when the peer did not hand the room over.
async fn disaggregated_start(
    shared: &Shared,
    pd: &Disaggregation,
    bootstrap: &disaggregation::Bootstrap,
    parsed: &GenerationRequest,
    timing: &Timing,
) -> Result<Option<Timing>, disaggregation::HandoverError> {
    let prompt_tokens = u64::try_from(parsed.prompt_tokens).unwrap_or(u64::MAX);
    match pd.mode {
        Mode::Prefill => {
            shared.rooms.arrived(bootstrap.room);
            if !shared.sleep_until(timing.token_deadline(0)).await {
                return Ok(None);
            }
            shared.rooms.ready(bootstrap.room, prompt_tokens);
        }
        Mode::Decode => {
            let mut stopped = shared.stopped();
            tokio::select! {
                _ = stopped.wait_for(|stop| *stop) => return Ok(None),
                fetched = disaggregation::fetch_kv(bootstrap, pd.bootstrap_timeout) => {
                    let tokens = fetched?;
                    shared.log(&pd.transfer_line(bootstrap, tokens));
                }
            }
        }
    }
    Ok(Some(Timing {
        start: Instant::now(),
        first_token: Duration::ZERO,
        per_token: timing.per_token,
    }))
}

/// The answer the model gives a prompt with an `expected:` line: right with the profile's
/// accuracy. Without a seed it is decided once per prompt; with one, once per (prompt, seed):
/// each question is right with the profile's accuracy on every seed, drawn anew for each seed,
/// and two servers of one profile seed draw alike (the same question, the same seed, the same
/// draw).
fn answer(profile: &Profile, prompt: &str, seed: Option<u64>) -> Option<String> {
    let expected = generate::expected_answer(prompt)?;
    let draw_seed = seed.map_or(profile.seed, |seed| rng::seeded(profile.seed, seed));
    if rng::prompt_uniform(draw_seed, prompt) < profile.accuracy.value() {
        Some(expected.to_owned())
    } else {
        Some(generate::wrong_answer(expected))
    }
}

/// When one request's tokens are due.
struct Timing {
    start: Instant,
    first_token: Duration,
    per_token: Duration,
}

impl Timing {
    /// The same spacing with token 0 sent at `sent`: the later tokens are due `per_token`
    /// apart from it. A stream re-anchors on its first token's actual send, so that a late
    /// first wake-up (a loaded machine) does not leave the next tokens overdue and sent in a
    /// burst, which would read as a far shorter TPOT.
    fn anchored(&self, sent: Instant) -> Timing {
        Timing { start: sent, first_token: Duration::ZERO, per_token: self.per_token }
    }

    /// When token `index` (0 is the first) is due. Deadlines are counted from the start, so
    /// late wake-ups do not add up over a long answer.
    fn token_deadline(&self, index: usize) -> Instant {
        let after_first = u32::try_from(index).map_or(Duration::MAX, |index| {
            self.per_token.checked_mul(index).unwrap_or(Duration::MAX)
        });
        let since_start = self.first_token.saturating_add(after_first);
        self.start.checked_add(since_start).unwrap_or(self.start)
    }
}

/// The response that streams `output` as Server-Sent Events, one HTTP chunk per event (the
/// whole body until the connection closes, for an HTTP/1.0 client), from a task of its own
/// that holds the request's slot and batch place until the stream ends. A stream the server
/// stops in is broken off (the body fails), so no client mistakes a cut stream for a whole one.
fn stream(
    shared: Arc<Shared>,
    parsed: GenerationRequest,
    number: u64,
    output: Output,
    timing: Timing,
    held: (tokio::sync::OwnedSemaphorePermit, InFlight),
    http10: bool,
) -> Response<Body> {
    let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, Crash>>(4);
    tokio::spawn(async move {
        let _held = held;
        let profile = &shared.profile;
        let endpoint = parsed.endpoint;
        let identity =
            Identity { endpoint, number, created: shared.created, model: &profile.model };
        let event = |payload: String| Ok(Frame::data(Bytes::from(format!("data: {payload}\n\n"))));
        let mut timing = timing;
        for index in 0..output.len() {
            if !shared.sleep_until(timing.token_deadline(index)).await {
                let _broken = sender.send(Err(Crash)).await;
                return;
            }
            if index == 0 {
                timing = timing.anchored(Instant::now());
            }
            let chunk = generate::chunk_json(identity, parsed.prompt_tokens, &output, index);
            if sender.send(event(chunk)).await.is_err() {
                return;
            }
        }
        if parsed.include_usage {
            let usage = generate::usage_chunk_json(identity, parsed.prompt_tokens, &output);
            if sender.send(event(usage)).await.is_err() {
                return;
            }
        }
        if sender.send(event("[DONE]".to_owned())).await.is_ok() {
            shared.log_finished(number, parsed.prompt_tokens, &output);
        }
    });
    let mut response = Response::new(Body::Stream(receiver));
    let headers = response.headers_mut();
    headers.insert(hyper::header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(hyper::header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
    if http10 {
        *response.version_mut() = hyper::Version::HTTP_10;
    }
    response
}

/// A response body: the whole text at once, or a stream of events from a request's task.
enum Body {
    Full(Option<Bytes>),
    Stream(tokio::sync::mpsc::Receiver<Result<Frame<Bytes>, Crash>>),
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = Crash;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        context: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, Crash>>> {
        match self.get_mut() {
            Body::Full(bytes) => {
                std::task::Poll::Ready(bytes.take().map(|bytes| Ok(Frame::data(bytes))))
            }
            Body::Stream(receiver) => receiver.poll_recv(context),
        }
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        match self {
            Body::Full(bytes) => hyper::body::SizeHint::with_exact(
                bytes.as_ref().map_or(0, |bytes| bytes.len() as u64),
            ),
            Body::Stream(_) => hyper::body::SizeHint::default(),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Body::Full(None))
    }
}

fn respond(status: u16, body: String) -> Response<Body> {
    let content_type = if body.is_empty() { "text/plain" } else { "application/json" };
    let mut response = Response::new(Body::Full(Some(Bytes::from(body))));
    *response.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    headers.insert(hyper::header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
    response
}

fn respond_not_ready() -> Response<Body> {
    respond(503, generate::error_json("the server is not ready", "service_unavailable", 503))
}
