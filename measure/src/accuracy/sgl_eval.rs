//! sgl-eval's results (`sgl-eval run <benchmark> --out-dir DIR`), parsed into accuracy evidence.
//!
//! sgl-eval writes each run into `DIR/sgl_eval_<benchmark>_<stamp>/`; finding that folder and
//! reading its files (below the container's folder, as untrusted files) is the runner's
//! (`prgate_runner::accuracy::sgl_eval`), which hands their text to [`parse_metrics`] and
//! [`parse_predictions`]. The fields read, by their names in sgl-eval's `sgl_eval/metrics.py` (`dump_run`) and
//! `sgl_eval/cli.py` (`cmd_run`):
//!
//! - `metrics.json`: `name` (the benchmark), `num_examples` (the examples scored), `n_repeats`,
//!   `aggregate.score` (the headline accuracy, a fraction from 0 to 1: the mean of the 0/1
//!   scores when `n_repeats` is 1), and `partial` (present and `true` when the run was cut
//!   short by Ctrl-C). Everything else (`latency_seconds`, `output_throughput_tps`, `model`,
//!   `gen`, `aggregate.no_answer`, `pass@k`, ...) is ignored.
//! - `output-rs0.jsonl`, when the run wrote predictions (it does unless
//!   `--no-dump-predictions`): one JSON object per scored sample, in completion order, with
//!   `id` (the example's id; written by sgl-eval versions whose `sample_to_pred` has it) and
//!   `symbolic_correct` (a boolean: the math and multiple-choice benchmarks' score field).
//!   Benchmarks that score into another field (RULER2's float score) are not read per question.
//!
//! The evidence counts right answers, so only whole single-shot runs are evidence: a run with
//! `n_repeats` above 1 (whose score is an average over repeats) or a `partial` run is an error
//! naming the field. The count of right answers is `aggregate.score × num_examples`, which must
//! be a whole number; when predictions are read, their count and right answers must agree
//! with `metrics.json`.

use std::collections::BTreeSet;

use prgate_gate::evidence::{Outcome, QuestionResult};
use serde_json::Value;

use super::ParseError;

/// The file sgl-eval writes its metrics to, in the run directory.
pub const METRICS_FILE: &str = "metrics.json";
/// The per-sample predictions of the first (here: only) repeat, in the run directory.
pub const PREDICTIONS_FILE: &str = "output-rs0.jsonl";

/// The fields of sgl-eval's `metrics.json` that the evidence needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Metrics {
    /// `name`: the benchmark.
    pub name: String,
    /// `num_examples`: how many examples were scored.
    pub num_examples: u64,
    /// `n_repeats`: samples per example.
    pub n_repeats: u64,
    /// `aggregate.score`: the headline accuracy, 0 to 1.
    pub score: f64,
    /// `partial`: the run was cut short.
    pub partial: bool,
}

/// Parses `metrics.json`.
pub fn parse_metrics(text: &str) -> Result<Metrics, ParseError> {
    let document = |field: &str, problem: String| ParseError {
        line: None,
        field: Some(field.to_owned()),
        problem,
    };
    let value: Value = serde_json::from_str(text).map_err(|error| ParseError {
        line: None,
        field: None,
        problem: format!("invalid JSON: {error}"),
    })?;
    let name = match value.get("name") {
        Some(Value::String(name)) => name.clone(),
        Some(_) => return Err(document("name", "not a string".into())),
        None => return Err(document("name", "missing".into())),
    };
    let count = |field: &str| match value.get(field) {
        Some(number) => {
            number.as_u64().ok_or_else(|| document(field, format!("{number} is not a count")))
        }
        None => Err(document(field, "missing".into())),
    };
    let num_examples = count("num_examples")?;
    let n_repeats = count("n_repeats")?;
    let score = match value.pointer("/aggregate/score") {
        Some(number) => number
            .as_f64()
            .filter(|score| (0.0..=1.0).contains(score))
            .ok_or_else(|| document("aggregate.score", format!("{number} is not from 0 to 1")))?,
        None => return Err(document("aggregate.score", "missing".into())),
    };
    let partial = match value.get("partial") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(partial)) => *partial,
        Some(other) => return Err(document("partial", format!("{other} is not a boolean"))),
    };
    Ok(Metrics { name, num_examples, n_repeats, score, partial })
}

/// Parses `output-rs0.jsonl` into one result per example, in the file's order.
pub fn parse_predictions(text: &str) -> Result<Vec<QuestionResult>, ParseError> {
    let mut results = Vec::new();
    let mut ids = BTreeSet::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = |field: Option<&str>, problem: String| ParseError {
            line: Some(index + 1),
            field: field.map(str::to_owned),
            problem,
        };
        let value: Value = serde_json::from_str(line)
            .map_err(|error| at(None, format!("invalid JSON: {error}")))?;
        let id = match value.get("id") {
            Some(Value::String(id)) => id.clone(),
            Some(Value::Number(id)) => id.to_string(),
            Some(other) => return Err(at(Some("id"), format!("{other} is not a string"))),
            None => {
                return Err(at(
                    Some("id"),
                    "missing\nhint: sgl-eval versions before per-sample ids cannot be paired \
                     per question"
                        .into(),
                ));
            }
        };
        let correct = match value.get("symbolic_correct") {
            Some(Value::Bool(correct)) => *correct,
            Some(other) => {
                return Err(at(Some("symbolic_correct"), format!("{other} is not a boolean")));
            }
            None => return Err(at(Some("symbolic_correct"), "missing".into())),
        };
        if !ids.insert(id.clone()) {
            return Err(at(Some("id"), format!("'{id}' appears twice")));
        }
        results.push(QuestionResult { id, correct });
    }
    Ok(results)
}

/// The gate's evidence of one sgl-eval run, for `benchmark`: from its metrics and, when given,
/// its per-question results.
pub fn outcome(
    benchmark: &str,
    metrics: &Metrics,
    per_question: Option<Vec<QuestionResult>>,
) -> Result<Outcome, ParseError> {
    let correct = correct_answers(metrics)?;
    if let Some(per_question) = &per_question {
        let right = per_question.iter().filter(|result| result.correct).count() as u64;
        if per_question.len() as u64 != metrics.num_examples || right != correct {
            return Err(ParseError {
                line: None,
                field: None,
                problem: format!(
                    "the predictions hold {} examples with {right} right, but metrics.json says \
                     {correct} of {}",
                    per_question.len(),
                    metrics.num_examples
                ),
            });
        }
    }
    Ok(Outcome::Accuracy {
        benchmark: benchmark.to_owned(),
        questions: metrics.num_examples,
        correct,
        per_question,
        cached: false,
        repeat: None,
    })
}

/// How many right answers `metrics` count: a complete run, with one repeat, that scored
/// examples, and whose score is a whole number of them.
fn correct_answers(metrics: &Metrics) -> Result<u64, ParseError> {
    let problem = |field: &str, problem: String| ParseError {
        line: None,
        field: Some(field.to_owned()),
        problem,
    };
    if metrics.partial {
        return Err(problem("partial", "the run was cut short; it is not evidence".into()));
    }
    if metrics.n_repeats != 1 {
        return Err(problem(
            "n_repeats",
            format!(
                "{} repeats give an average, not a count of right answers\nhint: run sgl-eval \
                 with --n-repeats 1",
                metrics.n_repeats
            ),
        ));
    }
    if metrics.num_examples == 0 {
        return Err(problem("num_examples", "no example was scored".into()));
    }
    let exact = metrics.score * metrics.num_examples as f64;
    let correct = exact.round();
    if (exact - correct).abs() > 1e-6 * metrics.num_examples as f64 {
        return Err(problem(
            "aggregate.score",
            format!(
                "{} of {} examples is not a whole number of right answers",
                metrics.score, metrics.num_examples
            ),
        ));
    }
    Ok(correct as u64)
}
