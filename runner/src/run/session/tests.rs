//! The job plan is the one source of every step: a step added to it is recorded by the step
//! loop alone (there is no back-fill behind the loop), and a step the loop left without a
//! record is an error of the run, never a pass. Real trees, a real results directory and the
//! real loop; the targets need no server (no recipe, or no checkpoint on the node), so nothing
//! is started.

use std::path::{Path, PathBuf};

use prgate_gate::GateConfig;
use prgate_gate::evidence::{Check, NotRunReason, Outcome, Side};
use prgate_gate::job::{Expect, ExpectedStep, Part, StepId};
use prgate_scope::plan::{Plan, Tier};

use super::*;
use crate::job::tests::{model, plan};
use crate::job::{JobRequest, RecipePaths};
use crate::run::RunInputs;

/// A recipe the node cannot serve (its checkpoint is not on the node) that asks for no tests,
/// no timing, no benchmark and no sweep: its job plan is `nothing` and `blocked` steps only.
const UNSERVABLE: &str = r#"hardware = ["cpu-sim"]
checkpoint = "absent-ckpt"
tp = 1

[server]
command = "server --port {port} {extra_args}"
monokernel-flag = "--mono"
routing-pattern = 'routed'
"#;

const RECIPES: RecipePaths<'static> =
    RecipePaths { model: "test/e2e/{model}.toml", common: "test/e2e/common.toml" };

/// A node, its folders and both trees in one temporary directory.
struct Place {
    root: tempfile::TempDir,
    node: NodeProfile,
}

impl Place {
    fn new() -> Place {
        let root = tempfile::tempdir().expect("a temporary directory");
        let dir = |name: &str| {
            let dir = root.path().join(name);
            std::fs::create_dir_all(&dir).expect("a folder");
            dir
        };
        let text = format!(
            "name = \"n1\"\nhardware = \"cpu-sim\"\ncheckpoint-store = \"{}\"\n\
             cache-dir = \"{}\"\nwork-dir = \"{}\"\n\
             [gpus]\nids = [0]\nrender-devices = [\"/dev/dri/renderD128\"]\n\
             [image]\nname = \"sglang:rocm\"\n[checkpoints]\n",
            dir("models").display(),
            dir("cache").display(),
            dir("work").display(),
        );
        let node = NodeProfile::parse(&text, "node.toml").expect("the test's node profile");
        for side in ["base", "pr"] {
            let recipe = dir(&format!("{side}/test/e2e")).join("alpha.toml");
            std::fs::write(recipe, UNSERVABLE).expect("the recipe");
        }
        Place { root, node }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }
}

/// `alpha` (full tier) has the unservable recipe on both sides; `gone` has none on either.
fn the_plan() -> Plan {
    plan(vec![model("alpha", Tier::Full, false), model("gone", Tier::Smoke, false)], false)
}

/// The job plan of `plan` in `place`'s trees, with `added` steps added to the targets by name.
fn exported(place: &Place, plan: &Plan, added: &[(&str, ExpectedStep)]) -> Exported {
    let (base_tree, pr_tree) = (place.path("base"), place.path("pr"));
    let mut job = Job::build(&JobRequest {
        plan,
        base_tree: &base_tree,
        pr_tree: &pr_tree,
        recipes: RECIPES,
        node: &place.node,
        accept_narrowing: false,
    });
    for (name, step) in added {
        let target = job.plan.targets.iter_mut().find(|t| t.model.as_deref() == Some(*name));
        target.expect("the target").steps.push(step.clone());
    }
    Exported { job, base_tree, pr_tree }
}

fn with_request<T>(place: &Place, plan: &Plan, then: impl FnOnce(&RunRequest<'_>) -> T) -> T {
    let gate = GateConfig::defaults();
    let results = place.path("results");
    let request = RunRequest {
        inputs: RunInputs {
            plan,
            repo: place.root.path(),
            node: &place.node,
            results: &results,
            events: None,
            recipes: RECIPES,
            accept_narrowing: false,
        },
        gate: &gate,
        gain_required: false,
        python: Path::new("python3"),
        time_limit: None,
        progress: false,
        isolation: &Isolation::Host,
        wait_lock: None,
        preflight: &PreflightMode::Off,
        observer: None,
        only_models: None,
        reuse: &ReuseMode::Off,
    };
    then(&request)
}

/// The records of the real step loop over `exported`'s job plan, which must record every
/// planned step.
fn loop_records(place: &Place, plan: &Plan, exported: &Exported) -> Vec<Evidence> {
    let records = with_request(place, plan, |request| {
        let mut session = Session::open(request).expect("the session opens");
        let selection = Selection::of(request, exported);
        let facts = Facts::of(request);
        let mut runner = session
            .runner(&selection, exported.job.plan.family, exported.job.plan.accuracy_family())
            .expect("a runner");
        run_targets(&mut runner, &selection, &facts, None).expect("the loop runs");
        drop(runner.finish());
        session.check_recorded(&selection).expect("the loop recorded every planned step");
        session.results.records().expect("the records")
    });
    records.into_iter().map(|(_step, record)| record).collect()
}

fn step(check: Check, side: Side, part: Option<Part>, expect: Expect) -> ExpectedStep {
    ExpectedStep { check, side, part, expect }
}

#[test]
fn a_step_added_to_the_job_plan_is_recorded_by_the_loop_without_the_back_fill() {
    let place = Place::new();
    let plan = the_plan();
    let gated = Expect::Blocked { reason: NotRunReason::GatedDataset, detail: "no token".into() };
    // Steps no recipe describes: the loop has only the plan to know they exist.
    let added = [
        ("alpha", step(Check::UnitTests, Side::Base, None, Expect::Run)),
        ("alpha", step(Check::KernelTiming, Side::Base, None, Expect::Run)),
        ("alpha", step(Check::Accuracy, Side::Base, Some(Part::named("added")), Expect::Run)),
        ("gone", step(Check::Speed, Side::Both, Some(Part::Cell { concurrency: 8 }), Expect::Run)),
        ("gone", step(Check::Accuracy, Side::Pr, Some(Part::named("extra")), gated)),
    ];
    let exported = exported(&place, &plan, &added);
    let records = loop_records(&place, &plan, &exported);
    assert_eq!(exported.job.plan.unaccounted(&records), Vec::<StepId>::new());
    let detail = |step: &StepId| {
        let record = records.iter().find(|record| StepId::of(record) == *step);
        match record.map(|record| &record.outcome) {
            Some(Outcome::NotRun { reason, detail, .. }) => format!("{reason:?}: {detail}"),
            other => format!("{other:?}"),
        }
    };
    let got: Vec<String> = added
        .iter()
        .map(|(name, added)| {
            let id = StepId::new(Some(name), added.check, added.side, added.part.clone());
            detail(&id)
        })
        .collect();
    let not_described = |what: &str| {
        format!("Other: the job plan expects {what}, which the recipe does not describe")
    };
    assert_eq!(
        got,
        [
            not_described("unit tests of alpha on the base side"),
            not_described("kernel timing of alpha on the base side"),
            not_described("accuracy of alpha on the base side (added)"),
            not_described("E2E speed of gone on the both side (concurrency-8)"),
            "GatedDataset: no token".to_owned(),
        ]
    );
    // The plan's own steps are recorded as it says: `nothing` and `blocked`.
    let unit = StepId::new(Some("alpha"), Check::UnitTests, Side::Pr, None);
    assert_eq!(detail(&unit), "NothingToCheck: the recipe selects no unit tests");
    let routing = StepId::new(Some("alpha"), Check::Routing, Side::Pr, None);
    assert!(detail(&routing).starts_with("NoCheckpoint: "), "{}", detail(&routing));
    let speed = StepId::new(Some("gone"), Check::Speed, Side::Both, None);
    assert!(detail(&speed).starts_with("NoRecipe: "), "{}", detail(&speed));
}

#[test]
fn a_planned_step_the_loop_left_is_an_error_of_the_run_not_a_pass() {
    let place = Place::new();
    let plan = the_plan();
    let exported = exported(&place, &plan, &[]);
    let error = with_request(&place, &plan, |request| {
        let session = Session::open(request).expect("the session opens");
        let selection = Selection::of(request, &exported);
        // No loop ran: nothing is recorded.
        session.check_recorded(&selection).expect_err("an unrecorded plan is refused")
    });
    let RunError::Unrecorded { steps } = &error else { panic!("not the loop's fault: {error}") };
    let expected: Vec<String> =
        exported.job.plan.evidence_steps().map(|step| step.to_string()).collect();
    assert_eq!(steps, &expected);
    assert!(!expected.is_empty());
    assert!(error.to_string().contains("without a record"), "{error}");
}

/// A base side without a recipe runs nothing, never the PR's recipe in its place: the PR's
/// timing script leaves a mark in the tree it runs in, and the base tree has none. (Its tree
/// lacks the file, a coverage gap; a file there but not valid blocks every check before the
/// run, `job::tests::a_base_recipe_that_is_not_valid_blocks_every_check_and_a_missing_one_does_not`.)
#[test]
fn a_base_side_without_a_recipe_never_runs_the_prs_commands() {
    let place = Place::new();
    let mark = "ran-by-the-prs-recipe";
    let timing = format!(
        "{UNSERVABLE}\n[[kernel-timing]]\nname = \"t\"\ncommand = \"touch {mark} {{output}}\"\n"
    );
    std::fs::write(place.path("pr/test/e2e/alpha.toml"), timing).expect("the PR's recipe");
    std::fs::remove_file(place.path("base/test/e2e/alpha.toml")).expect("base's recipe removed");
    let plan = plan(vec![model("alpha", Tier::Full, false)], false);
    let exported = exported(&place, &plan, &[]);
    let records = loop_records(&place, &plan, &exported);
    let timing = |side: Side| {
        let id = StepId::new(Some("alpha"), Check::KernelTiming, side, None);
        let record = records.iter().find(|record| StepId::of(record) == id);
        record.map(|record| record.outcome.clone()).expect("a timing record")
    };
    let Outcome::NotRun { reason, detail, .. } = timing(Side::Base) else {
        panic!("the base side ran: {:?}", timing(Side::Base))
    };
    assert_eq!(reason, NotRunReason::NoRecipe, "{detail}");
    assert!(detail.contains("no valid recipe"), "{detail}");
    assert!(!place.path("base").join(mark).exists(), "the PR's script ran in the base tree");
    assert!(place.path("pr").join(mark).exists(), "the PR's script ran: {:?}", timing(Side::Pr));
}
