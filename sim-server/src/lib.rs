//! The simulated server: a real OpenAI-compatible HTTP server on a real socket, the stand-in
//! for an SGLang server so the runner, its tests and the demo run without a GPU.
//!
//! Its speed (time to first token, time per output token), run-to-run noise, failures (a slow
//! start, never healthy, dying after some requests, 500s), answer accuracy and monokernel
//! routing lines come from a [`Profile`]. [`serve`] starts it on a socket and returns a
//! [`RunningServer`]; [`run`] blocks until it dies, for `prgate sim-server`, whose command line
//! is the binary's. `docs/sim-server.md` is the reference of the profile and the endpoints.
//! A crate of its own: a test double the runner, its tests and the demo use, never part of
//! the runner that runs on a GPU node.
//!
//! Every request is handled on its own thread with its own clock, like a server with spare
//! capacity, unless the profile's `max-concurrency` queues them. Every response closes its
//! connection (`Connection: close`), so a stopped or dead server leaves no connection open.

mod generate;
mod profile;
pub mod rng;
#[cfg(test)]
mod tests;

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, Once, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime};

use tiny_http::{HTTPVersion, Header, Method, Request, Response};

use generate::{Endpoint, GenerationRequest, Identity, Output};
pub use profile::{
    CoefficientOfVariation, DEFAULT_PROFILE, InvalidNumber, Probability, Profile, ProfileError,
};
use rng::SplitMix64;

/// Starts a simulated server on `addr` and returns at once; port 0 binds a free port, which
/// [`RunningServer::addr`] reports. The server runs until it is stopped, dropped or dies.
pub fn serve(profile: Profile, addr: SocketAddr) -> Result<RunningServer, SimServerError> {
    let log = open_log(profile.log_file.as_deref())?;
    let listener =
        TcpListener::bind(addr).map_err(|source| SimServerError::Bind { addr, source })?;
    let local = listener.local_addr().map_err(|source| SimServerError::Bind { addr, source })?;
    let server = tiny_http::Server::from_listener(listener, None)
        .map_err(|error| SimServerError::Server { message: error.to_string() })?;
    let shared = Arc::new(Shared::new(profile, log));
    shared.log(&format!(
        "[sim-server] listening on http://{local}, model {}, HIP_VISIBLE_DEVICES={}",
        shared.profile.model,
        std::env::var("HIP_VISIBLE_DEVICES").unwrap_or_default()
    ));
    if shared.profile.never_healthy {
        shared.log("[sim-server] never healthy, as the profile asks");
    }
    shared.check_ready();
    let thread = thread::Builder::new()
        .name("sim-server".to_owned())
        .spawn({
            let shared = Arc::clone(&shared);
            move || serve_loop(server, &shared)
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

/// What a serve loop and its request threads share.
struct Shared {
    profile: Profile,
    started: Instant,
    created: u64,
    ready: AtomicBool,
    ready_once: Once,
    stopping: AtomicBool,
    died: AtomicBool,
    generation_requests: AtomicU64,
    in_flight: AtomicUsize,
    slots: Slots,
    log: Mutex<Box<dyn Write + Send>>,
}

impl Shared {
    fn new(profile: Profile, log: Box<dyn Write + Send>) -> Shared {
        let created = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        let slots = Slots::new(profile.max_concurrency.map(usize::from));
        Shared {
            profile,
            started: Instant::now(),
            created,
            ready: AtomicBool::new(false),
            ready_once: Once::new(),
            stopping: AtomicBool::new(false),
            died: AtomicBool::new(false),
            generation_requests: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            slots,
            log: Mutex::new(log),
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

    /// How long the serve loop may wait for a request before it must look again.
    fn poll_interval(&self) -> Duration {
        if self.ready.load(Ordering::Acquire) || self.profile.never_healthy {
            return POLL;
        }
        let until_ready = self.profile.startup_delay.saturating_sub(self.started.elapsed());
        until_ready.clamp(Duration::from_millis(1), POLL)
    }

    fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        self.slots.freed.notify_all();
    }

    fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
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
    fn sleep_until(&self, deadline: Instant) -> bool {
        loop {
            if self.is_stopping() {
                return false;
            }
            let now = Instant::now();
            if now >= deadline {
                return true;
            }
            thread::sleep((deadline - now).min(POLL));
        }
    }
}

/// The `max-concurrency` queue: a counting semaphore.
struct Slots {
    limit: Option<usize>,
    used: Mutex<usize>,
    freed: Condvar,
}

/// A slot held by one running request.
struct Slot<'a> {
    slots: &'a Slots,
}

impl Slots {
    fn new(limit: Option<usize>) -> Slots {
        Slots { limit, used: Mutex::new(0), freed: Condvar::new() }
    }

    /// Waits for a free slot; `None` when the server started stopping meanwhile.
    fn acquire<'a>(&'a self, stopping: &AtomicBool) -> Option<Slot<'a>> {
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if stopping.load(Ordering::Acquire) {
                return None;
            }
            if self.limit.is_none_or(|limit| *used < limit) {
                *used += 1;
                return Some(Slot { slots: self });
            }
            used = self.freed.wait_timeout(used, POLL).unwrap_or_else(PoisonError::into_inner).0;
        }
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut used = self.slots.used.lock().unwrap_or_else(PoisonError::into_inner);
        *used -= 1;
        self.slots.freed.notify_one();
    }
}

/// A request counted in the decode batch while it lives.
struct InFlight<'a> {
    count: &'a AtomicUsize,
}

impl<'a> InFlight<'a> {
    /// Enters the batch; returns the guard and the batch's size with this request.
    fn enter(count: &'a AtomicUsize) -> (InFlight<'a>, usize) {
        let batch = count.fetch_add(1, Ordering::AcqRel) + 1;
        (InFlight { count }, batch)
    }
}

impl Drop for InFlight<'_> {
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

fn serve_loop(server: tiny_http::Server, shared: &Arc<Shared>) -> Result<(), SimServerError> {
    while !shared.is_stopping() {
        shared.check_ready();
        match server.recv_timeout(shared.poll_interval()) {
            Ok(Some(request)) => dispatch(request, shared),
            Ok(None) => {}
            Err(error) => {
                shared.stop();
                return Err(SimServerError::Server { message: error.to_string() });
            }
        }
    }
    // Dropping the server closes the listening socket, on tiny_http's accept thread, a moment
    // later; requests still queued in it get a 500.
    let addr = server.server_addr().to_ip();
    drop(server);
    if let Some(addr) = addr {
        wait_until_closed(addr);
    }
    if shared.died.load(Ordering::Acquire) {
        let requests = shared.profile.die_after_requests.unwrap_or_default();
        return Err(SimServerError::Died { requests });
    }
    Ok(())
}

/// Waits until nothing listens on `addr` any more, for a second at most, so that a server
/// that has stopped has stopped listening.
fn wait_until_closed(addr: SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline {
        match TcpStream::connect_timeout(&addr, POLL) {
            Ok(_) => thread::sleep(Duration::from_millis(2)),
            Err(_) => return,
        }
    }
}

/// Handles `request` on a thread of its own.
fn dispatch(request: Request, shared: &Arc<Shared>) {
    let for_thread = Arc::clone(shared);
    let spawned = thread::Builder::new()
        .name("sim-server-request".to_owned())
        .spawn(move || handle(request, &for_thread));
    if let Err(error) = spawned {
        // The request went down with the closure: tiny_http answers it 500.
        shared.log(&format!("[sim-server] cannot start a request thread: {error}"));
    }
}

fn handle(request: Request, shared: &Shared) {
    let path = request.url().split('?').next().unwrap_or_default().to_owned();
    let method = request.method().clone();
    match (method, path.as_str()) {
        (Method::Get, "/health") => health(request, shared, false),
        (Method::Get, "/health_generate") => health(request, shared, true),
        (Method::Get, "/v1/models") => {
            if shared.check_ready() {
                let body = generate::models_json(&shared.profile.model, shared.created);
                respond(request, 200, &body);
            } else {
                respond_not_ready(request);
            }
        }
        (Method::Post, "/v1/completions") => generation(request, shared, Endpoint::Completions),
        (Method::Post, "/v1/chat/completions") => {
            generation(request, shared, Endpoint::ChatCompletions);
        }
        (Method::Post, "/generate") => generation(request, shared, Endpoint::Generate),
        (_, "/health" | "/health_generate" | "/v1/models" | "/v1/completions")
        | (_, "/v1/chat/completions" | "/generate") => {
            let body = generate::error_json("method not allowed", "invalid_request_error", 405);
            respond(request, 405, &body);
        }
        _ => {
            let body = generate::error_json("no such endpoint", "invalid_request_error", 404);
            respond(request, 404, &body);
        }
    }
}

/// `/health` answers at once; `/health_generate` generates one token first (a time to first
/// token without noise).
fn health(request: Request, shared: &Shared, generates: bool) {
    if !shared.check_ready() {
        respond(request, 503, "");
        return;
    }
    if generates && !shared.sleep_until(Instant::now() + shared.profile.time_to_first_token) {
        break_connection(request);
        return;
    }
    respond(request, 200, "");
}

/// The largest request body the simulated server reads: 1 MiB. A longer one is answered 413:
/// one that says so in its `Content-Length` without being read (`refuse_unread`), a chunked
/// one once the limit is passed; so a client cannot make the server allocate what it announces.
pub const MAX_REQUEST_BODY: usize = 1024 * 1024;

/// The body of `request` as text, at most [`MAX_REQUEST_BODY`] bytes, or the status and
/// message of the refusal (413 for a body too long, announced or sent; 400 for one that cannot
/// be read or is not UTF-8).
fn request_body(request: &mut Request) -> Result<String, (u16, String)> {
    let too_large = || (413, format!("the request's body is longer than {MAX_REQUEST_BODY} bytes"));
    let mut bytes = Vec::new();
    let limit = u64::try_from(MAX_REQUEST_BODY).unwrap_or(u64::MAX).saturating_add(1);
    request
        .as_reader()
        .take(limit)
        .read_to_end(&mut bytes)
        .map_err(|error| (400, format!("error reading the request's body: {error}")))?;
    if bytes.len() > MAX_REQUEST_BODY {
        return Err(too_large());
    }
    String::from_utf8(bytes).map_err(|_| (400, "the request's body is not UTF-8".to_owned()))
}

/// Answers 413 to a request that announces a body over [`MAX_REQUEST_BODY`], without reading
/// the body, and abandons its connection. Dropping such a request is not an option: tiny_http
/// 0.12 drains an unread body into a buffer of the announced size (`vec![0; remaining]` in
/// `EqualReader`'s `drop`, tiny-http pull request 290), which aborts the process for a
/// `Content-Length` of 99999999999. So the connection is taken over (`upgrade`) and forgotten:
/// its socket and buffers (a few KiB) stay until the server exits.
fn refuse_unread(request: Request) {
    let message = format!("the request's body is longer than {MAX_REQUEST_BODY} bytes");
    let response =
        Response::from_string(generate::error_json(&message, "invalid_request_error", 413))
            .with_status_code(413)
            .with_header(header("Content-Type", "application/json"));
    let connection = request.upgrade("prgate-refused", response);
    std::mem::forget(connection);
}

fn generation(mut request: Request, shared: &Shared, endpoint: Endpoint) {
    if !shared.check_ready() {
        respond_not_ready(request);
        return;
    }
    let number = shared.generation_requests.fetch_add(1, Ordering::AcqRel) + 1;
    if let Some(limit) = shared.profile.die_after_requests
        && number > limit
    {
        shared.die(limit);
        break_connection(request);
        return;
    }
    if request.body_length().is_some_and(|length| length > MAX_REQUEST_BODY) {
        refuse_unread(request);
        return;
    }
    let body = match request_body(&mut request) {
        Ok(body) => body,
        Err((status, message)) => {
            let body = generate::error_json(&message, "invalid_request_error", status);
            respond(request, status, &body);
            return;
        }
    };
    let parsed = match generate::parse_request(endpoint, &body) {
        Ok(parsed) => parsed,
        Err(message) => {
            respond(request, 400, &generate::error_json(&message, "invalid_request_error", 400));
            return;
        }
    };
    let profile = &shared.profile;
    let mut rng = SplitMix64::for_request(profile.seed, number);
    if rng.next_f64() < profile.error_rate.value() {
        shared.log(&format!("[sim-server] request {number}: simulated error 500 (error-rate)"));
        let body = generate::error_json("simulated server error (error-rate)", "server_error", 500);
        respond(request, 500, &body);
        return;
    }
    let factor = rng.noise_factor(profile.noise.value());
    let output = Output::new(
        answer(profile, &parsed.prompt).as_deref(),
        parsed.max_tokens,
        parsed.ignore_eos,
    );

    let Some(_slot) = shared.slots.acquire(&shared.stopping) else {
        break_connection(request);
        return;
    };
    let timing = Timing {
        start: Instant::now(),
        first_token: profile.time_to_first_token.mul_f64(factor),
        per_token: profile.effective_time_per_output_token().mul_f64(factor),
    };
    let (_in_flight, batch) = InFlight::enter(&shared.in_flight);
    if profile.monokernel {
        shared.log_routing(batch);
    }
    let identity = Identity { endpoint, number, created: shared.created, model: &profile.model };
    let finished = if parsed.stream {
        stream(request, shared, &parsed, identity, &output, &timing)
    } else if shared.sleep_until(timing.token_deadline(output.len().saturating_sub(1))) {
        respond(request, 200, &generate::answer_json(identity, parsed.prompt_tokens, &output));
        true
    } else {
        break_connection(request);
        false
    };
    if finished {
        shared.log(&format!(
            "[sim-server] request {number}: prompt_tokens={} completion_tokens={} \
             finish_reason={}",
            parsed.prompt_tokens,
            output.len(),
            output.finish_reason()
        ));
    }
}

/// The answer the model gives a prompt with an `expected:` line: right with the profile's
/// accuracy, decided once per prompt.
fn answer(profile: &Profile, prompt: &str) -> Option<String> {
    let expected = generate::expected_answer(prompt)?;
    if rng::prompt_uniform(profile.seed, prompt) < profile.accuracy.value() {
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

/// Streams `output` as Server-Sent Events; false when the stream was broken off (the server
/// stopping) or the client went away.
fn stream(
    request: Request,
    shared: &Shared,
    parsed: &GenerationRequest,
    identity: Identity<'_>,
    output: &Output,
    timing: &Timing,
) -> bool {
    let chunked = *request.http_version() != HTTPVersion(1, 0);
    let Ok(mut events) = EventStream::start(request.into_writer(), chunked) else {
        return false;
    };
    for index in 0..output.len() {
        if !shared.sleep_until(timing.token_deadline(index)) {
            events.break_off();
            return false;
        }
        if events
            .send(&generate::chunk_json(identity, parsed.prompt_tokens, output, index))
            .is_err()
        {
            return false;
        }
    }
    let usage = parsed
        .include_usage
        .then(|| generate::usage_chunk_json(identity, parsed.prompt_tokens, output));
    let ended = usage.iter().try_for_each(|usage| events.send(usage));
    ended.and_then(|()| events.send("[DONE]")).and_then(|()| events.finish()).is_ok()
}

/// A response of Server-Sent Events written straight to the socket, one flushed HTTP chunk
/// per event (tiny_http's own chunked writer would hold small events back in its buffer).
struct EventStream {
    writer: Box<dyn Write + Send>,
    chunked: bool,
}

impl EventStream {
    fn start(mut writer: Box<dyn Write + Send>, chunked: bool) -> io::Result<EventStream> {
        let status = if chunked { "HTTP/1.1 200 OK" } else { "HTTP/1.0 200 OK" };
        let framing = if chunked { "Transfer-Encoding: chunked\r\n" } else { "" };
        write!(
            writer,
            "{status}\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
             Connection: close\r\n{framing}\r\n"
        )?;
        writer.flush()?;
        Ok(EventStream { writer, chunked })
    }

    /// Sends `data: <payload>` and flushes it.
    fn send(&mut self, payload: &str) -> io::Result<()> {
        let event = format!("data: {payload}\n\n");
        if self.chunked {
            write!(self.writer, "{:x}\r\n{event}\r\n", event.len())?;
        } else {
            self.writer.write_all(event.as_bytes())?;
        }
        self.writer.flush()
    }

    fn finish(mut self) -> io::Result<()> {
        if self.chunked {
            self.writer.write_all(b"0\r\n\r\n")?;
        }
        self.writer.flush()
    }

    /// Ends the stream as a crash would: the client's HTTP parser sees a broken chunk, not an
    /// end, so no client mistakes a cut stream for a whole one.
    fn break_off(mut self) {
        if self.chunked {
            let _broken = self.writer.write_all(b"broken\r\n").and_then(|()| self.writer.flush());
        }
    }
}

/// Answers `request` with bytes that are no HTTP response, so the client fails as if the
/// connection had been reset (tiny_http cannot reset a socket) and closes it.
fn break_connection(request: Request) {
    let mut writer = request.into_writer();
    let _broken = writer.write_all(b"SIMULATED-CRASH\r\n\r\n").and_then(|()| writer.flush());
}

fn respond(request: Request, status: u16, body: &str) {
    let content_type = if body.is_empty() { "text/plain" } else { "application/json" };
    let response = Response::from_string(body)
        .with_status_code(status)
        .with_header(header("Content-Type", content_type))
        .with_header(header("Connection", "close"));
    // A client that went away has nobody to tell.
    let _unanswered = request.respond(response);
}

fn respond_not_ready(request: Request) {
    let body = generate::error_json("the server is not ready", "service_unavailable", 503);
    respond(request, 503, &body);
}

fn header(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes())
        .expect("the server's own header names and values are ASCII")
}
