use super::*;
use crate::stats::t_quantile;
use crate::verdict::{Confidence, Item, Section, SpeedTest, Verdict};

fn speed_cell(model: &str, log_ratio: f64, standard_error: f64) -> SpeedChange {
    SpeedChange {
        model: model.to_owned(),
        concurrency: 1,
        covered: true,
        provenance: CellProvenance::default(),
        change: log_ratio.exp() - 1.0,
        interval: (0.0, 0.0),
        log_ratio,
        standard_error,
        degrees_of_freedom: 8.0,
        pairs: 4,
    }
}

fn run_record(tested: &str, merge_queue: bool, models: &[&str]) -> RunRecord {
    RunRecord {
        version: LEDGER_VERSION,
        at: "2026-12-01T15:00:00Z".to_owned(),
        pr: 7,
        title: "[Fix] a: b".to_owned(),
        tested_commit: tested.to_owned(),
        base_commit: "b".repeat(40),
        merge_queue,
        run: Some(format!("run of {tested}")),
        verdict: State::Pass,
        speed: models.iter().map(|model| speed_cell(model, 0.01, 0.004)).collect(),
        accuracy: Vec::new(),
    }
}

/// PR 7's merge: its head `h…` merged as `q…` (a merge queue's commit).
fn pr_7_merged() -> MergeFacts {
    MergeFacts {
        at: String::new(),
        pr: 7,
        title: "t".to_owned(),
        url: None,
        merge_commit: "q".repeat(40),
        head_commit: "h".repeat(40),
    }
}

#[test]
fn a_speed_cell_recovers_the_log_ratio_and_its_error_from_the_verdicts_interval() {
    for (log_ratio, standard_error, df) in
        [(0.0149, 0.003, 9.0), (-0.05, 0.02, 2.5), (0.0, 0.01, 40.0)]
    {
        let t = t_quantile(0.975, df).expect("a quantile");
        let change = f64::exp(log_ratio) - 1.0;
        let interval = (
            (log_ratio - t * standard_error).exp() - 1.0,
            (log_ratio + t * standard_error).exp() - 1.0,
        );
        let cell = SpeedChange::from_verdict("m", 4, true, change, interval, df, 5)
            .expect("a measurement");
        assert!((cell.log_ratio - log_ratio).abs() < 1e-12, "{cell:?}");
        assert!((cell.standard_error - standard_error).abs() < 1e-12, "{cell:?}");
    }
    // An interval of no width is no measurement to chain.
    assert_eq!(SpeedChange::from_verdict("m", 4, true, 0.01, (0.01, 0.01), 9.0, 5), None);
}

#[test]
fn an_accuracy_benchmark_gets_the_normal_error_its_one_sided_bounds_imply() {
    let alpha = 0.01;
    let z = z_two_sided(2.0 * alpha);
    let cell = AccuracyChange::from_verdict(
        "m",
        "gsm8k",
        -0.004,
        (-0.004 - 2.0 * z * 0.003, -0.004 + 0.0),
        alpha,
        1319,
    )
    .expect("a measurement");
    assert!((cell.standard_error - 0.003).abs() < 1e-12, "{cell:?}");
}

#[test]
fn the_ledger_reads_back_what_it_wrote_and_names_the_line_of_a_bad_one() {
    let merged = merged_line(
        &MergeFacts {
            at: "2026-12-01T15:00:00Z".to_owned(),
            pr: 7,
            title: "</script><b>x</b>".to_owned(),
            url: Some("https://github.com/o/r/pull/7".to_owned()),
            merge_commit: "m".repeat(40),
            head_commit: "h".repeat(40),
        },
        &[run_record(&"h".repeat(40), false, &["alpha"])],
        &[],
    );
    let reset = Line::Reset(Reset {
        version: LEDGER_VERSION,
        at: "2026-12-02T15:00:00Z".to_owned(),
        reference_commit: "r".repeat(40),
        reference_name: Some("v1.2".to_owned()),
        reason: "accepted".to_owned(),
        by: None,
    });
    let text = format!("{}\n\n{}\n", Line::Merged(merged.clone()).to_json(), reset.to_json());
    assert_eq!(parse_ledger(&text), Ok(vec![Line::Merged(merged), reset]));

    let good = Line::Merged(merged_line(
        &MergeFacts {
            at: String::new(),
            pr: 1,
            title: String::new(),
            url: None,
            merge_commit: String::new(),
            head_commit: String::new(),
        },
        &[],
        &[],
    ))
    .to_json();
    let cases = [
        (
            good.replace("\"version\":1", "\"version\":2"),
            "line 2: version 2 is not one this prgate reads (1)",
        ),
        (good.replace("\"note\"", "\"nothe\""), "line 2: unknown field `nothe`"),
        ("{\"event\":\"merged\"".to_owned(), "line 2: EOF while parsing an object"),
        (good.replace("\"merged\"", "\"forked\""), "line 2: unknown variant `forked`"),
    ];
    for (bad, expected) in cases {
        let error = parse_ledger(&format!("{good}\n{bad}\n")).expect_err("refused");
        assert!(error.to_string().starts_with(expected), "{error} (expected {expected})");
    }
    let mut zero = run_record("h", false, &["alpha"]);
    zero.speed[0].standard_error = 0.0;
    let line = Line::Merged(merged_line(
        &MergeFacts {
            at: String::new(),
            pr: 1,
            title: String::new(),
            url: None,
            merge_commit: String::new(),
            head_commit: String::new(),
        },
        &[zero],
        &[],
    ));
    let error = parse_ledger(&line.to_json()).expect_err("no error is no measurement");
    assert!(error.to_string().contains("are not a measurement"), "{error}");
}

#[test]
fn a_merge_queues_run_counts_once_for_the_models_it_measured_again() {
    let facts = MergeFacts { at: "2026-12-01T15:00:00Z".to_owned(), ..pr_7_merged() };
    let pr_run = run_record(&"h".repeat(40), false, &["alpha", "beta"]);
    let mut queue_run = run_record(&"q".repeat(40), true, &["beta"]);
    queue_run.speed[0].log_ratio = 0.02;
    let line = merged_line(&facts, std::slice::from_ref(&pr_run), &[queue_run]);
    let cells: Vec<(&str, f64)> =
        line.speed.iter().map(|cell| (cell.model.as_str(), cell.log_ratio)).collect();
    assert_eq!(cells, [("alpha", 0.01), ("beta", 0.02)]);
    assert_eq!(line.run.as_deref(), Some(format!("run of {}", "q".repeat(40)).as_str()));
    assert!(line.note.as_deref().is_some_and(|note| note.contains("beta again")), "{line:?}");

    // The queue kept the PR's result (it ran nothing): the PR's run alone.
    let line = merged_line(&facts, std::slice::from_ref(&pr_run), &[]);
    assert_eq!(line.speed.len(), 2);
    assert_eq!(line.note, None);

    // No saved run: the merge is recorded with nothing measured, and says so.
    let line = merged_line(&facts, &[], &[]);
    assert!(line.speed.is_empty() && line.accuracy.is_empty());
    assert!(line.note.as_deref().is_some_and(|note| note.contains("nothing of it is measured")));
}

#[test]
fn the_runs_of_one_commit_are_pooled_by_their_errors() {
    let facts = pr_7_merged();
    // A first run that failed (+3%, se 1%) and the re-run that passed (+1%, se 0.5%).
    let mut failed = run_record(&"h".repeat(40), false, &["alpha"]);
    failed.speed[0].log_ratio = 0.03;
    failed.speed[0].standard_error = 0.01;
    let mut passed = run_record(&"h".repeat(40), false, &["alpha"]);
    passed.speed[0].log_ratio = 0.01;
    passed.speed[0].standard_error = 0.005;
    let line = merged_line(&facts, &[failed, passed], &[]);
    let cell = &line.speed[0];
    // Weights 1/1e-4 and 1/2.5e-5: 0.2 and 0.8.
    assert!((cell.log_ratio - 0.014).abs() < 1e-12, "{cell:?}");
    assert!(
        (cell.standard_error - (0.2f64.powi(2) * 1e-4 + 0.8f64.powi(2) * 2.5e-5).sqrt()).abs()
            < 1e-12
    );
    assert_eq!(cell.pairs, 8);
    assert!((cell.change - 0.014f64.exp_m1()).abs() < 1e-12);
    assert!(line.note.as_deref().is_some_and(|note| note.starts_with("2 runs of its head")));
}

#[test]
fn the_accuracy_runs_of_one_commit_are_pooled_by_their_errors_at_the_first_ones_alpha() {
    let facts = pr_7_merged();
    let benchmark = |difference: f64, standard_error: f64, alpha: f64| AccuracyChange {
        model: "alpha".to_owned(),
        benchmark: "gsm8k".to_owned(),
        provenance: CellProvenance::default(),
        difference,
        interval: (0.0, 0.0),
        alpha,
        standard_error,
        questions: 200,
    };
    let mut first = run_record(&"h".repeat(40), false, &[]);
    first.accuracy = vec![benchmark(-0.03, 0.02, 0.05)];
    let mut second = run_record(&"h".repeat(40), false, &[]);
    second.accuracy = vec![benchmark(0.0, 0.01, 0.01)];
    let line = merged_line(&facts, &[first, second], &[]);
    assert_eq!(line.accuracy.len(), 1, "one benchmark, counted once");
    let pooled = &line.accuracy[0];
    // Weights 1/4e-4 and 1/1e-4: 0.2 and 0.8.
    assert!((pooled.difference - -0.006).abs() < 1e-12, "{pooled:?}");
    let standard_error = (0.2f64.powi(2) * 4e-4 + 0.8f64.powi(2) * 1e-4).sqrt();
    assert!((pooled.standard_error - standard_error).abs() < 1e-12, "{pooled:?}");
    assert_eq!(pooled.questions, 400);
    // Each bound one-sided at the first run's alpha (5%): z = 1.6449.
    assert!((pooled.alpha - 0.05).abs() < f64::EPSILON);
    let half = 1.644_853_626_951_472_2 * standard_error;
    assert!((pooled.interval.0 - (-0.006 - half)).abs() < 1e-9, "{pooled:?}");
    assert!((pooled.interval.1 - (-0.006 + half)).abs() < 1e-9, "{pooled:?}");
}

#[test]
fn measurements_take_each_cells_numbers_and_the_provenance_of_its_records() {
    let speed = Item {
        model: Some("alpha".to_owned()),
        check: "speed".to_owned(),
        state: State::Pass,
        rule: String::new(),
        summary: String::new(),
        numbers: Some(Numbers::Speed {
            concurrency: 4,
            covered: true,
            base_ms: Some(20.0),
            pr_ms: Some(20.3),
            change: Some(0.015),
            interval: Some((0.005, 0.025)),
            pairs: 5,
            confidence: Confidence::High,
            test: Some(Box::new(SpeedTest {
                run_cv: Some(0.01),
                degrees_of_freedom: Some(9.0),
                in_band_differences: 5,
                calibration_samples: None,
                calibration_df: 0.0,
                alpha: 0.02,
                beta: 0.05,
                outliers: Vec::new(),
                family_alpha: None,
                pr_noise_ratio: None,
                own_variance: false,
                calibration_stale: false,
                pr_slow: Vec::new(),
            })),
            thresholds: None,
            undecided: None,
        }),
    };
    let not_run = Item { numbers: None, model: Some("beta".to_owned()), ..speed.clone() };
    let reused = Item { model: Some("gamma".to_owned()), ..speed.clone() };
    let verdict = Verdict {
        schema_version: 1,
        pr_sha: None,
        result: State::Pass,
        rules: Vec::new(),
        sections: vec![Section {
            name: SectionName::E2ePerformance,
            state: State::Pass,
            items: vec![speed, not_run, reused],
        }],
        author_must_provide: Vec::new(),
        checks: Default::default(),
        recipe_changes: Vec::new(),
    };
    let record: Evidence = serde_json::from_str(
        r#"{"schema_version":1,"model":"alpha","check":"speed","side":"both",
            "provenance":{"node":"n1","image_digest":"sha256:1","base_commit":"b","pr_commit":"p","recipe_hash":"r"},
            "outcome":{"kind":"speed-pair","concurrency":4,"index":0,"covered":true,"base_tpot_ms":20.0,"pr_tpot_ms":20.3,"first":"base"}}"#,
    )
    .expect("a record");
    let mut taken_over = record.clone();
    taken_over.model = Some("gamma".to_owned());
    taken_over.provenance.reused =
        Some(crate::evidence::Reused { run: "an earlier run".to_owned() });
    let (speed, accuracy) = measurements(&verdict, &[record, taken_over]);
    assert!(accuracy.is_empty());
    assert_eq!(
        speed.len(),
        1,
        "the cell without numbers is not measured, the one an earlier run measured is its"
    );
    let cell = &speed[0];
    assert_eq!((cell.model.as_str(), cell.concurrency, cell.pairs), ("alpha", 4, 5));
    assert_eq!(
        cell.provenance,
        CellProvenance {
            node: Some("n1".to_owned()),
            image: Some("sha256:1".to_owned()),
            recipe_hash: Some("r".to_owned()),
            base_commit: Some("b".to_owned()),
            pr_commit: Some("p".to_owned()),
        }
    );
    assert!((cell.log_ratio - 0.015f64.ln_1p()).abs() < 1e-12);
}
