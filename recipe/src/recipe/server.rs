//! A recipe's server: the command that starts the model's server (with the monokernel flag
//! on one side only), the health path and startup timeout that prove it up, and how its log
//! shows that a request was routed through a monokernel. Checked like the rest of the recipe:
//! private serde types, then errors naming the file, the key and the value. Starting the
//! server is the runner's; a multi-node topology is `super::topology`'s.

use std::time::Duration;

use serde::Deserialize;

use super::template::{Placeholder, Template};
use super::{
    Checker, DEFAULT_HEALTH_PATH, DEFAULT_STARTUP_TIMEOUT, Recipe, RecipeError, memory_api,
};

impl Recipe {
    /// The server's argv for one side: the command's placeholders filled in, and the
    /// monokernel flag at `{extra_args}` (or at the end) when `side.monokernel`.
    /// `checkpoint_path` is the checkpoint's path as the server sees it (inside the container).
    /// The argv is for `exec`, never for a shell.
    pub fn server_command(
        &self,
        side: ServerSide,
        port: u16,
        checkpoint_path: &str,
    ) -> Vec<String> {
        let extra: &[String] = if side.monokernel { &self.server.monokernel_flag } else { &[] };
        self.server.command.expand(
            |placeholder| match placeholder {
                Placeholder::Checkpoint => checkpoint_path.to_owned(),
                Placeholder::Port => port.to_string(),
                Placeholder::Tp => self.tp.to_string(),
                // The server command allows no other placeholder.
                _ => String::new(),
            },
            extra,
        )
    }
}

impl Checker<'_> {
    pub(super) fn server(&self, raw: RawServer) -> Result<Server, RecipeError> {
        let command = self.template(
            "server.command",
            &raw.command,
            &SERVER_PLACEHOLDERS,
            &[Placeholder::Port],
        )?;
        let flag = self.template("server.monokernel-flag", &raw.monokernel_flag, &[], &[])?;
        let monokernel_flag = flag.expand(|_none| String::new(), &[]);
        let health_path = raw.health_path.unwrap_or_else(|| DEFAULT_HEALTH_PATH.to_owned());
        if !health_path.starts_with('/')
            || health_path.contains(|char: char| char.is_whitespace() || char.is_control())
        {
            return Err(self.value(
                "server.health-path",
                &health_path,
                "must be a URL path that starts with /, such as \"/health\"",
            ));
        }
        let startup_timeout = match &raw.startup_timeout {
            Some(text) => self.duration("server.startup-timeout", text)?,
            None => DEFAULT_STARTUP_TIMEOUT,
        };
        if raw.routing_pattern.trim().is_empty() {
            return Err(self.value(
                "server.routing-pattern",
                &raw.routing_pattern,
                "is empty: write a regular expression that only a monokernel routing line matches",
            ));
        }
        if let Err(error) = regex::Regex::new(&raw.routing_pattern) {
            return Err(self.value(
                "server.routing-pattern",
                &raw.routing_pattern,
                format!("is not a regular expression: {error}"),
            ));
        }
        let memory_api = match raw.memory_api.as_deref() {
            None => memory_api::MemoryApiKey::Probe,
            Some(text) => memory_api::MemoryApiKey::parse(text).ok_or_else(|| {
                self.value("server.memory-api", &text, "must be sglang, vllm, none or probe")
            })?,
        };
        let routing_logged = match raw.routing_logged.as_deref() {
            None | Some("serving") => RoutingLogged::Serving,
            Some("any") => RoutingLogged::Any,
            Some(text) => {
                return Err(self.value("server.routing-logged", &text, "must be serving or any"));
            }
        };
        Ok(Server {
            command,
            monokernel_flag,
            health_path,
            startup_timeout,
            routing_pattern: raw.routing_pattern,
            memory_api,
            routing_logged,
        })
    }
}

/// How the model's server starts and proves itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    pub(super) command: Template,
    pub(super) monokernel_flag: Vec<String>,
    /// The path polled until it answers 200, e.g. `/health`.
    pub health_path: String,
    /// How long the server may take to become healthy.
    pub startup_timeout: Duration,
    /// The regular expression a line of the server's log matches when a request was routed
    /// through a monokernel.
    pub routing_pattern: String,
    /// Which engine memory API the server speaks (`server.memory-api`, default `probe`).
    pub memory_api: memory_api::MemoryApiKey,
    /// When a routing line counts (`server.routing-logged`, default `serving`).
    pub routing_logged: RoutingLogged,
}

/// When a line of the server's log counts as its routing line (`server.routing-logged`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RoutingLogged {
    /// `serving`: only lines written after the server was healthy (each start's), so a line
    /// its command prints while it starts (an `echo`) is no proof of routing.
    #[default]
    Serving,
    /// `any`: any line of its log, for monokernels that log their routing while they load (a
    /// graph capture before the server is healthy). Base's contract decides it.
    Any,
}

impl RoutingLogged {
    /// The value as the recipe writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            RoutingLogged::Serving => "serving",
            RoutingLogged::Any => "any",
        }
    }
}

/// Which side of a comparison a server is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerSide {
    /// Whether the monokernels are on: the recipe's `monokernel-flag` is added. Off only for
    /// SGLang's own path, the baseline of a model new in the PR.
    pub monokernel: bool,
}

impl Server {
    /// The command as the recipe wrote it.
    pub fn command_text(&self) -> &str {
        self.command.text()
    }

    /// The arguments that turn the monokernels on.
    pub fn monokernel_flag(&self) -> &[String] {
        &self.monokernel_flag
    }
}

pub(super) const SERVER_PLACEHOLDERS: [Placeholder; 4] =
    [Placeholder::Checkpoint, Placeholder::Port, Placeholder::Tp, Placeholder::ExtraArgs];

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct RawServer {
    command: String,
    monokernel_flag: String,
    health_path: Option<String>,
    startup_timeout: Option<String>,
    routing_pattern: String,
    memory_api: Option<String>,
    routing_logged: Option<String>,
}
