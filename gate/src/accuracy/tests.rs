//! The sequential accuracy rule, table-driven: pooled counts and looks in, the answer out.

use super::*;

fn config(overrides: &str) -> GateConfig {
    let table: toml::Table = toml::from_str(overrides).expect("test TOML parses");
    GateConfig::with_overrides(Some(&table), "prgate.toml").expect("valid overrides")
}

/// (benchmark, base right and PR wrong, PR right and base wrong, pairs, repeats, cap).
type Case = (&'static str, u64, u64, u64, u32, u32);

/// The table every constant is checked against: GSM8K-sized (tolerance 1.5 points: fail
/// beyond -1.5, pass above -3) and GPQA-sized (5 points: -5, -10) pools near the bounds, two
/// benchmarks judged together.
const CASES: [Case; 12] = [
    // No discordance on 1,319 questions: within at once.
    ("gsm8k", 0, 0, 1319, 1, 20),
    // One repeat, 5.5% disagree, half a point down: within (the lower bound clears -3).
    ("gsm8k", 40, 33, 1319, 1, 20),
    // 0.9 points down: open at the first look.
    ("gsm8k", 45, 33, 1319, 1, 20),
    // 4.3 points down: beyond at once.
    ("gsm8k", 90, 33, 1319, 1, 20),
    // 2 points down at a cap of one repeat: undecided.
    ("gsm8k", 60, 33, 1319, 1, 1),
    // Four repeats: 2 points down is open, 2.8 beyond.
    ("gsm8k", 240, 132, 5276, 4, 20),
    ("gsm8k", 280, 132, 5276, 4, 20),
    // GPQA over four repeats of 198: 9 points down is open with 20 looks.
    ("gpqa-diamond", 90, 19, 792, 4, 20),
    // At a cap of 4: 6.7 points down passes, 7.5 is undecided.
    ("gpqa-diamond", 72, 19, 792, 4, 4),
    ("gpqa-diamond", 78, 19, 792, 4, 4),
    // 9.7 points down: beyond.
    ("gpqa-diamond", 96, 19, 792, 4, 20),
    // Small: 10 questions, all agree, one repeat of one: undecided.
    ("tiny", 0, 0, 10, 1, 1),
];

fn answers(config: &GateConfig) -> Vec<AccuracyAnswer> {
    CASES
        .iter()
        .map(|&(benchmark, base_only, pr_only, pairs, repeats, cap)| {
            let pooled = Pooled::Paired { base_only, pr_only, pairs };
            let looks = Looks { repeats, cap, benchmarks: 2 };
            judge_benchmark(config, benchmark, pooled, looks)
                .map_or(AccuracyAnswer::Undecided, |judgement| judgement.answer)
        })
        .collect()
}

#[test]
fn the_rule_decides_as_the_table_says() {
    use AccuracyAnswer::*;
    assert_eq!(
        answers(&GateConfig::defaults()),
        vec![
            Within, Within, Open, Beyond, Undecided, Open, Beyond, Open, Within, Undecided, Beyond,
            Undecided
        ]
    );
}

#[test]
fn every_constant_of_the_rule_changed_by_two_moves_an_answer() {
    let defaults = answers(&GateConfig::defaults());
    for overrides in [
        "[accuracy]\nalpha = 0.04",
        "[accuracy]\nalpha = 0.01",
        "[accuracy]\nbeta = 0.05",
        "[accuracy]\nbeta = 0.0125",
        "[accuracy]\nbeta-at = 4.0",
        "[accuracy]\nbeta-at = 1.5",
        "[accuracy.tolerance]\ngsm8k = 0.03\ngpqa-diamond = 0.1",
        "[accuracy.tolerance]\ngsm8k = 0.0075\ngpqa-diamond = 0.025",
    ] {
        assert_ne!(answers(&config(overrides)), defaults, "{overrides}");
    }
}

#[test]
fn the_error_rates_are_spent_over_the_looks_and_the_benchmarks() {
    let config = GateConfig::defaults();
    let pooled = Pooled::Paired { base_only: 100, pr_only: 70, pairs: 1319 };
    let judge = |cap: u32, benchmarks: usize| {
        judge_benchmark(&config, "gsm8k", pooled, Looks { repeats: 1, cap, benchmarks })
            .expect("computable")
    };
    let one = judge(20, 2);
    assert!((one.alpha_look - 0.02 / 2.0 / 20.0).abs() < 1e-15, "{one:?}");
    assert!((one.beta_look - config.accuracy_beta.get() / 20.0).abs() < 1e-15, "{one:?}");
    assert!((one.alpha - 0.01).abs() < 1e-15 && (one.beta_drop - 0.03).abs() < 1e-12);
    // More looks or more benchmarks: a wider interval.
    let fewer = judge(5, 1);
    assert!(fewer.comparison.interval.0 > one.comparison.interval.0, "{fewer:?}");
    assert!(fewer.comparison.interval.1 < one.comparison.interval.1, "{fewer:?}");
}

#[test]
fn an_undecided_benchmark_says_what_would_decide_it() {
    let config = GateConfig::defaults();
    let pooled = Pooled::Paired { base_only: 78, pr_only: 19, pairs: 792 };
    let looks = Looks { repeats: 4, cap: 4, benchmarks: 2 };
    let judgement = judge_benchmark(&config, "gpqa-diamond", pooled, looks).expect("computable");
    assert_eq!(judgement.answer, AccuracyAnswer::Undecided);
    let to_decide = judgement.to_decide.expect("undecided says what decides it");
    let needed = to_decide.needed.expect("a number of repeats");
    let repeats = u32::try_from(needed).expect("at most the limit");
    assert!(repeats > 4 && repeats <= 40, "{to_decide:?}");
    assert_eq!(to_decide.more_runs(), Some(2 * (needed - 4)));
    // That many repeats, at the same shares, decide it; one fewer does not.
    let at = |repeats: u32| {
        let scale = |count: u64| count * u64::from(repeats) / 4;
        let more = Pooled::Paired { base_only: scale(78), pr_only: scale(19), pairs: scale(792) };
        let looks = Looks { repeats, cap: repeats, benchmarks: 2 };
        judge_benchmark(&config, "gpqa-diamond", more, looks).expect("computable").answer
    };
    assert_ne!(at(repeats), AccuracyAnswer::Undecided);
    assert_eq!(at(repeats - 1), AccuracyAnswer::Undecided);
}

#[test]
fn the_runner_asks_for_another_repeat_only_while_open() {
    let config = GateConfig::defaults();
    let open = Pooled::Paired { base_only: 100, pr_only: 70, pairs: 1319 };
    let clear = Pooled::Paired { base_only: 0, pr_only: 0, pairs: 1319 };
    let looks = |repeats, cap| Looks { repeats, cap, benchmarks: 2 };
    assert!(needs_another_repeat(&config, "gsm8k", open, looks(1, 20)));
    assert!(!needs_another_repeat(&config, "gsm8k", open, looks(20, 20)));
    assert!(!needs_another_repeat(&config, "gsm8k", clear, looks(1, 20)));
}

/// Per-question results `q0`, `q1`, ... right where `right` says.
fn per_question(right: &[bool]) -> Vec<QuestionResult> {
    right
        .iter()
        .enumerate()
        .map(|(at, correct)| QuestionResult { id: format!("q{at}"), correct: *correct })
        .collect()
}

#[test]
fn repeats_pool_paired_when_every_repeat_pairs_else_as_totals() {
    let base = per_question(&[true, true, false, true]);
    let pr = per_question(&[true, false, true, false]);
    fn side(answers: Option<&[QuestionResult]>, correct: u64) -> SideResult<'_> {
        SideResult { questions: 4, correct, per_question: answers }
    }
    let paired = (side(Some(&base), 3), side(Some(&pr), 2));
    assert_eq!(
        pool(&[paired, paired]),
        Some(Pooled::Paired { base_only: 4, pr_only: 2, pairs: 8 })
    );
    let unpaired = (side(None, 3), side(Some(&pr), 2));
    assert_eq!(
        pool(&[paired, unpaired]),
        Some(Pooled::Unpaired {
            base_correct: 6,
            base_questions: 8,
            pr_correct: 4,
            pr_questions: 8
        })
    );
    assert_eq!(pool(&[]), None);
}

#[test]
fn a_question_the_pr_did_not_answer_counts_against_it() {
    // Base gets 8 of 10; the PR answers only the 6 it gets right and drops the rest.
    let base = per_question(&[true, true, true, true, true, true, true, true, false, false]);
    let pr = per_question(&[true; 6]);
    assert_eq!(paired_counts(Some(&base), Some(&pr)), Some((2, 0, 10)));
    // A question only the PR answered is not judged; none in common is no pairing.
    let extra =
        [per_question(&[true; 6]), vec![QuestionResult { id: "x".into(), correct: true }]].concat();
    assert_eq!(paired_counts(Some(&base), Some(&extra)), Some((2, 0, 10)));
    let other = vec![QuestionResult { id: "x".into(), correct: true }];
    assert_eq!(paired_counts(Some(&base), Some(&other)), None);
    // Without per-question results: the PR's rate is out of base's count when it has fewer.
    let side = |questions, correct| SideResult { questions, correct, per_question: None };
    assert_eq!(
        pool(&[(side(10, 8), side(6, 6))]),
        Some(Pooled::Unpaired {
            base_correct: 8,
            base_questions: 10,
            pr_correct: 6,
            pr_questions: 10
        })
    );
}
