//! Accuracy evidence: the built-in exact-match evaluator, and the reader of sgl-eval's results.
//!
//! # The built-in evaluator
//!
//! [`evaluate`] asks an OpenAI-compatible server every question of a dataset through
//! `POST <base-url>/v1/completions` (not streamed, `temperature` 0, `max_tokens` small, no
//! `ignore_eos`), compares each answer with the dataset's, and returns per-question
//! correctness; [`Evaluation::outcome`] turns that into the gate's [`Outcome::Accuracy`].
//!
//! **The dataset** is JSON Lines, one question per line:
//!
//! ```json
//! {"id": "gsm8k-0001", "question": "What is 6 times 7?", "answer": "42"}
//! ```
//!
//! `id` (a string or an integer; unique in the file), `question` (a string) and `answer` (a
//! string or a number) are required; other fields are ignored; blank lines are skipped. An
//! error names the line and the field.
//!
//! **The prompt** is
//!
//! ```text
//! Answer the question with only the answer.
//! Question: <question>
//! Answer:
//! ```
//!
//! and, only when [`EvalConfig::reveal_expected`] is set, one more line `expected: <answer>`.
//! That line is a **simulation hook**, not an evaluation technique: it is how prgate's simulated
//! server (`docs/sim-server.md`, "Answers") knows the right answer, which it then gives with its
//! profile's accuracy. Against a real model it would leak the answer; it is off by default and
//! only tests and the demo set it.
//!
//! **Comparing answers.** The model's answer is the first non-empty line of the completion. Both
//! answers are normalised: surrounding whitespace trimmed, runs of whitespace made one space,
//! lowercased, and trailing `.`, `,`, `;`, `:`, `!` and `?` removed. When both are then numbers
//! (an optional sign, digits with an optional fraction and exponent; commas between digits, as
//! in `1,000`, are dropped) they are compared as numbers (`42`, `42.0` and `4.2e1` are equal);
//! otherwise as text.
//!
//! A request that fails (an HTTP error status, a broken connection, a body without
//! `choices[0].text`) fails the evaluation: a dying server is not a wrong answer.
//!
//! # sgl-eval
//!
//! [`sgl_eval`] parses the `metrics.json` that `sgl-eval run` writes, and its per-sample
//! `output-rs0.jsonl` when there is one, into the same outcome.
//!
//! Reading the dataset from a PR's tree and sgl-eval's files from a container's folder, and
//! fetching a gated dataset, are the runner's (`prgate_runner::accuracy`): this module parses
//! the text it is handed, and its one I/O is the evaluator's HTTP to the server.

pub mod sgl_eval;

use std::collections::BTreeSet;
use std::num::NonZeroUsize;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use prgate_gate::evidence::{Outcome, QuestionResult};
use serde_json::{Value, json};

/// One question of a dataset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    pub id: String,
    pub question: String,
    pub answer: String,
}

/// How the built-in evaluator asks its questions.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalConfig {
    /// The server's base URL, without `/v1` (`http://127.0.0.1:30000`).
    pub base_url: String,
    /// The `model` sent with every request.
    pub model: String,
    /// The most tokens an answer may have.
    pub max_tokens: u32,
    /// Ask only the first this many questions of the dataset; `None` asks them all.
    pub limit: Option<usize>,
    /// How many requests are in flight at once.
    pub concurrency: NonZeroUsize,
    /// The longest one request may take.
    pub request_timeout: Duration,
    /// Append `expected: <answer>` to every prompt: the simulated server's hook (see the
    /// module's documentation); never set it against a real model.
    pub reveal_expected: bool,
    /// The repeat's seed, sent as the request's `seed`; `None` sends none (the server's own
    /// sampling, as before repeats).
    pub seed: Option<u64>,
}

impl EvalConfig {
    /// A configuration with the defaults: 32 tokens, every question, 8 at once, 120 seconds per
    /// request, no `expected:` line.
    pub fn new(base_url: &str, model: &str) -> EvalConfig {
        EvalConfig {
            base_url: base_url.to_owned(),
            model: model.to_owned(),
            max_tokens: 32,
            limit: None,
            concurrency: NonZeroUsize::new(8).unwrap_or(NonZeroUsize::MIN),
            request_timeout: Duration::from_secs(120),
            reveal_expected: false,
            seed: None,
        }
    }
}

/// What the evaluator saw for one question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub id: String,
    /// The dataset's answer.
    pub expected: String,
    /// The model's answer: the first non-empty line of its completion.
    pub given: String,
    pub correct: bool,
}

/// The answers of one evaluation, in the dataset's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluation {
    pub answers: Vec<Answer>,
}

/// A problem at a place in a dataset or a result file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}{problem}", line.map(|line| format!("line {line}: ")).unwrap_or_default(), field.as_ref().map(|field| format!("field '{field}': ")).unwrap_or_default())]
pub struct ParseError {
    /// The line, counted from 1, when the file has lines.
    pub line: Option<usize>,
    /// The field, when one field is at fault.
    pub field: Option<String>,
    pub problem: String,
}

/// Why the built-in evaluation cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// There is no question to ask.
    #[error("the dataset has no questions")]
    NoQuestions,
    /// A request failed; the evaluation stops.
    #[error("question '{id}': the request to {url} failed: {problem}")]
    Request { id: String, url: String, problem: RequestProblem },
    /// A worker thread cannot be started.
    #[error("cannot start an evaluator thread")]
    Thread(#[source] std::io::Error),
}

/// Why one question got no answer.
#[derive(Debug, thiserror::Error)]
pub enum RequestProblem {
    /// The request could not be sent or its answer read (a refused or broken connection, a
    /// timeout).
    #[error(transparent)]
    Transport(#[from] ureq::Error),
    /// The server answered with another status than 200; `text` is the start of its body.
    #[error("http status {status}: {text}")]
    Status { status: u16, text: String },
    /// The body is not JSON.
    #[error("the body is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// The body has no completion.
    #[error("the body has no choices[0].text")]
    NoText,
    /// The question's worker stopped before asking it.
    #[error("the question was never asked: its worker stopped")]
    NeverAsked,
}

/// Parses a JSON Lines dataset (the format is in the module's documentation).
pub fn parse_dataset(text: &str) -> Result<Vec<Question>, ParseError> {
    let mut questions = Vec::new();
    let mut ids = BTreeSet::new();
    for (index, line) in text.lines().enumerate() {
        let line_number = index + 1;
        if line.trim().is_empty() {
            continue;
        }
        let at = |field: Option<&str>, problem: String| ParseError {
            line: Some(line_number),
            field: field.map(str::to_owned),
            problem,
        };
        let value: Value = serde_json::from_str(line)
            .map_err(|error| at(None, format!("invalid JSON: {error}")))?;
        let Value::Object(object) = value else {
            return Err(at(None, "not a JSON object".to_owned()));
        };
        let id = match object.get("id") {
            Some(Value::String(id)) if !id.is_empty() => id.clone(),
            Some(Value::Number(id)) if id.is_i64() || id.is_u64() => id.to_string(),
            Some(_) => return Err(at(Some("id"), "not a non-empty string or an integer".into())),
            None => return Err(at(Some("id"), "missing".into())),
        };
        let question = match object.get("question") {
            Some(Value::String(question)) => question.clone(),
            Some(_) => return Err(at(Some("question"), "not a string".into())),
            None => return Err(at(Some("question"), "missing".into())),
        };
        let answer = match object.get("answer") {
            Some(Value::String(answer)) => answer.clone(),
            Some(Value::Number(answer)) => answer.to_string(),
            Some(_) => return Err(at(Some("answer"), "not a string or a number".into())),
            None => return Err(at(Some("answer"), "missing".into())),
        };
        if !ids.insert(id.clone()) {
            return Err(at(Some("id"), format!("'{id}' appears twice")));
        }
        questions.push(Question { id, question, answer });
    }
    Ok(questions)
}

/// The prompt for `question` (the layout is in the module's documentation).
pub fn prompt(question: &Question, reveal_expected: bool) -> String {
    let mut prompt = format!(
        "Answer the question with only the answer.\nQuestion: {}\nAnswer:",
        question.question
    );
    if reveal_expected {
        prompt.push_str("\nexpected: ");
        prompt.push_str(&question.answer);
    }
    prompt
}

/// An answer normalised for comparison (the rules are in the module's documentation).
pub fn normalize_answer(answer: &str) -> String {
    let spaced = answer.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
    spaced.trim_end_matches(['.', ',', ';', ':', '!', '?']).trim_end().to_owned()
}

/// Whether `given` is `expected`, after normalising both; numbers compare as numbers.
pub fn answers_match(given: &str, expected: &str) -> bool {
    let (given, expected) = (normalize_answer(given), normalize_answer(expected));
    match (as_number(&given), as_number(&expected)) {
        (Some(given), Some(expected)) => given == expected,
        _ => given == expected,
    }
}

/// A normalised answer read as a number, when it is one.
fn as_number(answer: &str) -> Option<f64> {
    let bytes = answer.as_bytes();
    let mut digits = String::with_capacity(answer.len());
    for (index, &byte) in bytes.iter().enumerate() {
        let between_digits = index > 0
            && bytes[index - 1].is_ascii_digit()
            && bytes.get(index + 1).is_some_and(u8::is_ascii_digit);
        if byte == b',' && between_digits {
            continue;
        }
        if !(byte.is_ascii_digit() || matches!(byte, b'+' | b'-' | b'.' | b'e')) {
            return None;
        }
        digits.push(char::from(byte));
    }
    if !digits.bytes().any(|byte| byte.is_ascii_digit()) {
        return None;
    }
    digits.parse::<f64>().ok().filter(|number| number.is_finite())
}

/// Asks the first [`EvalConfig::limit`] questions and compares the answers.
pub fn evaluate(config: &EvalConfig, questions: &[Question]) -> Result<Evaluation, EvalError> {
    let questions = &questions[..config.limit.unwrap_or(usize::MAX).min(questions.len())];
    if questions.is_empty() {
        return Err(EvalError::NoQuestions);
    }
    let workers = config.concurrency.get().min(questions.len());
    let asking = Asking {
        config,
        questions,
        agent: agent(config),
        url: format!("{}/v1/completions", config.base_url.trim_end_matches('/')),
        next: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        answers: Mutex::new(vec![None; questions.len()]),
        first_error: Mutex::new(None),
    };
    std::thread::scope(|scope| {
        for worker in 0..workers {
            let asking = &asking;
            std::thread::Builder::new()
                .name(format!("accuracy-{worker}"))
                .spawn_scoped(scope, move || asking.work())
                .map_err(EvalError::Thread)?;
        }
        Ok::<(), EvalError>(())
    })?;
    asking.finish()
}

/// The HTTP client of an evaluation: statuses are answers, not errors.
fn agent(config: &EvalConfig) -> ureq::Agent {
    ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(config.request_timeout))
            // A connection per question: a server that closes after each answer (the simulated
            // one does) can otherwise get the next question on a socket it no longer answers.
            .max_idle_connections(0)
            .max_idle_connections_per_host(0)
            .build(),
    )
}

/// The questions the workers share: the next one to ask, whether to stop, and what they found
/// so far (an answer per question, the first error).
struct Asking<'a> {
    config: &'a EvalConfig,
    questions: &'a [Question],
    agent: ureq::Agent,
    url: String,
    next: AtomicUsize,
    stop: AtomicBool,
    answers: Mutex<Vec<Option<Answer>>>,
    first_error: Mutex<Option<EvalError>>,
}

impl Asking<'_> {
    /// One worker: asks the next question until there is none left or one failed.
    fn work(&self) {
        while !self.stop.load(Ordering::Acquire) {
            let index = self.next.fetch_add(1, Ordering::Relaxed);
            let Some(question) = self.questions.get(index) else { break };
            match ask(&self.agent, &self.url, self.config, question) {
                Ok(given) => {
                    let correct = answers_match(&given, &question.answer);
                    let answer = Answer {
                        id: question.id.clone(),
                        expected: question.answer.clone(),
                        given,
                        correct,
                    };
                    let mut slots = self.answers.lock().unwrap_or_else(|e| e.into_inner());
                    slots[index] = Some(answer);
                }
                Err(problem) => {
                    self.stop.store(true, Ordering::Release);
                    let mut error = self.first_error.lock().unwrap_or_else(|e| e.into_inner());
                    error.get_or_insert(EvalError::Request {
                        id: question.id.clone(),
                        url: self.url.clone(),
                        problem,
                    });
                }
            }
        }
    }

    /// The evaluation once every worker ended: the first error, or every question's answer.
    fn finish(self) -> Result<Evaluation, EvalError> {
        if let Some(error) = self.first_error.into_inner().unwrap_or_else(|e| e.into_inner()) {
            return Err(error);
        }
        let answers = self.answers.into_inner().unwrap_or_else(|e| e.into_inner());
        let answers = answers.into_iter().zip(self.questions).map(|(answer, question)| {
            answer.ok_or_else(|| EvalError::Request {
                id: question.id.clone(),
                url: self.url.clone(),
                problem: RequestProblem::NeverAsked,
            })
        });
        Ok(Evaluation { answers: answers.collect::<Result<_, _>>()? })
    }
}

/// Sends one question; the answer's first non-empty line, or why there is none.
fn ask(
    agent: &ureq::Agent,
    url: &str,
    config: &EvalConfig,
    question: &Question,
) -> Result<String, RequestProblem> {
    let mut body = json!({
        "model": config.model,
        "prompt": prompt(question, config.reveal_expected),
        "max_tokens": config.max_tokens,
        "temperature": 0.0,
        "stream": false,
    });
    if let Some(seed) = config.seed {
        body["seed"] = json!(seed);
    }
    let mut response =
        agent.post(url).header("content-type", "application/json").send(body.to_string())?;
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string()?;
    if status != 200 {
        let text: String = text.trim().chars().take(300).collect();
        return Err(RequestProblem::Status { status, text });
    }
    let value: Value = serde_json::from_str(&text).map_err(RequestProblem::NotJson)?;
    let completion =
        value.pointer("/choices/0/text").and_then(Value::as_str).ok_or(RequestProblem::NoText)?;
    Ok(completion.lines().map(str::trim).find(|line| !line.is_empty()).unwrap_or("").to_owned())
}

impl Evaluation {
    /// How many questions were asked.
    pub fn questions(&self) -> u64 {
        self.answers.len() as u64
    }

    /// How many were answered right.
    pub fn correct(&self) -> u64 {
        self.answers.iter().filter(|answer| answer.correct).count() as u64
    }

    /// The gate's evidence of this evaluation, for `benchmark`.
    pub fn outcome(&self, benchmark: &str) -> Outcome {
        let per_question = self
            .answers
            .iter()
            .map(|answer| QuestionResult { id: answer.id.clone(), correct: answer.correct })
            .collect();
        Outcome::Accuracy {
            benchmark: benchmark.to_owned(),
            questions: self.questions(),
            correct: self.correct(),
            per_question: Some(per_question),
            cached: false,
            repeat: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_match(given: &str, expected: &str, expect: bool) {
        assert_eq!(answers_match(given, expected), expect, "{given:?} vs {expected:?}");
    }

    #[test]
    fn answers_are_compared_after_normalising() {
        let cases = [
            ("42", "42", true),
            ("  42.  ", "42", true),
            ("42.0", "42", true),
            ("4.2e1", "42", true),
            ("1,000", "1000", true),
            ("-3", "-3.00", true),
            ("43", "42", false),
            ("Paris!", "paris", true),
            ("New   York", "new york", true),
            ("not 42", "42", false),
            ("e", "e", true),
            ("yes?", "Yes", true),
            ("", "42", false),
            ("v1.2", "v1.2", true),
        ];
        for (given, expected, expect) in cases {
            check_match(given, expected, expect);
        }
    }

    #[test]
    fn the_prompt_reveals_the_answer_only_when_asked() {
        let question = Question { id: "q".into(), question: "6 x 7?".into(), answer: "42".into() };
        assert_eq!(
            prompt(&question, false),
            "Answer the question with only the answer.\nQuestion: 6 x 7?\nAnswer:"
        );
        assert!(prompt(&question, true).ends_with("\nAnswer:\nexpected: 42"));
    }
}
