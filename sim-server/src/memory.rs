//! The engines' memory-release endpoints, with their real request and response shapes: SGLang's
//! `POST /release_memory_occupation` and `POST /resume_memory_occupation` (a JSON object body,
//! `{"tags": [...]}` optional; `200` with `null`), vLLM's `POST /sleep?level=1|2`,
//! `POST /wake_up` (`200`, empty) and `GET /is_sleeping` (`{"is_sleeping": bool}`). A released
//! server stays healthy (as both engines' `/health` do) but refuses generation with `503`;
//! taking the memory back takes the profile's `wake-delay-ms`. Which of them a server answers
//! is the profile's `memory-api`; one it does not speak is a 404 like any unknown path. With a
//! fake GPU (`vram-dir`), a release gives its memory back (unless `release-keeps-memory`: the
//! server that lies; `retake-memory-after-ms` takes it back later, unless the server is paused
//! by then; `busy-after-release-ms` leaves the GPU busy that long, paused or not, as work queued
//! before the answer would) and a wake takes it again, or answers `500` when the GPU has no
//! room.
//!
//! What it leaves to others: serving (the crate's root), deciding when to release (the runner),
//! the fake GPU's files (`crate::vram`).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use hyper::body::Incoming;
use hyper::{Method, Request, Response};

use super::generate::BadRequest;
use super::{Answer, Body, Crash, Profile, Shared, generate, request_body, respond};

const SGLANG_RELEASE: &str = "/release_memory_occupation";
const SGLANG_RESUME: &str = "/resume_memory_occupation";
const VLLM_SLEEP: &str = "/sleep";
const VLLM_WAKE: &str = "/wake_up";
const VLLM_IS_SLEEPING: &str = "/is_sleeping";

/// Whether `path` is a memory endpoint `profile` answers.
pub(super) fn answers(profile: &Profile, path: &str) -> bool {
    let api = profile.memory_api;
    (api.sglang() && [SGLANG_RELEASE, SGLANG_RESUME].contains(&path))
        || (api.vllm() && [VLLM_SLEEP, VLLM_WAKE, VLLM_IS_SLEEPING].contains(&path))
}

/// A generation request while the memory is released.
pub(super) fn refuse_released() -> Response<Body> {
    let message = "the server's GPU memory is released (sleeping): wake it up first";
    respond(503, generate::error_json(message, "service_unavailable", 503))
}

pub(super) async fn handle(request: Request<Incoming>, shared: &Arc<Shared>) -> Answer {
    let path = request.uri().path().to_owned();
    let query = request.uri().query().unwrap_or_default().to_owned();
    let method = request.method().clone();
    let not_allowed = || {
        Ok(respond(405, generate::error_json("method not allowed", "invalid_request_error", 405)))
    };
    match path.as_str() {
        VLLM_IS_SLEEPING if method == Method::GET => {
            let sleeping = shared.released.load(Ordering::Acquire);
            Ok(respond(200, serde_json::json!({ "is_sleeping": sleeping }).to_string()))
        }
        VLLM_IS_SLEEPING => not_allowed(),
        _ if method != Method::POST => not_allowed(),
        SGLANG_RELEASE | SGLANG_RESUME => {
            let body = match request_body(request).await {
                Ok(body) => body,
                Err((status, message)) => return Ok(bad(status, &message)),
            };
            if let Err(message) = sglang_body(&body) {
                return Ok(bad(400, &message.to_string()));
            }
            if path == SGLANG_RESUME {
                return wake(shared, "resume_memory_occupation", "null").await;
            }
            release(shared, "release_memory_occupation");
            Ok(respond(200, "null".to_owned()))
        }
        VLLM_SLEEP => {
            let level =
                query.split('&').find_map(|pair| pair.strip_prefix("level=")).unwrap_or("1");
            if !["1", "2"].contains(&level) {
                return Ok(bad(400, &format!("sleep level {level:?} is not 1 or 2")));
            }
            release(shared, &format!("sleep level={level}"));
            Ok(respond(200, String::new()))
        }
        _ => wake(shared, "wake_up", "").await,
    }
}

/// SGLang's request body: empty, or a JSON object whose `tags`, when present, is a list of
/// strings (`weights`, `kv_cache`).
fn sglang_body(body: &str) -> Result<(), BadRequest> {
    if body.trim().is_empty() {
        return Ok(());
    }
    let value: serde_json::Value = serde_json::from_str(body).map_err(BadRequest::NotJson)?;
    let object = value.as_object().ok_or(BadRequest::NotAnObject)?;
    match object.get("tags") {
        None | Some(serde_json::Value::Null) => Ok(()),
        Some(serde_json::Value::Array(tags)) if tags.iter().all(serde_json::Value::is_string) => {
            Ok(())
        }
        Some(_) => Err(BadRequest::Tags),
    }
}

fn bad(status: u16, message: &str) -> Response<Body> {
    respond(status, generate::error_json(message, "invalid_request_error", status))
}

/// Releases the memory; a server whose profile keeps it (`release-keeps-memory`) answers alike
/// and keeps its fake GPU's memory (`crate::vram`), one that takes it back later
/// (`retake-memory-after-ms`) does so unless it is paused by then, and one that leaves its GPU
/// busy (`busy-after-release-ms`) says so in its file.
fn release(shared: &Arc<Shared>, how: &str) {
    shared.released.store(true, Ordering::Release);
    let kept = match shared.vram.as_ref().map(super::vram::FakeVram::release).transpose() {
        Ok(kept) => kept.unwrap_or(false),
        Err(error) => {
            shared.log(&format!("[sim-server] {error}"));
            false
        }
    };
    let kept = if kept { ", but keeps its GPU memory (release-keeps-memory)" } else { "" };
    let busy = match shared.profile.busy_after_release.filter(|_| shared.vram.is_some()) {
        Some(busy) => {
            format!(", and leaves its GPU busy for {} ms (busy-after-release-ms)", busy.as_millis())
        }
        None => String::new(),
    };
    shared.log(&format!("[sim-server] memory released ({how}){kept}{busy}"));
    if let Some(delay) = shared.profile.retake_memory_after {
        let shared = Arc::clone(shared);
        tokio::spawn(async move {
            let still_released = shared.sleep_until(Instant::now() + delay).await
                && shared.released.load(Ordering::Acquire);
            if let Some(vram) = shared.vram.as_ref().filter(|_| still_released) {
                let taken =
                    vram.take().map_or_else(|error| error.to_string(), |()| "done".to_owned());
                shared.log(&format!(
                    "[sim-server] takes its GPU memory back unasked (retake-memory-after-ms): {taken}"
                ));
            }
        });
    }
}

/// Takes the memory back after the profile's wake delay: `200`, or `500` when its fake GPU has
/// no room (it stays released); `Err` when the server stopped meanwhile.
async fn wake(shared: &Shared, how: &str, woken: &str) -> Answer {
    if shared.released.load(Ordering::Acquire) {
        if !shared.sleep_until(Instant::now() + shared.profile.wake_delay).await {
            return Err(Crash);
        }
        if let Some(Err(error)) = shared.vram.as_ref().map(super::vram::FakeVram::take) {
            shared.log(&format!("[sim-server] cannot resume its memory ({how}): {error}"));
            let message = error.to_string();
            return Ok(respond(500, generate::error_json(&message, "out_of_memory", 500)));
        }
        shared.released.store(false, Ordering::Release);
        shared.log(&format!("[sim-server] memory resumed ({how})"));
    }
    Ok(respond(200, woken.to_owned()))
}
