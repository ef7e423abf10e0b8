//! Plans, evidence and verdicts for the tests of the comment, the status and the summary. The
//! real gate (`prgate_gate::judge`) judges fixture evidence, so what the tests render is what a
//! run would show.

use prgate_gate::GateConfig;
use prgate_gate::codeowners::{DEFAULT_POLICY, Policy};
use prgate_gate::evidence::{
    Check, Evidence, KernelSamples, NotRunReason, Outcome, Provenance, QuestionResult,
    SCHEMA_VERSION, Side, TestOutcome, TestResult,
};
use prgate_gate::rules::judge_rules;
use prgate_gate::verdict::{Verdict, judge};
use prgate_scope::ChangeStatus;
use prgate_scope::plan::{
    ChangedPath, CommonPlan, DiffInfo, DiffSource, Head, ManifestSource, ModelPlan, PathMatch,
    Plan, Reason, Revision, Tier,
};

use crate::comment::Header;

pub(crate) const PR_SHA: &str = "0123456789abcdef0123456789abcdef01234567";
pub(crate) const BASE_SHA: &str = "fedcba9876543210fedcba9876543210fedcba98";

pub(crate) fn model(name: &str, tier: Tier, readme: Option<bool>) -> ModelPlan {
    let reasons = match tier {
        Tier::Full => vec![Reason::ChangedPath {
            path: format!("models/{name}/kernel.py"),
            pattern: "models/{model}/**".into(),
        }],
        Tier::Smoke => vec![Reason::SharedChange],
        Tier::None => vec![],
    };
    ModelPlan {
        name: name.into(),
        tier,
        new: false,
        removed: false,
        renamed_from: None,
        renamed_to: None,
        readme,
        reasons,
    }
}

/// A trusted plan of these models; the common checks run when `common`.
pub(crate) fn plan(models: Vec<ModelPlan>, common: bool) -> Plan {
    let changed_path = |path: &str, matched: PathMatch| ChangedPath {
        path: path.into(),
        status: ChangeStatus::Modified,
        old_path: None,
        matches: vec![matched],
    };
    let mut changed: Vec<ChangedPath> = models
        .iter()
        .filter(|model| model.tier == Tier::Full)
        .map(|model| {
            let path = format!("models/{}/kernel.py", model.name);
            changed_path(
                &path,
                PathMatch::Model {
                    model: model.name.clone(),
                    pattern: "models/{model}/**".into(),
                    path: path.clone(),
                },
            )
        })
        .collect();
    let mut common_reasons = Vec::new();
    if common || models.iter().any(|model| model.tier == Tier::Smoke) {
        changed.push(changed_path(
            "common/sampling.py",
            PathMatch::Shared { pattern: "common/**".into(), path: "common/sampling.py".into() },
        ));
        common_reasons.push(Reason::ChangedPath {
            path: "common/sampling.py".into(),
            pattern: "common/**".into(),
        });
    }
    Plan {
        schema_version: prgate_scope::plan::SCHEMA_VERSION,
        base: Revision { reference: "main".into(), sha: BASE_SHA.into() },
        head: Head { reference: "refs/pull/42/head".into(), sha: PR_SHA.into(), worktree: false },
        merge_base: Some(BASE_SHA.into()),
        manifest: ManifestSource { path: "prgate.toml".into(), commit: BASE_SHA.into() },
        diff: DiffInfo { source: DiffSource::FileList, trusted: true, warnings: vec![] },
        changed,
        models,
        common: CommonPlan { selected: common, reasons: common_reasons },
        codeowners: Default::default(),
        warnings: vec![],
    }
}

/// `kimi_k31` on the full tier, `glm5` on the smoke tier, `ds_v4` on none; the common checks
/// run.
pub(crate) fn standard_plan() -> Plan {
    plan(
        vec![
            model("kimi_k31", Tier::Full, Some(true)),
            model("glm5", Tier::Smoke, None),
            model("ds_v4", Tier::None, None),
        ],
        true,
    )
}

pub(crate) fn record(model: Option<&str>, check: Check, side: Side, outcome: Outcome) -> Evidence {
    Evidence {
        schema_version: SCHEMA_VERSION,
        model: model.map(str::to_owned),
        check,
        side,
        provenance: Provenance {
            node: Some("mi355x-1".into()),
            pr_commit: (side != Side::Base).then(|| PR_SHA.to_owned()),
            ..Provenance::default()
        },
        outcome,
    }
}

/// A suite of five passing tests and the `failing` ones.
pub(crate) fn tests(model: Option<&str>, check: Check, side: Side, failing: &[&str]) -> Evidence {
    let mut results: Vec<TestResult> = (0..5)
        .map(|n| TestResult {
            id: format!("test_case_{n}"),
            outcome: TestOutcome::Passed,
            message: None,
            flaky: false,
        })
        .collect();
    results.extend(failing.iter().map(|id| TestResult {
        id: (*id).into(),
        outcome: TestOutcome::Failed,
        message: Some("assert".into()),
        flaky: false,
    }));
    record(model, check, side, Outcome::Tests { results })
}

pub(crate) fn accuracy(model: &str, side: Side, benchmark: &str, answers: &[bool]) -> Evidence {
    let correct = answers.iter().filter(|answer| **answer).count() as u64;
    record(
        Some(model),
        Check::Accuracy,
        side,
        Outcome::Accuracy {
            benchmark: benchmark.into(),
            questions: answers.len() as u64,
            correct,
            per_question: Some(
                answers
                    .iter()
                    .enumerate()
                    .map(|(i, correct)| QuestionResult { id: format!("q{i}"), correct: *correct })
                    .collect(),
            ),
            cached: false,
            repeat: None,
        },
    )
}

/// Speed pairs at a concurrency: base at `base_ms`, the PR changed by each of `changes`; each
/// pair bracketed by its own two base runs, 0.5% either side of `base_ms` (a millionth apart
/// from pair to pair, their geometric mean kept, so no pair opens with the one before's closing run: the gate's chained
/// pairs are its own tests' subject, and these fixtures are the report's).
pub(crate) fn speed(
    model: &str,
    concurrency: u32,
    covered: bool,
    base_ms: f64,
    changes: &[f64],
) -> Vec<Evidence> {
    changes
        .iter()
        .enumerate()
        .map(|(index, change)| {
            let spread = if index % 2 == 0 { 0.005f64 } else { -0.005 };
            let apart = 1.0 + 1e-6 * (index + 1) as f64;
            record(
                Some(model),
                Check::Speed,
                Side::Both,
                Outcome::SpeedPair {
                    concurrency,
                    index: index as u32,
                    covered,
                    base_tpot_ms: base_ms,
                    pr_tpot_ms: base_ms * (1.0 + change),
                    first: Side::Base,
                    family: None,
                    base_runs_ms: Some([
                        base_ms * spread.exp() * apart,
                        base_ms / spread.exp() / apart,
                    ]),
                },
            )
        })
        .collect()
}

pub(crate) fn kernels(model: &str, side: Side, name: &str, micros: f64) -> Evidence {
    record(
        Some(model),
        Check::KernelTiming,
        side,
        Outcome::KernelTiming {
            kernels: vec![KernelSamples {
                name: name.into(),
                samples_us: vec![micros, micros * 1.01, micros * 0.99],
            }],
        },
    )
}

pub(crate) fn not_run(
    model: Option<&str>,
    check: Check,
    reason: NotRunReason,
    detail: &str,
    subject: Option<&str>,
) -> Evidence {
    record(
        model,
        check,
        Side::Pr,
        Outcome::NotRun {
            reason,
            detail: detail.into(),
            subject: subject.map(str::to_owned),
            failed_on: None,
        },
    )
}

/// The concurrencies a full-tier model's speed runs at, and base's median TPOT there.
const FULL_CELLS: [(u32, bool, f64); 4] =
    [(1, false, 9.8), (16, true, 14.2), (64, true, 20.1), (128, true, 27.5)];

/// Everything `kimi_k31` (full) and `glm5` (smoke) need to pass, and the common tests.
pub(crate) fn passing() -> Vec<Evidence> {
    let mut all = Vec::new();
    for (model, full) in [("kimi_k31", true), ("glm5", false)] {
        for check in [Check::UnitTests, Check::KernelTests, Check::ServingTests] {
            all.push(tests(Some(model), check, Side::Base, &[]));
            all.push(tests(Some(model), check, Side::Pr, &[]));
        }
        all.push(record(
            Some(model),
            Check::Routing,
            Side::Pr,
            Outcome::Routing { routed: true, line: Some("monokernel: routed decode".into()) },
        ));
        if full {
            let answers: Vec<bool> = (0..1319).map(|i| i % 5 != 0).collect();
            all.push(accuracy(model, Side::Base, "gsm8k", &answers));
            all.push(accuracy(model, Side::Pr, "gsm8k", &answers));
            all.push(kernels(model, Side::Base, "moe_ring", 100.0));
            all.push(kernels(model, Side::Pr, "moe_ring", 99.0));
            for (concurrency, covered, base_ms) in FULL_CELLS {
                all.extend(speed(model, concurrency, covered, base_ms, &[0.001, -0.002, 0.0]));
            }
        } else {
            all.extend(speed(model, 64, true, 18.0, &[0.001, -0.002, 0.0]));
        }
    }
    all.push(tests(None, Check::CommonTests, Side::Base, &[]));
    all.push(tests(None, Check::CommonTests, Side::Pr, &[]));
    all
}

/// Replaces a model's covered speed pairs at one concurrency.
pub(crate) fn replace_speed(
    evidence: &mut Vec<Evidence>,
    model: &str,
    concurrency: u32,
    base_ms: f64,
    changes: &[f64],
) {
    evidence.retain(|record| {
        !(record.model.as_deref() == Some(model)
            && matches!(record.outcome, Outcome::SpeedPair { concurrency: c, .. } if c == concurrency))
    });
    evidence.extend(speed(model, concurrency, true, base_ms, changes));
}

/// The verdict the gate gives, with its default settings and CODEOWNERS policy.
pub(crate) fn judged(plan: &Plan, evidence: &[Evidence], title: Option<&str>) -> Verdict {
    judged_with(plan, evidence, title, &GateConfig::defaults())
}

/// The verdict the gate gives with these settings and the default CODEOWNERS policy.
pub(crate) fn judged_with(
    plan: &Plan,
    evidence: &[Evidence],
    title: Option<&str>,
    config: &GateConfig,
) -> Verdict {
    let policy =
        Policy::parse(DEFAULT_POLICY, "CODEOWNERS.rules").expect("the default policy parses");
    let rules = judge_rules(plan, title, config, &policy);
    let gain = prgate_gate::title::requires_gain(title, &config.gain.types);
    judge(plan, evidence, rules, gain, config).expect("the fixture evidence is consistent")
}

pub(crate) fn header(title: &str) -> Header {
    Header {
        pr_number: 42,
        title: Some(title.to_owned()),
        pr_sha: PR_SHA.into(),
        base_sha: BASE_SHA.into(),
        nodes: vec!["mi355x-1".into(), "mi355x-2".into()],
        image: Some("rocm/sglang@sha256:4f2a9c".into()),
        run_url: Some("https://github.com/org/models/actions/runs/123456".into()),
        estimate: None,
        gpu_time: None,
        reuse: None,
        drained: Vec::new(),
        drift: Vec::new(),
    }
}
