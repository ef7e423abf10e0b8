//! The parsers on what real tools wrote: every speed, accuracy and sgl-eval file in
//! `tests/fixtures/realworld/` (its README has the provenance and what each tool reported),
//! read as the tool meant it. The JUnit files there are `runner/tests/junit.rs`'s, and the
//! sgl-eval run directory read from a folder is `runner/tests/accuracy.rs`'s.

use std::path::{Path, PathBuf};

use prgate_measure::accuracy::sgl_eval;
use prgate_measure::bench::{
    ParseError, RunError, median_tpot_at, parse_bench_serving_jsonl, parse_inferencex_json,
};

fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/realworld").join(path)
}

fn text(path: &str) -> String {
    std::fs::read_to_string(fixture(path)).unwrap_or_else(|error| panic!("{path}: {error}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// sglang's bench_serving files: (file, concurrency, requests asked for, median TPOT in ms,
/// completed). The runs at concurrency 1 and 64 asked for 16 and 200 prompts; the failed half
/// asked for 16 too (`--error-rate 0.5`).
#[test]
fn sglang_bench_serving_files_read_as_sglang_meant_them() {
    let cases = [
        ("c1.jsonl", 1, 16, 10.002746937007892, 16),
        ("c64-output-details-trimmed.jsonl", 64, 200, 10.026092224409435, 200),
    ];
    for (file, concurrency, requested, tpot, completed) in cases {
        let records = parse_bench_serving_jsonl(&text(&format!("sglang-bench-serving/{file}")))
            .unwrap_or_else(|error| panic!("{file}: {error}"));
        assert_eq!(records.len(), 1, "{file}");
        let record = &records[0];
        assert_eq!(record.concurrency, concurrency, "{file}");
        assert!(close(record.median_tpot_ms, tpot), "{file}: {}", record.median_tpot_ms);
        assert_eq!(record.completed, Some(completed), "{file}");
        assert_eq!((record.input_len, record.output_len), (Some(256), Some(128)), "{file}");
        assert_eq!(median_tpot_at(&records, concurrency, requested), Ok(record.median_tpot_ms));
    }

    // 7 of 16 requests completed: the file is valid, the run is not a measurement.
    let records =
        parse_bench_serving_jsonl(&text("sglang-bench-serving/half-requests-failed.jsonl"))
            .expect("a valid file");
    assert_eq!(records[0].completed, Some(7));
    let error = median_tpot_at(&records, 4, 16).expect_err("7 of 16 is not a run");
    assert_eq!(error, RunError::Incomplete { concurrency: 4, completed: 7, requested: 16 });
    assert_eq!(
        error.to_string(),
        "at concurrency 4, 7 of the 16 requests completed\nhint: the server failed the others, or the benchmark was not given {requests}"
    );
    assert_eq!(median_tpot_at(&records, 8, 16), Err(RunError::NoRecord { concurrency: 8 }));

    // One output token: sglang writes a median TPOT of 0.0, which is no time per token.
    let error = parse_bench_serving_jsonl(&text("sglang-bench-serving/output-len-1.jsonl"))
        .expect_err("no TPOT");
    assert!(
        matches!(error, ParseError::NoTimePerToken { field: "median_tpot_ms", value, .. } if value == 0.0),
        "{error}"
    );
    assert_eq!(
        error.to_string(),
        "line 1: field 'median_tpot_ms' is 0: the run measured no time between output tokens\nhint: an output length of 1 has none; give the benchmark at least 2 output tokens"
    );

    // Without --max-concurrency the run has no concurrency to pair by.
    let error = parse_bench_serving_jsonl(&text("sglang-bench-serving/no-max-concurrency.jsonl"))
        .expect_err("no concurrency");
    assert_eq!(
        error.to_string(),
        "line 1: missing field 'max_concurrency'\nhint: run the benchmark with --max-concurrency"
    );
}

/// A record's concurrency, median TPOT (ms) and `completed`.
type Expected = (u32, f64, Option<u64>);

/// InferenceX's files in each of its shapes: (file, [(concurrency, median TPOT in ms,
/// completed)]). `process_result.py` converts to seconds and drops `completed`.
#[test]
fn inferencex_files_read_in_every_shape() {
    let c1 = 10.000591322834698;
    let c8 = 10.010026614173425;
    let cases: [(&str, &[Expected]); 6] = [
        ("ix_c1.json", &[(1, c1, Some(16))]),
        ("ix_c8.json", &[(8, c8, Some(128))]),
        ("agg_ix_c1.json", &[(1, c1, None)]),
        ("agg_ix_c8.json", &[(8, 10.010026614173426, None)]),
        ("agg_collected.json", &[(1, c1, None), (8, 10.010026614173426, None)]),
        ("experimental-token-position-conc16.json", &[(16, 33.614_915_054_966_15, Some(160))]),
    ];
    for (file, expect) in cases {
        let records = parse_inferencex_json(&text(&format!("inferencex/{file}")))
            .unwrap_or_else(|error| panic!("{file}: {error}"));
        let got: Vec<(u32, f64, Option<u64>)> = records
            .iter()
            .map(|record| (record.concurrency, record.median_tpot_ms, record.completed))
            .collect();
        assert_eq!(got.len(), expect.len(), "{file}: {got:?}");
        for (got, expect) in got.iter().zip(expect) {
            assert_eq!((got.0, got.2), (expect.0, expect.2), "{file}");
            assert!((got.1 - expect.1).abs() < 1e-6, "{file}: {} for {}", got.1, expect.1);
        }
    }
    let records =
        parse_inferencex_json(&text("inferencex/experimental-token-position-conc16.json"))
            .expect("parses");
    let record = &records[0];
    assert!(record.median_ttft_ms.is_some_and(|ttft| close(ttft, 291.39942955225706)));
    assert!(record.p99_tpot_ms.is_some_and(|p99| (p99 - 71.7096967959967).abs() < 1e-9));
    assert_eq!(median_tpot_at(&records, 16, 160), Ok(record.median_tpot_ms));
}

/// sgl-eval 0.1.3's run directory: 10 gsm8k questions, all right, paired by their ids.
#[test]
fn an_sgl_eval_run_reads_into_accuracy_evidence() {
    let metrics = sgl_eval::parse_metrics(&text("sgl-eval/gsm8k-metrics.json")).expect("metrics");
    assert_eq!(
        (metrics.name.as_str(), metrics.num_examples, metrics.n_repeats, metrics.partial),
        ("gsm8k", 10, 1, false)
    );
    assert!(close(metrics.score, 1.0));
    let predictions =
        sgl_eval::parse_predictions(&text("sgl-eval/gsm8k-output-rs0.jsonl")).expect("predictions");
    // In completion order, as sgl-eval writes them (q5 finished after q7).
    let ids: Vec<&str> = predictions.iter().map(|question| question.id.as_str()).collect();
    assert_eq!(ids, ["q0", "q1", "q2", "q3", "q4", "q6", "q7", "q5", "q8", "q9"]);
    assert!(predictions.iter().all(|question| question.correct));
}
