//! Prefill/decode disaggregation as SGLang's PD router drives it: a simulated server started as a
//! prefill or a decode instance (the profile's `[disaggregation]` table, SGLang's
//! `--disaggregation-mode`).
//!
//! The router (sglang-router in PD mode, checked against 0.3.2: `docs/topology.md`) sends the
//! same request to one prefill and one decode instance at once, with `bootstrap_host` (the
//! prefill's host), `bootstrap_port` (the number given after `--prefill URL`) and
//! `bootstrap_room` (a random 64-bit integer, equal on both). Here:
//!
//! - a **prefill** instance takes the room, spends its time to first token on it, marks it
//!   ready and answers one token; it also runs the **bootstrap server** on its
//!   `bootstrap-port`, where a decode instance asks for a room's KV cache (`GET /kv/<room>`):
//!   the answer waits until the room is ready, for at most `bootstrap-timeout-ms`, and is a 404
//!   for a room this prefill never saw;
//! - a **decode** instance serves a request only once the prefill at its bootstrap address has
//!   handed the room over; then it streams its tokens, the first at once (the prefill made it),
//!   each next one `tpot-ms` later. A request without the three fields, or whose room its
//!   prefill peer has not seen, fails cleanly: a 400 or a 500 with OpenAI's error body, never
//!   a hung or cut stream.
//!
//! Both log the transport line the runner's required evidence reads (`transfer-backend=...
//! transport=...`): once at start, and on the decode side once per room handed over.
//!
//! What it leaves to the parent module: the HTTP server, the timing of tokens and the log.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// The bootstrap port SGLang's prefill uses when it is not told (`--disaggregation-bootstrap-port`).
pub const DEFAULT_BOOTSTRAP_PORT: u16 = 8998;
/// How long a decode instance waits for its prefill peer to hand a room over, by default.
pub const DEFAULT_BOOTSTRAP_TIMEOUT: Duration = Duration::from_secs(10);
/// How many rooms a prefill instance remembers (the oldest are forgotten first).
const MAX_ROOMS: usize = 65_536;
/// The longest bootstrap answer a decode instance reads.
const MAX_BOOTSTRAP_ANSWER: u64 = 64 * 1024;

/// Which half of a disaggregated model a server is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Computes the prompt's KV cache and the first token, and hands the KV to a decode
    /// instance through its bootstrap server.
    Prefill,
    /// Takes the KV from a prefill instance and generates the rest.
    Decode,
}

impl std::str::FromStr for Mode {
    type Err = NotAMode;

    /// `prefill` or `decode`, as SGLang's `--disaggregation-mode` takes them.
    fn from_str(text: &str) -> Result<Mode, NotAMode> {
        match text {
            "prefill" => Ok(Mode::Prefill),
            "decode" => Ok(Mode::Decode),
            _ => Err(NotAMode { text: text.to_owned() }),
        }
    }
}

/// A word that is not a [`Mode`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a disaggregation mode: prefill or decode")]
pub struct NotAMode {
    pub text: String,
}

/// A server's part in a disaggregated model: the profile's `[disaggregation]` table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "DisaggregationFile")]
pub struct Disaggregation {
    /// `mode`: `prefill` or `decode`.
    pub mode: Mode,
    /// `bootstrap-port`: where a prefill instance's bootstrap server listens (on the server's
    /// own address). Not used by a decode instance, which is told its peer's by each request.
    pub bootstrap_port: u16,
    /// `transfer-backend`: the KV transfer library the server reports (`mooncake`, `nixl`,
    /// `mori`), as SGLang's `--disaggregation-transfer-backend` names it.
    pub transfer_backend: String,
    /// `transport`: the transport the backend ended up on (`rdma`, or `tcp` when the RDMA path
    /// is missing and it fell back): what a run's required evidence tells apart.
    pub transport: String,
    /// `bootstrap-timeout-ms`: how long a decode instance waits for its room.
    pub bootstrap_timeout: Duration,
}

/// The `[disaggregation]` table as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct DisaggregationFile {
    mode: Mode,
    bootstrap_port: Option<u16>,
    transfer_backend: Option<String>,
    transport: Option<String>,
    bootstrap_timeout_ms: Option<u64>,
}

/// A `[disaggregation]` value that cannot be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'disaggregation.{key}': {problem}")]
pub struct DisaggregationError {
    key: &'static str,
    problem: String,
}

impl TryFrom<DisaggregationFile> for Disaggregation {
    type Error = DisaggregationError;

    fn try_from(file: DisaggregationFile) -> Result<Disaggregation, DisaggregationError> {
        let mut disaggregation = Disaggregation::new(file.mode);
        disaggregation.set(file.bootstrap_port, file.transfer_backend, file.transport)?;
        if let Some(ms) = file.bootstrap_timeout_ms {
            disaggregation.bootstrap_timeout = Duration::from_millis(ms);
        }
        Ok(disaggregation)
    }
}

impl DisaggregationError {
    /// The key of the `[disaggregation]` table, as written in a profile file.
    pub fn key(&self) -> &str {
        self.key
    }

    /// What is wrong with its value.
    pub fn problem(&self) -> &str {
        &self.problem
    }
}

impl Disaggregation {
    /// A server of `mode` with every other setting at its default.
    pub fn new(mode: Mode) -> Disaggregation {
        Disaggregation {
            mode,
            bootstrap_port: DEFAULT_BOOTSTRAP_PORT,
            transfer_backend: "mooncake".to_owned(),
            transport: "rdma".to_owned(),
            bootstrap_timeout: DEFAULT_BOOTSTRAP_TIMEOUT,
        }
    }

    /// Sets the values given, each checked as its key in a profile file is: a bootstrap port
    /// that is a port (not 0), a transfer backend and a transport that are one word each.
    pub fn set(
        &mut self,
        bootstrap_port: Option<u16>,
        transfer_backend: Option<String>,
        transport: Option<String>,
    ) -> Result<(), DisaggregationError> {
        if let Some(port) = bootstrap_port {
            if port == 0 {
                let problem = "0 is not a port".to_owned();
                return Err(DisaggregationError { key: "bootstrap-port", problem });
            }
            self.bootstrap_port = port;
        }
        if let Some(backend) = transfer_backend {
            self.transfer_backend = word("transfer-backend", backend)?;
        }
        if let Some(transport) = transport {
            self.transport = word("transport", transport)?;
        }
        Ok(())
    }

    /// The line logged at start: the mode, the transfer backend and its transport.
    pub(crate) fn start_line(&self, listening: SocketAddr) -> String {
        let mode = match self.mode {
            Mode::Prefill => "prefill",
            Mode::Decode => "decode",
        };
        let mut line = format!(
            "[disaggregation] mode={mode} transfer-backend={} transport={}",
            self.transfer_backend, self.transport
        );
        if self.mode == Mode::Prefill {
            let bootstrap = SocketAddr::new(listening.ip(), self.bootstrap_port);
            line.push_str(&format!(" bootstrap=http://{bootstrap}"));
        }
        line
    }

    /// The line a decode instance logs when a room's KV arrived.
    pub(crate) fn transfer_line(&self, bootstrap: &Bootstrap, prompt_tokens: u64) -> String {
        format!(
            "[disaggregation] room={} kv from {}:{} transfer-backend={} transport={} prompt_tokens={prompt_tokens}",
            bootstrap.room, bootstrap.host, bootstrap.port, self.transfer_backend, self.transport
        )
    }
}

/// The three fields the PD router adds to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Bootstrap {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) room: u64,
}

/// The bootstrap fields of a request's JSON `body`: `None` when it has none of them; an error
/// (a message for the client) when they are partial or of the wrong type.
pub(crate) fn bootstrap_of(body: &str) -> Result<Option<Bootstrap>, BadBootstrap> {
    let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(body) else {
        return Ok(None);
    };
    let (host, port, room) =
        (fields.get("bootstrap_host"), fields.get("bootstrap_port"), fields.get("bootstrap_room"));
    if host.is_none() && port.is_none() && room.is_none() {
        return Ok(None);
    }
    let host = host
        .and_then(Value::as_str)
        .filter(|host| !host.is_empty() && !host.contains(['/', ' ', '@']))
        .ok_or(BadBootstrap::Host)?;
    let port = port
        .and_then(Value::as_u64)
        .and_then(|port| u16::try_from(port).ok())
        .filter(|port| *port > 0)
        .ok_or(BadBootstrap::Port)?;
    let room = room.and_then(Value::as_u64).ok_or(BadBootstrap::Room)?;
    Ok(Some(Bootstrap { host: host.to_owned(), port, room }))
}

/// Bootstrap fields of a request that are partial or of the wrong type (a 400).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BadBootstrap {
    #[error("bootstrap_host must be the prefill's host name or address")]
    Host,
    #[error(
        "bootstrap_port must be the prefill's bootstrap port (the router's --prefill URL PORT)"
    )]
    Port,
    #[error("bootstrap_room must be an integer 0 to 2^64-1")]
    Room,
}

/// Why a request is not served by an instance of a disaggregated model: the status and message
/// of the clean failure the client gets.
pub(crate) fn refusal(mode: Mode, bootstrap: Option<&Bootstrap>) -> Option<(u16, String)> {
    match (mode, bootstrap) {
        (_, Some(_)) => None,
        (Mode::Prefill, None) => Some((
            400,
            "this is a prefill instance: it serves only requests a PD router sent, with bootstrap_host, bootstrap_port and bootstrap_room".to_owned(),
        )),
        (Mode::Decode, None) => Some((
            400,
            "this is a decode instance: it serves only requests a PD router sent, with bootstrap_host, bootstrap_port and bootstrap_room".to_owned(),
        )),
    }
}

/// What a prefill instance knows of the rooms it was sent.
#[derive(Debug, Default)]
pub(crate) struct Rooms {
    state: Mutex<RoomTable>,
    changed: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct RoomTable {
    /// Each room's prompt tokens once its KV is ready; `None` while it is being prefilled.
    rooms: HashMap<u64, Option<u64>>,
    /// The rooms in the order they came, to forget the oldest.
    order: VecDeque<u64>,
}

/// What a bootstrap request for a room finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RoomAnswer {
    /// Its KV is ready: the prompt's tokens.
    Ready { prompt_tokens: u64 },
    /// The prefill never got it (within the wait).
    Unseen,
    /// It came, but its prefill did not end within the wait.
    NotReady,
}

impl Rooms {
    /// A prefill began on `room`.
    pub(crate) fn arrived(&self, room: u64) {
        self.set(room, None);
    }

    /// The prefill of `room` ended: its KV can be handed over.
    pub(crate) fn ready(&self, room: u64, prompt_tokens: u64) {
        self.set(room, Some(prompt_tokens));
    }

    fn set(&self, room: u64, state: Option<u64>) {
        {
            let mut table = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            if table.rooms.insert(room, state).is_none() {
                table.order.push_back(room);
                while table.order.len() > MAX_ROOMS {
                    if let Some(oldest) = table.order.pop_front() {
                        table.rooms.remove(&oldest);
                    }
                }
            }
        }
        self.changed.notify_waiters();
    }

    /// Waits until `room` is ready, for at most `wait`.
    pub(crate) async fn wait_ready(&self, room: u64, wait: Duration) -> RoomAnswer {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let seen = {
                let table = self.state.lock().unwrap_or_else(PoisonError::into_inner);
                table.rooms.get(&room).copied()
            };
            if let Some(Some(prompt_tokens)) = seen {
                return RoomAnswer::Ready { prompt_tokens };
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return match seen {
                    None => RoomAnswer::Unseen,
                    Some(_) => RoomAnswer::NotReady,
                };
            }
        }
    }
}

/// The bootstrap server's answer to `path` (`/kv/<room>`, `/health`): a status and a JSON body.
pub(crate) async fn bootstrap_answer(
    rooms: &Rooms,
    settings: &Disaggregation,
    path: &str,
) -> (u16, String) {
    if path == "/health" {
        return (200, String::new());
    }
    // `/kv/<room>?wait_ms=<ms>`: the asker says how long it waits, this side caps it.
    let (endpoint, query) = path.split_once('?').unwrap_or((path, ""));
    let Some(room) = endpoint.strip_prefix("/kv/").and_then(|room| room.parse::<u64>().ok()) else {
        return (404, json!({"error": format!("no such bootstrap endpoint: {path}")}).to_string());
    };
    let asked = query
        .strip_prefix("wait_ms=")
        .and_then(|ms| ms.parse::<u64>().ok())
        .map_or(settings.bootstrap_timeout, Duration::from_millis);
    let wait = asked.min(settings.bootstrap_timeout);
    match rooms.wait_ready(room, wait).await {
        RoomAnswer::Ready { prompt_tokens } => (
            200,
            json!({
                "room": room,
                "prompt_tokens": prompt_tokens,
                "transfer_backend": settings.transfer_backend,
                "transport": settings.transport,
            })
            .to_string(),
        ),
        RoomAnswer::Unseen => (
            404,
            json!({"error": format!("room {room} was never sent to this prefill instance")})
                .to_string(),
        ),
        RoomAnswer::NotReady => (
            503,
            json!({"error": format!(
                "the prefill of room {room} did not end within {} ms",
                wait.as_millis()
            )})
            .to_string(),
        ),
    }
}

/// Asks the prefill at `bootstrap` for its room's KV (a decode instance's side), waiting at
/// most `wait` for the room (and two seconds more for the answer): the room's prompt tokens,
/// or why not (a message naming the peer).
pub(crate) async fn fetch_kv(bootstrap: &Bootstrap, wait: Duration) -> Result<u64, HandoverError> {
    let peer = format!("{}:{}", bootstrap.host, bootstrap.port);
    let failed =
        |problem: Handover| HandoverError { peer: peer.clone(), room: bootstrap.room, problem };
    let started = Instant::now();
    let exchange = async {
        let mut stream =
            tokio::net::TcpStream::connect(&peer).await.map_err(Handover::Unreachable)?;
        let request = format!(
            "GET /kv/{}?wait_ms={} HTTP/1.1\r\nHost: {peer}\r\nConnection: close\r\n\r\n",
            bootstrap.room,
            wait.as_millis()
        );
        stream.write_all(request.as_bytes()).await.map_err(Handover::Write)?;
        let mut answer = Vec::new();
        stream.take(MAX_BOOTSTRAP_ANSWER).read_to_end(&mut answer).await.map_err(Handover::Read)?;
        Ok::<Vec<u8>, Handover>(answer)
    };
    let answer = tokio::time::timeout(wait + Duration::from_secs(2), exchange)
        .await
        .map_err(|_| failed(Handover::Timeout { elapsed: started.elapsed() }))?
        .map_err(failed)?;
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|code| code.parse::<u16>().ok());
    let body: Value = serde_json::from_str(body.trim()).unwrap_or(Value::Null);
    match status {
        Some(200) => body
            .get("prompt_tokens")
            .and_then(Value::as_u64)
            .ok_or_else(|| failed(Handover::NoPromptTokens)),
        Some(code) => {
            let why = body.get("error").and_then(Value::as_str).unwrap_or("no reason given");
            Err(failed(Handover::Refused { code, why: why.to_owned() }))
        }
        None => Err(failed(Handover::NotHttp)),
    }
}

/// Why a decode instance did not get its room's KV from the prefill peer (a 500).
#[derive(Debug, thiserror::Error)]
#[error("the prefill instance at {peer} did not hand over room {room}: {problem}")]
pub(crate) struct HandoverError {
    peer: String,
    room: u64,
    problem: Handover,
}

/// What went wrong in a handover, as the peer's bootstrap server showed it.
#[derive(Debug, thiserror::Error)]
enum Handover {
    #[error("cannot reach its bootstrap server: {0}")]
    Unreachable(std::io::Error),
    #[error("writing to its bootstrap server: {0}")]
    Write(std::io::Error),
    #[error("reading its bootstrap server's answer: {0}")]
    Read(std::io::Error),
    #[error("no answer within {elapsed:?}")]
    Timeout { elapsed: Duration },
    #[error("its bootstrap server's answer has no prompt_tokens")]
    NoPromptTokens,
    #[error("its bootstrap server answered {code}: {why}")]
    Refused { code: u16, why: String },
    #[error("its bootstrap server's answer is not HTTP")]
    NotHttp,
}

/// Reads one HTTP request's path from a bootstrap connection (its method is not checked: the
/// endpoints only read); the path keeps its query.
pub(crate) async fn read_request_path(stream: &mut tokio::net::TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0_u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
        match stream.read(&mut byte).await {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
    }
    let text = String::from_utf8_lossy(&head);
    text.lines().next()?.split_whitespace().nth(1).map(str::to_owned)
}

/// Writes a bootstrap answer.
pub(crate) async fn write_answer(stream: &mut tokio::net::TcpStream, status: u16, body: &str) {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        _ => "Service Unavailable",
    };
    let answer = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _unanswered = stream.write_all(answer.as_bytes()).await;
    let _closed = stream.shutdown().await;
}

fn is_word(text: &str) -> bool {
    !text.is_empty() && text.chars().all(|char| char.is_ascii_alphanumeric() || "-_".contains(char))
}

/// `text` when it is one word (letters, digits, `-`, `_`), else the error that names `key`.
fn word(key: &'static str, text: String) -> Result<String, DisaggregationError> {
    if is_word(&text) {
        return Ok(text);
    }
    let problem = format!("{text:?} is not one word of letters, digits, '-' and '_'");
    Err(DisaggregationError { key, problem })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_routers_bootstrap_fields_are_read_or_refused_by_name() {
        let body = r#"{"prompt":"x","bootstrap_host":"10.1.0.2","bootstrap_port":8998,"bootstrap_room":5976266185992719238}"#;
        let expect =
            Bootstrap { host: "10.1.0.2".into(), port: 8998, room: 5_976_266_185_992_719_238 };
        assert_eq!(bootstrap_of(body), Ok(Some(expect)));
        assert_eq!(bootstrap_of(r#"{"prompt":"x"}"#), Ok(None));
        for (body, named) in [
            (r#"{"bootstrap_room":1}"#, "bootstrap_host"),
            (r#"{"bootstrap_host":"h","bootstrap_port":0,"bootstrap_room":1}"#, "bootstrap_port"),
            (r#"{"bootstrap_host":"h","bootstrap_port":1,"bootstrap_room":-1}"#, "bootstrap_room"),
        ] {
            let error = bootstrap_of(body).expect_err(body).to_string();
            assert!(error.contains(named), "{body}: {error}");
        }
        assert!(refusal(Mode::Decode, None).is_some_and(|(code, _)| code == 400));
        let routed = bootstrap_of(body).expect("read").expect("fields");
        assert_eq!(refusal(Mode::Prefill, Some(&routed)), None);
    }

    #[test]
    fn a_table_with_an_unknown_key_or_a_bad_word_is_refused() {
        let parse = |text: &str| toml::from_str::<Disaggregation>(text).map_err(|e| e.to_string());
        let parsed = parse("mode = \"decode\"\ntransport = \"tcp\"").expect("a decode table");
        assert_eq!((parsed.mode, parsed.transport.as_str()), (Mode::Decode, "tcp"));
        assert_eq!(parsed.bootstrap_port, DEFAULT_BOOTSTRAP_PORT);
        assert!(parse("mode = \"both\"").is_err());
        assert!(parse("mode = \"prefill\"\nport = 1").is_err());
        let error =
            parse("mode = \"prefill\"\ntransport = \"rdma over tcp\"").expect_err("two words");
        assert!(error.contains("disaggregation.transport"), "{error}");
    }
}
