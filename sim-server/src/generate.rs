//! What the simulated server answers: the request's fields it reads, the tokens it writes, and
//! the JSON around them: OpenAI's API, or sglang's native `/generate`.
//!
//! Plain data in, plain data out: timing, sockets and threads are the parent module's.

use serde_json::{Value, json};

/// The largest `max_tokens` the server accepts (a 128k context).
pub(super) const MAX_OUTPUT_TOKENS: u64 = 131_072;

/// `max_tokens` when a request does not say (OpenAI's default for completions).
pub(super) const DEFAULT_MAX_TOKENS: usize = 16;

/// The word the model writes when it has no answer to give, or after its answer with
/// `ignore_eos`.
pub(super) const FILLER_WORD: &str = "sim";

/// `max_new_tokens` when a `/generate` request does not say (sglang's default).
pub(super) const DEFAULT_MAX_NEW_TOKENS: usize = 128;

/// The generation endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Endpoint {
    /// `POST /v1/completions`: a prompt, answered as `text`.
    Completions,
    /// `POST /v1/chat/completions`: messages, answered as a message's `content`.
    ChatCompletions,
    /// `POST /generate`, sglang's native API (the default backend of sglang's
    /// `bench_serving`): `text` or `input_ids` and `sampling_params`, answered as `text` (the
    /// whole text so far, in each streamed chunk) with `meta_info`.
    Generate,
}

/// The fields of a generation request the server uses.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct GenerationRequest {
    pub(super) endpoint: Endpoint,
    /// The prompt's text: a completion's prompt, or every chat message's content joined by
    /// newlines.
    pub(super) prompt: String,
    /// Whitespace-separated words of the prompt, or the length of a prompt given as token ids.
    pub(super) prompt_tokens: usize,
    pub(super) max_tokens: usize,
    pub(super) ignore_eos: bool,
    pub(super) stream: bool,
    /// `stream_options.include_usage`: a last chunk with the usage and no choices.
    pub(super) include_usage: bool,
    /// The request's sampling `seed` (`sampling_params.seed` for `/generate`): an answer with
    /// an `expected:` line is drawn per (question, seed); `None` keeps the one draw a prompt.
    pub(super) seed: Option<u64>,
}

/// The tokens of one answer.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Output {
    answer_words: Vec<String>,
    count: usize,
    finish_reason: &'static str,
}

/// The identity every chunk or answer of one request carries.
#[derive(Debug, Clone, Copy)]
pub(super) struct Identity<'a> {
    pub(super) endpoint: Endpoint,
    pub(super) number: u64,
    pub(super) created: u64,
    pub(super) model: &'a str,
}

/// Why a request's body is refused (a 400 whose message the client reads).
#[derive(Debug, thiserror::Error)]
pub(super) enum BadRequest {
    #[error("the body is not JSON: {0}")]
    NotJson(serde_json::Error),
    #[error("the body is not a JSON object")]
    NotAnObject,
    #[error("{key} is too large")]
    TooLarge { key: &'static str },
    #[error("{key} must be from 1 to {MAX_OUTPUT_TOKENS}")]
    OutOfRange { key: &'static str },
    #[error("seed must be a non-negative integer")]
    Seed,
    #[error("sampling_params must be an object")]
    SamplingParams,
    #[error(
        "text must be a string, or input_ids a list of token ids; this server answers one prompt per request"
    )]
    GeneratePrompt,
    #[error("{key} must be true or false")]
    NotAFlag { key: &'static str },
    #[error(
        "prompt must be a string, a list of one string or a list of token ids; this server answers one prompt per request"
    )]
    SeveralPrompts,
    #[error("prompt must be a string, a list of one string or a list of token ids")]
    Prompt,
    #[error("messages must be a list of messages")]
    Messages,
    #[error("a message's content must be a string or a list of parts")]
    Content,
    #[error("tags is not a list of strings")]
    Tags,
}

/// Reads a generation request's JSON body; the error is a message for the client.
pub(super) fn parse_request(
    endpoint: Endpoint,
    body: &str,
) -> Result<GenerationRequest, BadRequest> {
    let body: Value = serde_json::from_str(body).map_err(BadRequest::NotJson)?;
    if !body.is_object() {
        return Err(BadRequest::NotAnObject);
    }
    let (prompt, prompt_tokens) = match endpoint {
        Endpoint::Completions => completion_prompt(body.get("prompt"))?,
        Endpoint::ChatCompletions => {
            let prompt = chat_prompt(body.get("messages"))?;
            let words = count_words(&prompt);
            (prompt, words)
        }
        Endpoint::Generate => generate_prompt(&body)?,
    };
    if endpoint == Endpoint::Generate {
        return parse_generate(&body, prompt, prompt_tokens);
    }
    let max_tokens = match body.get("max_tokens").or_else(|| body.get("max_completion_tokens")) {
        None | Some(Value::Null) => DEFAULT_MAX_TOKENS,
        Some(value) => match value.as_u64() {
            Some(tokens @ 1..=MAX_OUTPUT_TOKENS) => {
                usize::try_from(tokens).map_err(|_| BadRequest::TooLarge { key: "max_tokens" })?
            }
            _ => return Err(BadRequest::OutOfRange { key: "max_tokens" }),
        },
    };
    Ok(GenerationRequest {
        endpoint,
        prompt,
        prompt_tokens,
        max_tokens,
        ignore_eos: flag(&body, "ignore_eos")?,
        stream: flag(&body, "stream")?,
        include_usage: match body.get("stream_options") {
            None | Some(Value::Null) => false,
            Some(options) => flag(options, "include_usage")?,
        },
        seed: seed(&body)?,
    })
}

/// A body's `seed`: absent or null is none; otherwise a non-negative integer.
fn seed(body: &Value) -> Result<Option<u64>, BadRequest> {
    match body.get("seed") {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value.as_u64().map(Some).ok_or(BadRequest::Seed),
    }
}

/// A `/generate` request: `sampling_params.max_new_tokens` (default 128) and
/// `sampling_params.ignore_eos`, and `stream`.
fn parse_generate(
    body: &Value,
    prompt: String,
    prompt_tokens: usize,
) -> Result<GenerationRequest, BadRequest> {
    let params = match body.get("sampling_params") {
        None | Some(Value::Null) => json!({}),
        Some(params @ Value::Object(_)) => params.clone(),
        Some(_) => return Err(BadRequest::SamplingParams),
    };
    let max_tokens = match params.get("max_new_tokens") {
        None | Some(Value::Null) => DEFAULT_MAX_NEW_TOKENS,
        Some(value) => match value.as_u64() {
            Some(tokens @ 1..=MAX_OUTPUT_TOKENS) => usize::try_from(tokens)
                .map_err(|_| BadRequest::TooLarge { key: "max_new_tokens" })?,
            _ => return Err(BadRequest::OutOfRange { key: "max_new_tokens" }),
        },
    };
    Ok(GenerationRequest {
        endpoint: Endpoint::Generate,
        prompt,
        prompt_tokens,
        max_tokens,
        ignore_eos: flag(&params, "ignore_eos")?,
        stream: flag(body, "stream")?,
        include_usage: false,
        seed: seed(&params)?,
    })
}

/// A `/generate` prompt: `text` (a string) or `input_ids` (token ids); one prompt per request.
fn generate_prompt(body: &Value) -> Result<(String, usize), BadRequest> {
    match (body.get("text"), body.get("input_ids")) {
        (Some(Value::String(text)), _) => Ok((text.clone(), count_words(text))),
        (None | Some(Value::Null), Some(Value::Array(ids))) if ids.iter().all(Value::is_u64) => {
            Ok((String::new(), ids.len()))
        }
        _ => Err(BadRequest::GeneratePrompt),
    }
}

/// The answer a prompt's `expected:` line asks for: the text after `expected:` on the first
/// line that starts with it (after spaces), trimmed; `None` without such a line or when the
/// text is empty.
pub(super) fn expected_answer(prompt: &str) -> Option<&str> {
    prompt
        .lines()
        .find_map(|line| line.trim_start().strip_prefix("expected:"))
        .map(str::trim)
        .filter(|answer| !answer.is_empty())
}

/// An answer that is surely not `expected`: an integer plus one, otherwise `not <expected>`.
pub(super) fn wrong_answer(expected: &str) -> String {
    match expected.parse::<i64>() {
        Ok(number) => number.checked_add(1).unwrap_or(number - 1).to_string(),
        Err(_) => format!("not {expected}"),
    }
}

impl Output {
    /// The tokens the model writes: `answer`'s words, then the end of the sequence, unless
    /// `ignore_eos` fills up to `max_tokens` with [`FILLER_WORD`]. Without an answer the model
    /// writes filler up to `max_tokens`. `max_tokens` always cuts the output.
    pub(super) fn new(answer: Option<&str>, max_tokens: usize, ignore_eos: bool) -> Output {
        let answer_words: Vec<String> = answer
            .map(|answer| answer.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default();
        let ends_early = answer.is_some() && !ignore_eos && answer_words.len() <= max_tokens;
        if ends_early {
            Output { count: answer_words.len(), answer_words, finish_reason: "stop" }
        } else {
            Output { answer_words, count: max_tokens, finish_reason: "length" }
        }
    }

    /// The answer ended by its end of sequence after at most `tokens` tokens, whatever
    /// `ignore_eos` asked (a server that ignores it).
    pub(super) fn ended_after(self, tokens: usize) -> Output {
        if self.count > tokens {
            Output { count: tokens, finish_reason: "stop", ..self }
        } else {
            self
        }
    }

    /// How many tokens the answer has.
    pub(super) fn len(&self) -> usize {
        self.count
    }

    /// Why the answer ends: `stop` (end of sequence) or `length` (`max_tokens`).
    pub(super) fn finish_reason(&self) -> &'static str {
        self.finish_reason
    }

    /// The text of token `index`: a word, with a space before every word but the first.
    pub(super) fn token(&self, index: usize) -> String {
        let word = self.answer_words.get(index).map_or(FILLER_WORD, String::as_str);
        if index == 0 { word.to_owned() } else { format!(" {word}") }
    }

    /// The whole text.
    pub(super) fn text(&self) -> String {
        self.text_until(self.count)
    }

    /// The text of the first `count` tokens.
    fn text_until(&self, count: usize) -> String {
        (0..count.min(self.count)).map(|index| self.token(index)).collect()
    }
}

/// A `/generate` answer after `count` tokens of `output`, as sglang writes it: the whole text
/// so far, and `meta_info` with the token counts and, once the answer is complete, the finish
/// reason (`{"type": "length", "length": n}` or `{"type": "stop", "matched": null}`).
pub(super) fn generate_json(
    identity: Identity<'_>,
    prompt_tokens: usize,
    output: &Output,
    count: usize,
) -> String {
    let finish_reason = if count >= output.len() {
        match output.finish_reason {
            "length" => json!({"type": "length", "length": output.len()}),
            _ => json!({"type": "stop", "matched": null}),
        }
    } else {
        Value::Null
    };
    json!({
        "text": output.text_until(count),
        "meta_info": {
            "id": format!("sim-{}", identity.number),
            "finish_reason": finish_reason,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": count.min(output.len()),
            "cached_tokens": 0,
        },
        "index": 0,
    })
    .to_string()
}

/// One streamed chunk carrying token `index` of `output`; the last token's chunk carries the
/// finish reason. (`/generate`'s chunk carries the whole text so far: [`generate_json`].)
pub(super) fn chunk_json(
    identity: Identity<'_>,
    prompt_tokens: usize,
    output: &Output,
    index: usize,
) -> String {
    if identity.endpoint == Endpoint::Generate {
        return generate_json(identity, prompt_tokens, output, index + 1);
    }
    let text = output.token(index);
    let finish_reason =
        if index + 1 == output.len() { json!(output.finish_reason) } else { Value::Null };
    let choice = match identity.endpoint {
        Endpoint::Completions => json!({
            "index": 0,
            "text": text,
            "logprobs": null,
            "finish_reason": finish_reason,
        }),
        Endpoint::ChatCompletions => {
            let delta = if index == 0 {
                json!({"role": "assistant", "content": text})
            } else {
                json!({"content": text})
            };
            json!({"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason})
        }
        Endpoint::Generate => Value::Null,
    };
    let mut chunk = envelope(identity, true);
    chunk["choices"] = json!([choice]);
    chunk.to_string()
}

/// The last chunk of a stream that asked for `include_usage`: no choices, the usage.
pub(super) fn usage_chunk_json(
    identity: Identity<'_>,
    prompt_tokens: usize,
    output: &Output,
) -> String {
    let mut chunk = envelope(identity, true);
    chunk["choices"] = json!([]);
    chunk["usage"] = usage(prompt_tokens, output);
    chunk.to_string()
}

/// The answer of a request that did not stream.
pub(super) fn answer_json(identity: Identity<'_>, prompt_tokens: usize, output: &Output) -> String {
    let choice = match identity.endpoint {
        Endpoint::Generate => return generate_json(identity, prompt_tokens, output, output.len()),
        Endpoint::Completions => json!({
            "index": 0,
            "text": output.text(),
            "logprobs": null,
            "finish_reason": output.finish_reason,
        }),
        Endpoint::ChatCompletions => json!({
            "index": 0,
            "message": {"role": "assistant", "content": output.text()},
            "logprobs": null,
            "finish_reason": output.finish_reason,
        }),
    };
    let mut answer = envelope(identity, false);
    answer["choices"] = json!([choice]);
    answer["usage"] = usage(prompt_tokens, output);
    answer.to_string()
}

/// `GET /v1/models`.
pub(super) fn models_json(model: &str, created: u64) -> String {
    json!({
        "object": "list",
        "data": [{"id": model, "object": "model", "created": created, "owned_by": "prgate-sim"}],
    })
    .to_string()
}

/// An error body in OpenAI's shape.
pub(super) fn error_json(message: &str, kind: &str, code: u16) -> String {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}}).to_string()
}

/// Whitespace-separated words: the simulated tokenizer.
pub(super) fn count_words(text: &str) -> usize {
    text.split_whitespace().count()
}

fn envelope(identity: Identity<'_>, chunk: bool) -> Value {
    let (prefix, object) = match (identity.endpoint, chunk) {
        (Endpoint::Completions, _) => ("cmpl", "text_completion"),
        (Endpoint::ChatCompletions, true) => ("chatcmpl", "chat.completion.chunk"),
        (Endpoint::ChatCompletions, false) => ("chatcmpl", "chat.completion"),
        (Endpoint::Generate, _) => ("generate", "generate"),
    };
    json!({
        "id": format!("{prefix}-sim-{}", identity.number),
        "object": object,
        "created": identity.created,
        "model": identity.model,
    })
}

fn usage(prompt_tokens: usize, output: &Output) -> Value {
    json!({
        "prompt_tokens": prompt_tokens,
        "completion_tokens": output.len(),
        "total_tokens": prompt_tokens + output.len(),
    })
}

fn flag(object: &Value, key: &'static str) -> Result<bool, BadRequest> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(value)) => Ok(*value),
        Some(_) => Err(BadRequest::NotAFlag { key }),
    }
}

/// A completion's prompt: a string, a list of one string, or a list of token ids.
fn completion_prompt(prompt: Option<&Value>) -> Result<(String, usize), BadRequest> {
    match prompt {
        Some(Value::String(text)) => Ok((text.clone(), count_words(text))),
        Some(Value::Array(items)) if items.iter().all(Value::is_u64) => {
            Ok((String::new(), items.len()))
        }
        Some(Value::Array(items)) => match items.as_slice() {
            [Value::String(text)] => Ok((text.clone(), count_words(text))),
            _ => Err(BadRequest::SeveralPrompts),
        },
        _ => Err(BadRequest::Prompt),
    }
}

/// A chat's prompt: every message's content (a string, or text parts) joined by newlines.
fn chat_prompt(messages: Option<&Value>) -> Result<String, BadRequest> {
    let Some(Value::Array(messages)) = messages else {
        return Err(BadRequest::Messages);
    };
    let mut texts = Vec::new();
    for message in messages {
        match message.get("content") {
            None | Some(Value::Null) => {}
            Some(Value::String(text)) => texts.push(text.as_str()),
            Some(Value::Array(parts)) => texts.extend(
                parts
                    .iter()
                    .filter(|part| part.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|part| part.get("text").and_then(Value::as_str)),
            ),
            Some(_) => {
                return Err(BadRequest::Content);
            }
        }
    }
    Ok(texts.join("\n"))
}
