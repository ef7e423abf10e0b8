//! The status of representative verdicts, and descriptions that must fit 140 characters.

use prgate_gate::evidence::{Check, Evidence, Side};

use super::*;
use crate::comment::StepProgress;
use crate::fixture::{judged, passing, replace_speed, standard_plan, tests};

fn check(verdict: Option<&Verdict>, progress: Option<&Progress>) -> String {
    let plan = standard_plan();
    let status = commit_status(verdict, &plan, progress, &StatusSettings::default());
    assert!(status.description.chars().count() <= DESCRIPTION_LIMIT, "{}", status.description);
    assert_eq!(status.context, "AMD PR test");
    format!("{}: {}", status.state.as_str(), status.description)
}

fn with(mut evidence: Vec<Evidence>, change: impl FnOnce(&mut Vec<Evidence>)) -> Vec<Evidence> {
    change(&mut evidence);
    evidence
}

#[test]
fn the_status_says_what_matters() {
    let plan = standard_plan();
    let fix = Some("[Fix] [MI355X] kimi_k31: a fix");
    let failing_tests: Vec<String> = (0..40).map(|n| format!("test_{n}")).collect();
    let cases: Vec<(&str, Vec<Evidence>, Option<&str>, &str)> = vec![
        ("all pass", passing(), fix, "success: passed; 1 full, 1 smoke, common"),
        (
            "a TPOT regression",
            with(passing(), |e| {
                replace_speed(
                    e,
                    "kimi_k31",
                    64,
                    20.1,
                    &[0.061, 0.06, 0.062, 0.061, 0.06, 0.062, 0.061, 0.06],
                )
            }),
            fix,
            "failure: kimi_k31: TPOT +6.1% at c=64; 1 full, 1 smoke, common",
        ),
        (
            "a perf PR without a gain",
            passing(),
            Some("[Perf] [MI355X] kimi_k31: faster"),
            "failure: no TPOT gain shown; 1 full, 1 smoke, common",
        ),
        (
            "failures everywhere",
            with(passing(), |e| {
                for (model, concurrency, base) in [
                    ("kimi_k31", 16, 14.2),
                    ("kimi_k31", 64, 20.1),
                    ("kimi_k31", 128, 27.5),
                    ("glm5", 64, 18.0),
                ] {
                    replace_speed(
                        e,
                        model,
                        concurrency,
                        base,
                        &[0.08, 0.081, 0.079, 0.08, 0.081, 0.079, 0.08, 0.08],
                    );
                }
                e.retain(|r| !(r.check == Check::UnitTests && r.side == Side::Pr));
                let names: Vec<&str> = failing_tests.iter().map(String::as_str).collect();
                e.push(tests(Some("kimi_k31"), Check::UnitTests, Side::Pr, &names));
                e.push(tests(Some("glm5"), Check::UnitTests, Side::Pr, &names));
            }),
            Some("[Speedup] kimi_k31: faster"),
            "failure: title fail; kimi_k31: TPOT +8.0% at c=16; kimi_k31: TPOT +8.0% at c=64; kimi_k31: TPOT +8.0% at c=128; +3 more; 1 full, 1 smoke, common",
        ),
        (
            "a check still open",
            with(passing(), |e| e.retain(|r| r.check != Check::KernelTiming)),
            fix,
            "pending: waiting for 1 check; kimi_k31: kernel-timing pending; 1 full, 1 smoke, common",
        ),
    ];
    for (name, evidence, title, expected) in cases {
        let verdict = judged(&plan, &evidence, title);
        assert_eq!(check(Some(&verdict), None), expected, "case: {name}");
    }

    let progress = Progress {
        steps: vec![
            StepProgress {
                model: Some("kimi_k31".into()),
                check: "unit tests".into(),
                state: StepState::Done,
            },
            StepProgress {
                model: Some("kimi_k31".into()),
                check: "E2E speed".into(),
                state: StepState::Running,
            },
        ],
    };
    assert_eq!(
        check(None, Some(&progress)),
        "pending: running: 1 of 2 steps done; 1 full, 1 smoke, common"
    );
    assert_eq!(check(None, None), "pending: running; 1 full, 1 smoke, common");
}

#[test]
fn descriptions_fit_140_characters_counted_as_characters() {
    let words = "word ".repeat(40);
    let accents = "é".repeat(139);
    let cjk = "模型 ".repeat(60);
    let cases: Vec<(&str, String)> = vec![
        ("short", "short".into()),
        ("exactly 140", "a".repeat(140)),
        ("140 two-byte characters", "é".repeat(140)),
        ("141", format!("{} b", "a".repeat(139))),
        ("words", words.clone()),
        ("no space", "x".repeat(300)),
        ("accents", format!("{accents} and more")),
        ("wide", cjk.clone()),
    ];
    let fitted: Vec<String> = cases
        .iter()
        .map(|(name, text)| {
            let fitted = fit_description(text);
            assert!(
                fitted.chars().count() <= DESCRIPTION_LIMIT,
                "{name}: {}",
                fitted.chars().count()
            );
            format!("{name}: {} chars: {fitted}", fitted.chars().count())
        })
        .collect();
    let expected = [
        "short: 5 chars: short".to_owned(),
        format!("exactly 140: 140 chars: {}", "a".repeat(140)),
        format!("140 two-byte characters: 140 chars: {}", "é".repeat(140)),
        format!("141: 140 chars: {}…", "a".repeat(139)),
        format!("words: 140 chars: {}…", "word ".repeat(28).trim_end()),
        format!("no space: 140 chars: {}…", "x".repeat(139)),
        format!("accents: 140 chars: {}…", "é".repeat(139)),
        format!("wide: 138 chars: {}…", "模型 ".repeat(46).trim_end()),
    ];
    assert_eq!(fitted, expected);
}

#[test]
fn states_and_errors_use_github_words() {
    let states: Vec<&str> =
        [StatusState::Pending, StatusState::Success, StatusState::Failure, StatusState::Error]
            .iter()
            .map(|state| state.as_str())
            .collect();
    assert_eq!(states, ["pending", "success", "failure", "error"]);

    let settings = StatusSettings {
        context: "MI355X PR test".into(),
        target_url: Some("https://github.com/org/models/actions/runs/1".into()),
    };
    let status =
        error_status(&format!("cannot read results/\u{1b}[2J{}", "x".repeat(200)), &settings);
    assert_eq!(status.state, StatusState::Error);
    assert_eq!(status.context, "MI355X PR test");
    assert_eq!(status.target_url, settings.target_url);
    assert!(
        status.description.starts_with("prgate could not finish: cannot read results/\\u{1b}[2J")
    );
    assert_eq!(status.description.chars().count(), DESCRIPTION_LIMIT);

    let holds = queue_holds(&"the queue adds nothing the PR's plan selects ".repeat(5), &settings);
    assert_eq!((holds.state, holds.context.as_str()), (StatusState::Success, "MI355X PR test"));
    assert_eq!(holds.target_url, settings.target_url);
    assert!(holds.description.chars().count() <= DESCRIPTION_LIMIT, "{}", holds.description);
    assert!(holds.description.ends_with('…'), "{}", holds.description);
}
