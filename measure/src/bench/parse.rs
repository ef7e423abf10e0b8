//! Parsers of external speed results into [`SpeedRecord`]s, by the real field names of the
//! programs that write them. No I/O: text in, records out.
//!
//! - sglang `bench_serving` appends one JSON object per run to its `--output-file` (JSONL):
//!   `max_concurrency`, `random_input_len`, `random_output_len`, `completed`,
//!   `request_throughput`, `output_throughput`, `median_tpot_ms`, `mean_ttft_ms`, ... Python's
//!   `json.dumps` writes `Infinity` (the default `request_rate`) and `NaN` (a statistic of no
//!   request), which are not JSON; they are read as `null`.
//! - InferenceX writes, per run, the result JSON of its `utils/bench_serving/benchmark_serving.py
//!   --save-result` (`max_concurrency`, `median_tpot_ms`, `median_e2el_ms`, ...); its
//!   `utils/process_result.py` turns that into `agg_*.json` (`conc`, `isl`, `osl`, and every
//!   `*_ms` field renamed without `_ms` and converted to seconds, e.g. `median_tpot`), and
//!   `utils/collect_results.py` gathers those into one JSON array; its experimental
//!   token-position scripts write vLLM's run fields (`max_concurrency`, `completed`) with the
//!   statistics in seconds (`median_tpot`). All four shapes are read.
//! - A median TPOT of 0 (sglang writes 0.0 when each request has one output token) is an
//!   error: a valid run with nothing to compare ([`ParseError::NoTimePerToken`]).
//!   [`median_tpot_at`] picks a run's record and refuses one where not every request completed.

use serde_json::{Map, Value};

/// One speed measurement at one concurrency, whichever program measured it. Times are in
/// milliseconds; a field the source does not report is `None`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SpeedRecord {
    /// The configured concurrency (`max_concurrency`, InferenceX `conc`).
    pub concurrency: u32,
    /// Median time per output token, the number the gate compares.
    pub median_tpot_ms: f64,
    /// Mean time per output token.
    pub mean_tpot_ms: Option<f64>,
    /// 99th percentile of time per output token.
    pub p99_tpot_ms: Option<f64>,
    /// Median time to first token.
    pub median_ttft_ms: Option<f64>,
    /// Mean time to first token.
    pub mean_ttft_ms: Option<f64>,
    /// 99th percentile of time to first token.
    pub p99_ttft_ms: Option<f64>,
    /// Median inter-token latency.
    pub median_itl_ms: Option<f64>,
    /// Mean inter-token latency.
    pub mean_itl_ms: Option<f64>,
    /// Median end-to-end latency.
    pub median_e2e_latency_ms: Option<f64>,
    /// Successful requests per second.
    pub request_throughput: Option<f64>,
    /// Output tokens per second.
    pub output_throughput: Option<f64>,
    /// Successful requests.
    pub completed: Option<u64>,
    /// The configured input length in tokens.
    pub input_len: Option<u64>,
    /// The configured output length in tokens.
    pub output_len: Option<u64>,
    /// The prompt tokens of all completed requests, as the benchmark counted them.
    pub total_input_tokens: Option<u64>,
    /// The output tokens of all completed requests, as the benchmark counted them.
    pub total_output_tokens: Option<u64>,
}

/// Where in the parsed text a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// A line of a JSONL file, counted from 1.
    Line(usize),
    /// An element of a JSON array, counted from 1.
    Record(usize),
    /// The single object of a JSON file.
    Document,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Line(line) => write!(f, "line {line}"),
            Location::Record(record) => write!(f, "record {record}"),
            Location::Document => f.write_str("the result"),
        }
    }
}

/// Why a speed result cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// The text is not JSON.
    #[error("{at}: invalid JSON: {source}")]
    Json {
        /// Where.
        at: Location,
        /// The JSON error, with its column.
        #[source]
        source: serde_json::Error,
    },
    /// A record is not a JSON object.
    #[error("{at}: expected a JSON object, found {found}")]
    NotAnObject {
        /// Where.
        at: Location,
        /// What was found instead.
        found: &'static str,
    },
    /// A required field is absent or null.
    #[error("{at}: missing field '{field}'{hint}")]
    Missing {
        /// Where.
        at: Location,
        /// The field's name in the source format.
        field: &'static str,
        /// Extra guidance, starting with a newline, or empty.
        hint: &'static str,
    },
    /// A field holds the wrong kind of value.
    #[error("{at}: field '{field}' must be {expected}, found {found}")]
    Type {
        /// Where.
        at: Location,
        /// The field's name in the source format.
        field: &'static str,
        /// What it must be.
        expected: &'static str,
        /// The value found.
        found: String,
    },
    /// The run completed no request, so its statistics are meaningless.
    #[error("{at}: field 'completed' is 0: every request of this run failed")]
    NothingCompleted {
        /// Where.
        at: Location,
    },
    /// An InferenceX object of neither known shape.
    #[error(
        "{at}: not an InferenceX result: it has neither 'median_tpot_ms' (benchmark_serving.py), 'conc' and 'median_tpot' (process_result.py), nor 'max_concurrency' and 'median_tpot' (the token-position scripts)"
    )]
    UnknownShape {
        /// Where.
        at: Location,
    },
    /// The median time per output token is 0 (or less): with one output token per request
    /// there is no time between tokens, and sglang writes 0.0. A valid run, but no TPOT to
    /// compare.
    #[error(
        "{at}: field '{field}' is {value}: the run measured no time between output tokens\nhint: an output length of 1 has none; give the benchmark at least 2 output tokens"
    )]
    NoTimePerToken {
        /// Where.
        at: Location,
        /// The field's name in the source format.
        field: &'static str,
        /// The value found.
        value: f64,
    },
    /// The text holds no record at all.
    #[error("no speed record in the input")]
    Empty,
}

/// Why a benchmark's records do not give the run's median TPOT.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// No record is at the run's concurrency.
    #[error("no result at concurrency {concurrency}")]
    NoRecord {
        /// The run's concurrency.
        concurrency: u32,
    },
    /// Fewer (or more) requests completed than the run asked for: the others failed, and a
    /// median over the survivors is not the run's.
    #[error(
        "at concurrency {concurrency}, {completed} of the {requested} requests completed\nhint: the server failed the others, or the benchmark was not given {{requests}}"
    )]
    Incomplete {
        /// The run's concurrency.
        concurrency: u32,
        /// `completed`, as the benchmark wrote it.
        completed: u64,
        /// The measured requests the run asked for (`{requests}`).
        requested: u64,
    },
    /// The benchmark measured another workload than the run asked for: other lengths
    /// configured, or far fewer (or more) tokens per request than asked.
    #[error(
        "at concurrency {concurrency}, {detail}: a run timed on another workload has no TPOT\nhint: give the benchmark {{input_len}} and {{output_len}}, and a server that honours ignore_eos"
    )]
    OtherWorkload {
        /// The run's concurrency.
        concurrency: u32,
        /// What differs, with both numbers.
        detail: String,
    },
}

/// The median TPOT of a run at `concurrency` that asked for `requested` measured requests: the
/// last record at that concurrency (a benchmark appends one per run), which must say that
/// every request completed when it says how many did (sglang and the raw InferenceX files do;
/// `process_result.py`'s `agg_*.json` does not).
pub fn median_tpot_at(
    records: &[SpeedRecord],
    concurrency: u32,
    requested: u64,
) -> Result<f64, RunError> {
    record_at(records, concurrency, requested).map(|record| record.median_tpot_ms)
}

/// The record of the run at `concurrency` ([`median_tpot_at`]'s rules).
pub fn record_at(
    records: &[SpeedRecord],
    concurrency: u32,
    requested: u64,
) -> Result<&SpeedRecord, RunError> {
    let record = records
        .iter()
        .rev()
        .find(|record| record.concurrency == concurrency)
        .ok_or(RunError::NoRecord { concurrency })?;
    match record.completed {
        Some(completed) if completed != requested => {
            Err(RunError::Incomplete { concurrency, completed, requested })
        }
        _ => Ok(record),
    }
}

/// How little of the asked length a request of an external benchmark may average: half. An
/// external benchmark may sample lengths below the asked one (bench_serving's and InferenceX's
/// `--random-range-ratio`, 0.9 of it on average at 0.8); a server that ignores `ignore_eos`
/// stops far earlier.
pub const EXTERNAL_LENGTH_FLOOR: f64 = 0.5;

/// Whether `record` measured the lengths the run asked for (`input_len`, `output_len` tokens
/// per request), as far as it says: its configured lengths must be those, and its token totals
/// over its completed requests must average at least [`EXTERNAL_LENGTH_FLOOR`] of the asked
/// length a request and at most the asked length plus the built-in client's tolerance
/// ([`crate::bench::OUTPUT_TOLERANCE`], [`crate::bench::INPUT_TOLERANCE`]). A record that says
/// neither is taken as it is.
pub fn check_workload(
    record: &SpeedRecord,
    input_len: u64,
    output_len: u64,
) -> Result<(), RunError> {
    let concurrency = record.concurrency;
    let other = |detail: String| Err(RunError::OtherWorkload { concurrency, detail });
    for (what, configured, asked) in
        [("input", record.input_len, input_len), ("output", record.output_len, output_len)]
    {
        if let Some(configured) = configured
            && configured != asked
        {
            return other(format!(
                "the benchmark ran with {what} length {configured}, the run asked for {asked}"
            ));
        }
    }
    let Some(completed) = record.completed.filter(|completed| *completed > 0) else {
        return Ok(());
    };
    for (what, total, asked, slack) in [
        ("output", record.total_output_tokens, output_len, crate::bench::output_slack(output_len)),
        ("prompt", record.total_input_tokens, input_len, crate::bench::input_slack(input_len)),
    ] {
        let Some(total) = total else { continue };
        let per_request = total as f64 / completed as f64;
        let floor = (asked as f64 * EXTERNAL_LENGTH_FLOOR).floor();
        let ceiling = asked.saturating_add(slack);
        if per_request < floor || per_request > ceiling as f64 {
            return other(format!(
                "its {completed} requests had {total} {what} tokens, {per_request:.1} a request, where the run asked for {asked} (at least {floor} and at most {ceiling} a request)"
            ));
        }
    }
    Ok(())
}

/// Parses sglang `bench_serving` JSONL output: one record per non-blank line.
///
/// Required per line: `max_concurrency` (a positive integer; run `bench_serving` with
/// `--max-concurrency`) and `median_tpot_ms`. The lengths come from `random_input_len` and
/// `random_output_len`, else `input_len` and `output_len`.
pub fn parse_bench_serving_jsonl(text: &str) -> Result<Vec<SpeedRecord>, ParseError> {
    let mut records = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = Location::Line(index + 1);
        let value: Value = serde_json::from_str(&python_json_to_json(line))
            .map_err(|source| ParseError::Json { at, source })?;
        let object = as_object(&value, at)?;
        let fields = Fields { object, at };
        let statistics = millisecond_statistics(&fields, "median_e2e_latency_ms")?;
        records.push(SpeedRecord {
            input_len: first_some(fields.count("random_input_len")?, || fields.count("input_len"))?,
            output_len: first_some(fields.count("random_output_len")?, || {
                fields.count("output_len")
            })?,
            ..statistics
        });
    }
    if records.is_empty() {
        return Err(ParseError::Empty);
    }
    Ok(records)
}

/// Parses an InferenceX result: the raw `benchmark_serving.py --save-result` JSON, one
/// `agg_*.json` of `process_result.py`, or the JSON array `collect_results.py` writes.
pub fn parse_inferencex_json(text: &str) -> Result<Vec<SpeedRecord>, ParseError> {
    let value: Value = serde_json::from_str(&python_json_to_json(text))
        .map_err(|source| ParseError::Json { at: Location::Document, source })?;
    let records = match &value {
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(index, item)| inferencex_record(item, Location::Record(index + 1)))
            .collect::<Result<Vec<_>, _>>()?,
        _ => vec![inferencex_record(&value, Location::Document)?],
    };
    if records.is_empty() {
        return Err(ParseError::Empty);
    }
    Ok(records)
}

fn inferencex_record(value: &Value, at: Location) -> Result<SpeedRecord, ParseError> {
    let object = as_object(value, at)?;
    let fields = Fields { object, at };
    if object.contains_key("median_tpot_ms") {
        // benchmark_serving.py --save-result: milliseconds, vLLM's names.
        millisecond_statistics(&fields, "median_e2el_ms")
    } else if object.contains_key("conc") && object.contains_key("median_tpot") {
        // process_result.py: seconds, `_ms` dropped from the names; throughputs per GPU only.
        let statistics = seconds_statistics(&fields, "conc")?;
        Ok(SpeedRecord {
            input_len: fields.count("isl")?,
            output_len: fields.count("osl")?,
            ..statistics
        })
    } else if object.contains_key("max_concurrency") && object.contains_key("median_tpot") {
        // The experimental token-position scripts: vLLM's names for the run, seconds and no
        // `_ms` for the statistics.
        let statistics = seconds_statistics(&fields, "max_concurrency")?;
        Ok(SpeedRecord {
            request_throughput: fields.number("request_throughput")?,
            output_throughput: fields.number("output_throughput")?,
            completed: fields.completed()?,
            ..statistics
        })
    } else {
        Err(ParseError::UnknownShape { at })
    }
}

fn first_some(
    first: Option<u64>,
    second: impl FnOnce() -> Result<Option<u64>, ParseError>,
) -> Result<Option<u64>, ParseError> {
    match first {
        Some(value) => Ok(Some(value)),
        None => second(),
    }
}

fn as_object(value: &Value, at: Location) -> Result<&Map<String, Value>, ParseError> {
    value.as_object().ok_or(ParseError::NotAnObject { at, found: kind(value) })
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A benchmark_serving.py record in milliseconds under vLLM's names (`median_tpot_ms`, …):
/// its statistics, throughputs and completed count, the lengths left `None` for the caller.
/// The two writers differ only in the median end-to-end latency's name, `e2e_field`.
fn millisecond_statistics(
    fields: &Fields<'_>,
    e2e_field: &'static str,
) -> Result<SpeedRecord, ParseError> {
    Ok(SpeedRecord {
        concurrency: fields.concurrency("max_concurrency")?,
        median_tpot_ms: fields.time_per_token("median_tpot_ms", 1.0)?,
        mean_tpot_ms: fields.number("mean_tpot_ms")?,
        p99_tpot_ms: fields.number("p99_tpot_ms")?,
        median_ttft_ms: fields.number("median_ttft_ms")?,
        mean_ttft_ms: fields.number("mean_ttft_ms")?,
        p99_ttft_ms: fields.number("p99_ttft_ms")?,
        median_itl_ms: fields.number("median_itl_ms")?,
        mean_itl_ms: fields.number("mean_itl_ms")?,
        median_e2e_latency_ms: fields.number(e2e_field)?,
        request_throughput: fields.number("request_throughput")?,
        output_throughput: fields.number("output_throughput")?,
        completed: fields.completed()?,
        input_len: None,
        output_len: None,
        total_input_tokens: fields.count("total_input_tokens")?,
        total_output_tokens: fields.count("total_output_tokens")?,
    })
}

/// The latency statistics of an InferenceX record that gives them in seconds under names without
/// `_ms` (`process_result.py` and the token-position scripts), converted to milliseconds; the
/// throughputs, the completed count and the lengths are left `None` for the caller to fill.
fn seconds_statistics(
    fields: &Fields<'_>,
    concurrency_field: &'static str,
) -> Result<SpeedRecord, ParseError> {
    let ms = |field| fields.number(field).map(|value| value.map(|s| s * 1000.0));
    Ok(SpeedRecord {
        concurrency: fields.concurrency(concurrency_field)?,
        median_tpot_ms: fields.time_per_token("median_tpot", 1000.0)?,
        mean_tpot_ms: ms("mean_tpot")?,
        p99_tpot_ms: ms("p99_tpot")?,
        median_ttft_ms: ms("median_ttft")?,
        mean_ttft_ms: ms("mean_ttft")?,
        p99_ttft_ms: ms("p99_ttft")?,
        median_itl_ms: ms("median_itl")?,
        mean_itl_ms: ms("mean_itl")?,
        median_e2e_latency_ms: ms("median_e2el")?,
        request_throughput: None,
        output_throughput: None,
        completed: None,
        input_len: None,
        output_len: None,
        total_input_tokens: None,
        total_output_tokens: None,
    })
}

/// The fields of one record, read by name with errors that name the field.
struct Fields<'a> {
    object: &'a Map<String, Value>,
    at: Location,
}

impl Fields<'_> {
    /// The value of `field`, `None` when absent or null.
    fn get(&self, field: &str) -> Option<&Value> {
        self.object.get(field).filter(|value| !value.is_null())
    }

    fn type_error(&self, field: &'static str, expected: &'static str, value: &Value) -> ParseError {
        ParseError::Type { at: self.at, field, expected, found: value.to_string() }
    }

    fn number(&self, field: &'static str) -> Result<Option<f64>, ParseError> {
        self.read(field, "a number", Value::as_f64)
    }

    fn required_number(&self, field: &'static str) -> Result<f64, ParseError> {
        self.number(field)?.ok_or(ParseError::Missing { at: self.at, field, hint: "" })
    }

    /// A required median TPOT, times `scale` (1000 for seconds): positive, else
    /// [`ParseError::NoTimePerToken`].
    fn time_per_token(&self, field: &'static str, scale: f64) -> Result<f64, ParseError> {
        let value = self.required_number(field)?;
        if !(value > 0.0 && value.is_finite()) {
            return Err(ParseError::NoTimePerToken { at: self.at, field, value });
        }
        Ok(value * scale)
    }

    fn count(&self, field: &'static str) -> Result<Option<u64>, ParseError> {
        self.read(field, "a non-negative integer", Value::as_u64)
    }

    /// A field as JSON gives it, or as a string of it: a metadata field of InferenceX may be a
    /// string such as "12.5".
    fn read<T: std::str::FromStr>(
        &self,
        field: &'static str,
        expected: &'static str,
        from_json: fn(&Value) -> Option<T>,
    ) -> Result<Option<T>, ParseError> {
        self.get(field)
            .map(|value| {
                let parsed = match value {
                    Value::String(text) => text.trim().parse::<T>().ok(),
                    other => from_json(other),
                };
                parsed.ok_or_else(|| self.type_error(field, expected, value))
            })
            .transpose()
    }

    fn concurrency(&self, field: &'static str) -> Result<u32, ParseError> {
        let value = self.get(field).ok_or(ParseError::Missing {
            at: self.at,
            field,
            hint: "\nhint: run the benchmark with --max-concurrency",
        })?;
        let count = match value {
            Value::String(text) => text.trim().parse::<u32>().ok(),
            other => other.as_u64().and_then(|count| u32::try_from(count).ok()),
        };
        count
            .filter(|&count| count > 0)
            .ok_or_else(|| self.type_error(field, "a positive integer", value))
    }

    fn completed(&self) -> Result<Option<u64>, ParseError> {
        let completed = self.count("completed")?;
        if completed == Some(0) {
            return Err(ParseError::NothingCompleted { at: self.at });
        }
        Ok(completed)
    }
}

/// Replaces Python's non-JSON number literals (`NaN`, `Infinity`, `-Infinity`) outside
/// strings with `null`.
fn python_json_to_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut in_string = false;
    while let Some(c) = rest.chars().next() {
        if in_string {
            match c {
                '\\' => {
                    let escaped: String = rest.chars().take(2).collect();
                    out.push_str(&escaped);
                    rest = &rest[escaped.len()..];
                    continue;
                }
                '"' => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
        } else if let Some(literal) =
            ["NaN", "Infinity", "-Infinity"].into_iter().find(|literal| rest.starts_with(literal))
        {
            out.push_str("null");
            rest = &rest[literal.len()..];
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_literals_become_null_outside_strings_only() {
        for (input, expect) in [
            (
                r#"{"a": NaN, "b": Infinity, "c": -Infinity}"#,
                r#"{"a": null, "b": null, "c": null}"#,
            ),
            (r#"{"s": "NaN \" Infinity", "n": 1}"#, r#"{"s": "NaN \" Infinity", "n": 1}"#),
            (r#"["é", NaN]"#, r#"["é", null]"#),
        ] {
            assert_eq!(python_json_to_json(input), expect);
        }
    }
}
