//! `runner::accuracy`: the built-in evaluator against the simulated server on a real socket,
//! and sgl-eval's `metrics.json` and predictions in their real shape.

use std::num::NonZeroUsize;
use std::path::Path;

use prgate_gate::evidence::{Outcome, QuestionResult};
use prgate_runner::accuracy::sgl_eval::{self, Metrics};
use prgate_runner::accuracy::{
    EvalConfig, EvalError, Evaluation, Question, evaluate, parse_dataset, read_dataset,
};
use prgate_sim_server::{self as sim_server, Probability, Profile, RunningServer};

fn dataset(count: usize) -> Vec<Question> {
    (0..count)
        .map(|index| Question {
            id: format!("q{index}"),
            question: format!("What is {index} plus {index}?"),
            answer: if index % 3 == 0 { format!("{}", index * 2) } else { format!("word{index}") },
        })
        .collect()
}

fn server(accuracy: f64, seed: u64) -> RunningServer {
    let profile = Profile {
        accuracy: Probability::try_from(accuracy).expect("a probability"),
        seed,
        time_to_first_token: std::time::Duration::from_millis(1),
        time_per_output_token: std::time::Duration::from_millis(1),
        log_file: Some(std::env::temp_dir().join("prgate-accuracy-test-sim.log")),
        ..Profile::default()
    };
    sim_server::serve(profile, "127.0.0.1:0".parse().expect("an address")).expect("a server")
}

fn run(server: &RunningServer, questions: &[Question], limit: Option<usize>) -> Evaluation {
    let mut config = EvalConfig::new(&server.url(), "sim-model");
    config.reveal_expected = true;
    config.limit = limit;
    config.concurrency = NonZeroUsize::new(4).expect("non-zero");
    evaluate(&config, questions).expect("an evaluation")
}

#[test]
fn a_server_that_is_always_right_gets_every_question() {
    let server = server(1.0, 7);
    let evaluation = run(&server, &dataset(20), None);
    assert_eq!((evaluation.questions(), evaluation.correct()), (20, 20));
    let ids: Vec<&str> = evaluation.answers.iter().map(|a| a.id.as_str()).collect();
    let expect: Vec<String> = (0..20).map(|i| format!("q{i}")).collect();
    assert_eq!(ids, expect, "answers in the dataset's order");
    assert!(evaluation.answers.iter().all(|a| a.given == a.expected));
}

#[test]
fn a_server_that_is_never_right_gets_none() {
    let server = server(0.0, 7);
    let evaluation = run(&server, &dataset(12), None);
    assert_eq!((evaluation.questions(), evaluation.correct()), (12, 0));
    // The simulated server's wrong answers: the integer plus one, or `not <answer>`.
    assert_eq!(evaluation.answers[0].given, "1");
    assert_eq!(evaluation.answers[1].given, "not word1");
}

#[test]
fn half_right_is_the_same_for_the_same_seed_and_differs_for_another() {
    let questions = dataset(60);
    let first = run(&server(0.5, 11), &questions, None);
    let again = run(&server(0.5, 11), &questions, None);
    let other = run(&server(0.5, 12), &questions, None);
    assert_eq!(first, again, "deterministic for a seed");
    assert_ne!(first.answers, other.answers, "another seed answers other questions right");
    let correct = first.correct();
    assert!((15..=45).contains(&correct), "{correct} of 60 at accuracy 0.5");

    let outcome = first.outcome("sim-qa");
    let Outcome::Accuracy { benchmark, questions, correct: right, per_question, cached, .. } =
        outcome
    else {
        panic!("an accuracy outcome");
    };
    assert_eq!((benchmark.as_str(), questions, right, cached), ("sim-qa", 60, correct, false));
    let per_question = per_question.expect("per-question results");
    assert_eq!(per_question.len(), 60);
    assert_eq!(per_question.iter().filter(|q| q.correct).count() as u64, correct);
}

#[test]
fn without_the_hook_the_simulated_server_gives_no_answer() {
    let server = server(1.0, 7);
    let mut config = EvalConfig::new(&server.url(), "sim-model");
    config.max_tokens = 2;
    let evaluation = evaluate(&config, &dataset(3)).expect("an evaluation");
    assert_eq!(evaluation.correct(), 0);
    assert!(evaluation.answers.iter().all(|a| a.given == "sim sim"));
}

#[test]
fn the_limit_asks_only_the_first_questions() {
    let server = server(1.0, 7);
    let evaluation = run(&server, &dataset(10), Some(4));
    let ids: Vec<&str> = evaluation.answers.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, ["q0", "q1", "q2", "q3"]);
}

#[test]
fn a_failing_server_fails_the_evaluation() {
    let profile = Profile {
        error_rate: Probability::ALWAYS,
        log_file: Some(std::env::temp_dir().join("prgate-accuracy-test-sim.log")),
        ..Profile::default()
    };
    let server =
        sim_server::serve(profile, "127.0.0.1:0".parse().expect("an address")).expect("a server");
    let error = evaluate(&EvalConfig::new(&server.url(), "m"), &dataset(3)).expect_err("500s");
    assert!(matches!(error, EvalError::Request { .. }), "{error}");
    assert!(error.to_string().contains("http status 500"), "{error}");
    let error = evaluate(&EvalConfig::new(&server.url(), "m"), &[]).expect_err("no questions");
    assert!(matches!(error, EvalError::NoQuestions));
}

#[test]
fn parses_a_dataset_and_names_the_line_and_field_of_an_error() {
    let text = concat!(
        "{\"id\": \"a\", \"question\": \"6 x 7?\", \"answer\": \"42\", \"source\": \"x\"}\n",
        "\n",
        "{\"id\": 2, \"question\": \"pi?\", \"answer\": 3.14}\n",
    );
    assert_eq!(
        parse_dataset(text).expect("a dataset"),
        [
            Question { id: "a".into(), question: "6 x 7?".into(), answer: "42".into() },
            Question { id: "2".into(), question: "pi?".into(), answer: "3.14".into() },
        ]
    );

    let good = "{\"id\": \"a\", \"question\": \"q\", \"answer\": \"1\"}\n";
    let cases = [
        ("{\"id\": \"a\", \"question\": \"q\"}", "line 1: field 'answer': missing"),
        (
            "{\"id\": \"a\", \"question\": \"q\", \"answer\": \"1\"}\n{\"id\": \"a\", \"question\": \"q\", \"answer\": \"2\"}",
            "line 2: field 'id': 'a' appears twice",
        ),
        ("[1]", "line 1: not a JSON object"),
        (
            "{\"id\": null, \"question\": \"q\", \"answer\": \"1\"}",
            "line 1: field 'id': not a non-empty string or an integer",
        ),
        (
            "{\"id\": \"b\", \"question\": 5, \"answer\": \"1\"}",
            "line 1: field 'question': not a string",
        ),
        (
            "{\"id\": \"b\", \"question\": \"q\", \"answer\": [1]}",
            "line 1: field 'answer': not a string or a number",
        ),
    ];
    for (text, expect) in cases {
        assert_eq!(parse_dataset(text).expect_err(text).to_string(), expect);
    }
    let broken = format!("{good}{{\"id\": ");
    let message = parse_dataset(&broken).expect_err("cut JSON").to_string();
    assert!(message.starts_with("line 2: invalid JSON: "), "{message}");

    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("qa.jsonl");
    std::fs::write(&path, &broken).expect("the dataset");
    let message =
        read_dataset(dir.path(), Path::new("qa.jsonl")).expect_err("cut JSON").to_string();
    assert!(message.starts_with(&format!("error parsing {}: line 2: ", path.display())));

    // A dataset that is a link to a host file is refused, never read nor sent to a server.
    let host = dir.path().join("host-file");
    std::fs::write(&host, good).expect("a host file");
    std::fs::create_dir(dir.path().join("tree")).expect("a tree");
    std::os::unix::fs::symlink(&host, dir.path().join("tree/qa.jsonl")).expect("a link");
    let tree = dir.path().join("tree");
    let message = read_dataset(&tree, Path::new("qa.jsonl")).expect_err("a link").to_string();
    assert!(
        message.ends_with("`qa.jsonl` is a symbolic link, which is not followed; it is not read"),
        "{message}"
    );
    let message = read_dataset(&tree, Path::new("../qa.jsonl")).expect_err("outside").to_string();
    assert!(message.contains("the path leaves its tree"), "{message}");
}

/// A `metrics.json` as sgl-eval's `dump_run` writes it for a single-shot run (`json.dumps`
/// with `indent=2, sort_keys=True`, the run metadata merged in).
const METRICS_SINGLE_SHOT: &str = r#"{
  "aggregate": {
    "no_answer": 0.0,
    "score": 0.75
  },
  "base_url": "http://127.0.0.1:30000/v1",
  "gen": {
    "chat_template_kwargs": null,
    "extra_body": null,
    "max_tokens": 2048,
    "min_p": 0.0,
    "reasoning_effort": null,
    "repetition_penalty": 1.0,
    "seed": null,
    "system_message": null,
    "temperature": 0.0,
    "top_p": 0.95
  },
  "latency_seconds": 12.5,
  "model": "deepseek-ai/DeepSeek-V3",
  "n_repeats": 1,
  "name": "gsm8k",
  "ns_commit_sha": "0123456789abcdef",
  "num_examples": 4,
  "num_threads": 64,
  "output_throughput_tps": 812.3,
  "sgl_eval_version": "0.1.0",
  "timestamp": "20250101-120000",
  "total_completion_tokens": 10154,
  "total_prompt_tokens": 2210
}"#;

/// `output-rs0.jsonl` as sgl-eval's `PredictionsWriter` writes it (completion order).
const PREDICTIONS: &str = concat!(
    r#"{"generation": "The answer is 18.", "id": "gsm8k-2", "expected_answer": "18", "num_generated_tokens": 40, "num_reasoning_tokens": 0, "num_answer_tokens": 40, "finish_reason": "stop", "problem": "...", "predicted_answer": "18", "symbolic_correct": true}"#,
    "\n",
    r#"{"generation": "3", "id": "gsm8k-0", "expected_answer": "3", "num_generated_tokens": 1, "num_reasoning_tokens": 0, "num_answer_tokens": 1, "finish_reason": "stop", "problem": "...", "predicted_answer": "3", "symbolic_correct": true}"#,
    "\n",
    r#"{"generation": "7", "id": "gsm8k-1", "expected_answer": "70", "num_generated_tokens": 1, "num_reasoning_tokens": 0, "num_answer_tokens": 1, "finish_reason": "stop", "problem": "...", "predicted_answer": "7", "symbolic_correct": false}"#,
    "\n",
    r#"{"generation": "5", "id": "gsm8k-3", "expected_answer": "5", "num_generated_tokens": 1, "num_reasoning_tokens": 0, "num_answer_tokens": 1, "finish_reason": "stop", "problem": "...", "predicted_answer": "5", "symbolic_correct": true}"#,
    "\n",
);

fn write_run(out_dir: &Path, metrics: &str, predictions: Option<&str>) -> std::path::PathBuf {
    let run_dir = out_dir.join("sgl_eval_gsm8k_20250101-120000");
    std::fs::create_dir_all(&run_dir).expect("the run directory");
    std::fs::write(run_dir.join("metrics.json"), metrics).expect("metrics.json");
    if let Some(predictions) = predictions {
        std::fs::write(run_dir.join("output-rs0.jsonl"), predictions).expect("predictions");
    }
    run_dir
}

#[test]
fn reads_a_single_shot_run_with_and_without_predictions() {
    assert_eq!(
        sgl_eval::parse_metrics(METRICS_SINGLE_SHOT).expect("metrics"),
        Metrics {
            name: "gsm8k".into(),
            num_examples: 4,
            n_repeats: 1,
            score: 0.75,
            partial: false
        }
    );

    let out_dir = tempfile::tempdir().expect("a temporary directory");
    let run_dir = write_run(out_dir.path(), METRICS_SINGLE_SHOT, Some(PREDICTIONS));
    assert_eq!(sgl_eval::find_run_dir(out_dir.path()).expect("one run"), run_dir);
    let question = |id: &str, correct| QuestionResult { id: id.into(), correct };
    assert_eq!(
        sgl_eval::read_run(out_dir.path(), &run_dir, "gsm8k").expect("the run"),
        Outcome::Accuracy {
            benchmark: "gsm8k".into(),
            questions: 4,
            correct: 3,
            per_question: Some(vec![
                question("gsm8k-2", true),
                question("gsm8k-0", true),
                question("gsm8k-1", false),
                question("gsm8k-3", true),
            ]),
            cached: false,
            repeat: None,
        }
    );

    std::fs::remove_file(run_dir.join("output-rs0.jsonl")).expect("removed");
    let Outcome::Accuracy { questions, correct, per_question, .. } =
        sgl_eval::read_run(out_dir.path(), &run_dir, "gsm8k").expect("the run")
    else {
        panic!("an accuracy outcome");
    };
    assert_eq!((questions, correct, per_question), (4, 3, None));
}

#[test]
fn refuses_runs_that_are_not_a_count_of_right_answers() {
    let with = |from: &str, to: &str| METRICS_SINGLE_SHOT.replacen(from, to, 1);
    let partial = with(
        "\"n_repeats\": 1,",
        "\"n_repeats\": 1,\n  \"partial\": true,\n  \"planned_examples\": 10,",
    );
    let cases = [
        (partial, "field 'partial': the run was cut short; it is not evidence"),
        (
            with("\"n_repeats\": 1", "\"n_repeats\": 4"),
            "field 'n_repeats': 4 repeats give an average, not a count of right answers\nhint: run sgl-eval with --n-repeats 1",
        ),
        (
            with("\"score\": 0.75", "\"score\": 0.7"),
            "field 'aggregate.score': 0.7 of 4 examples is not a whole number of right answers",
        ),
        (
            with("\"score\": 0.75", "\"score\": 1.5"),
            "field 'aggregate.score': 1.5 is not from 0 to 1",
        ),
        (with("\"score\": 0.75", "\"mean\": 0.75"), "field 'aggregate.score': missing"),
        (
            with("\"num_examples\": 4", "\"num_examples\": -4"),
            "field 'num_examples': -4 is not a count",
        ),
        (with("\"name\": \"gsm8k\"", "\"name\": 3"), "field 'name': not a string"),
    ];
    for (metrics, expect) in cases {
        let error = sgl_eval::parse_metrics(&metrics)
            .and_then(|metrics| sgl_eval::outcome("gsm8k", &metrics, None))
            .expect_err(expect);
        assert_eq!(error.to_string(), expect);
    }

    let out_dir = tempfile::tempdir().expect("a temporary directory");
    let run_dir = write_run(
        out_dir.path(),
        METRICS_SINGLE_SHOT,
        Some(&PREDICTIONS.replacen("true", "false", 1)),
    );
    let message = sgl_eval::read_run(out_dir.path(), &run_dir, "gsm8k")
        .expect_err("counts differ")
        .to_string();
    assert_eq!(
        message,
        format!(
            "error parsing {}: the predictions hold 4 examples with 2 right, but metrics.json says 3 of 4",
            run_dir.join("metrics.json").display()
        )
    );
}

#[test]
fn prediction_errors_name_the_line_and_field() {
    let cases = [
        (
            "{\"generation\": \"3\", \"symbolic_correct\": true}\n",
            "line 1: field 'id': missing\nhint: sgl-eval versions before per-sample ids cannot be paired per question",
        ),
        (
            "{\"id\": \"a\", \"symbolic_correct\": true}\n{\"id\": \"b\", \"symbolic_correct\": 0.5}\n",
            "line 2: field 'symbolic_correct': 0.5 is not a boolean",
        ),
        (
            "{\"id\": \"a\", \"symbolic_correct\": true}\n{\"id\": \"a\", \"symbolic_correct\": true}\n",
            "line 2: field 'id': 'a' appears twice",
        ),
        ("{\"id\": \"a\"}\n", "line 1: field 'symbolic_correct': missing"),
    ];
    for (text, expect) in cases {
        assert_eq!(sgl_eval::parse_predictions(text).expect_err(expect).to_string(), expect);
    }

    let out_dir = tempfile::tempdir().expect("a temporary directory");
    let run_dir = write_run(out_dir.path(), METRICS_SINGLE_SHOT, Some("{\"id\": \"a\"}\n"));
    let message = sgl_eval::read_run(out_dir.path(), &run_dir, "gsm8k")
        .expect_err("bad predictions")
        .to_string();
    assert_eq!(
        message,
        format!(
            "error parsing {}: line 1: field 'symbolic_correct': missing",
            run_dir.join("output-rs0.jsonl").display()
        )
    );
    let empty = tempfile::tempdir().expect("a temporary directory");
    let message = sgl_eval::find_run_dir(empty.path()).expect_err("no run").to_string();
    assert!(
        message.ends_with("0 sgl-eval run directories (sgl_eval_*/metrics.json); expected one")
    );
}

#[test]
fn questions_asked_at_once_all_come_back_from_a_server_that_closes_each_connection() {
    // Regression: with pooled connections, a worker's second question went out on a socket the
    // simulated server had closed after its first answer, and hung until the timeout.
    for seed in 0..3 {
        let profile = Profile { seed, ..Profile::default() };
        let server = sim_server::serve(profile, "127.0.0.1:0".parse().expect("an address"))
            .expect("a server");
        let mut config = EvalConfig::new(&server.url(), "default");
        config.request_timeout = std::time::Duration::from_secs(10);
        let evaluation = evaluate(&config, &dataset(5)).expect("every question answered");
        assert_eq!(evaluation.questions(), 5);
    }
}

/// sgl-eval 0.1.3's real run directory (`measure/tests/fixtures/realworld/sgl-eval/`, whose
/// files `measure/tests/realworld.rs` parses), as `sgl-eval run gsm8k --out-dir OUT` lays it
/// out: found and read into evidence.
#[test]
fn a_real_sgl_eval_run_directory_is_found_and_read() {
    let fixture = |path: &str| {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../measure/tests/fixtures/realworld").join(path)
    };
    let out = tempfile::tempdir().expect("a temporary directory");
    let run = out.path().join("sgl_eval_gsm8k_20261201-104519");
    std::fs::create_dir(&run).expect("the run directory");
    std::fs::copy(fixture("sgl-eval/gsm8k-metrics.json"), run.join(sgl_eval::METRICS_FILE))
        .expect("metrics");
    std::fs::copy(fixture("sgl-eval/gsm8k-output-rs0.jsonl"), run.join(sgl_eval::PREDICTIONS_FILE))
        .expect("predictions");
    assert_eq!(sgl_eval::find_run_dir(out.path()).expect("one run"), run);
    match sgl_eval::read_run(out.path(), &run, "gsm8k").expect("the run") {
        Outcome::Accuracy { benchmark, questions, correct, per_question, cached, .. } => {
            assert_eq!((benchmark.as_str(), questions, correct, cached), ("gsm8k", 10, 10, false));
            assert_eq!(per_question.map(|questions| questions.len()), Some(10));
        }
        other => panic!("not accuracy: {other:?}"),
    }
}
