//! Switching a one-at-a-time node's servers without reloading them: the engines' own memory
//! release. SGLang's `POST /release_memory_occupation` and `POST /resume_memory_occupation`
//! (a JSON object body), vLLM's `POST /sleep?level=1` and `POST /wake_up`. prgate probes for
//! them: the first release of a server tries SGLang's, then vLLM's; the one that answers `200`
//! is the server's API from then on, and a server that answers neither is stopped instead (and
//! loaded again when it is needed: the reload design). After a wake, one warm-up request
//! (not measured) must succeed before the server is used; a wake or warm-up that fails counts
//! as a server that must be loaded again. A recipe's `server.memory-api` names the API (no
//! probe), or says `none` (stopped at once, no probe); `probe` is the default. A `200` to a
//! release is the server's word only: `freed` reads the GPUs after it ([`ReleaseCheck`]: their
//! memory, and once the server is paused how busy they are), and a release that did not give
//! them back, freed and idle, does not count.
//!
//! What it leaves to others: when to switch (the step loop's `Servers`), the servers'
//! processes (`super::server`), the GPUs' memory sources (`crate::preflight`).

mod freed;

use std::time::Duration;

use crate::recipe::memory_api::MemoryApiKey;

pub(super) use freed::{Freed, ReleaseCheck};

/// Which engine's memory API a server answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MemoryApi {
    Sglang,
    Vllm,
}

/// What a side starts from, by its recipe's `server.memory-api`: the API known before any
/// release (`None` to probe), and whether the server is known to have none.
pub(super) fn declared(key: MemoryApiKey) -> (Option<MemoryApi>, bool) {
    match key {
        MemoryApiKey::Probe => (None, false),
        MemoryApiKey::Sglang => (Some(MemoryApi::Sglang), false),
        MemoryApiKey::Vllm => (Some(MemoryApi::Vllm), false),
        MemoryApiKey::None => (None, true),
    }
}

/// How long one memory request may take: a real wake takes tens of seconds.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15 * 60);

fn agent() -> ureq::Agent {
    ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(REQUEST_TIMEOUT))
            .max_idle_connections(0)
            .max_idle_connections_per_host(0)
            .build(),
    )
}

fn post(url: &str, path: &str, body: &str) -> bool {
    let address = format!("{}{path}", url.trim_end_matches('/'));
    agent()
        .post(&address)
        .header("Content-Type", "application/json")
        .send(body)
        .is_ok_and(|response| response.status().as_u16() == 200)
}

/// Releases the server at `url`'s GPU memory with `known` (its API found earlier), or probes
/// for one: the API that released it, `None` when none did.
pub(super) fn release(url: &str, known: Option<MemoryApi>) -> Option<MemoryApi> {
    let tries: &[MemoryApi] = match known {
        Some(MemoryApi::Sglang) => &[MemoryApi::Sglang],
        Some(MemoryApi::Vllm) => &[MemoryApi::Vllm],
        None => &[MemoryApi::Sglang, MemoryApi::Vllm],
    };
    tries.iter().copied().find(|api| match api {
        MemoryApi::Sglang => post(url, "/release_memory_occupation", "{}"),
        MemoryApi::Vllm => post(url, "/sleep?level=1", ""),
    })
}

/// Takes the memory back and sends one warm-up request (one token, not measured): whether the
/// server serves again.
pub(super) fn wake(url: &str, api: MemoryApi, model: &str) -> bool {
    let woke = match api {
        MemoryApi::Sglang => post(url, "/resume_memory_occupation", "{}"),
        MemoryApi::Vllm => post(url, "/wake_up", ""),
    };
    let warm_up = serde_json::json!({ "model": model, "prompt": "warm-up", "max_tokens": 1 });
    woke && post(url, "/v1/completions", &warm_up.to_string())
}
