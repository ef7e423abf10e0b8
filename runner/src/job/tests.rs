//! The job plan a plan and two trees give: its steps, its recipe states and what is read.

use prgate_gate::evidence::{Evidence, Outcome, Provenance};
use prgate_gate::job::{JobPlan, accounted};
use prgate_scope::plan::ModelPlan;

use super::*;
use crate::results::{StepId, file_stem};

/// A full recipe: unit and serving tests, a timing script, two benchmarks, three cells.
pub(crate) const RECIPE: &str = r#"hardware = ["cpu-sim"]
checkpoint = "alpha-ckpt"
tp = 1

[server]
command = "server --port {port} {extra_args}"
monokernel-flag = "--mono"
routing-pattern = 'routed'

[tests]
unit = ["test/unit"]
serving = ["test/serving"]

[[kernel-timing]]
name = "k"
command = "python3 time.py --out {output}"

[[accuracy]]
name = "gsm8k"
evaluator = "builtin"
dataset = "data.jsonl"

[[accuracy]]
name = "mmlu"
evaluator = "builtin"
dataset = "data.jsonl"

[speed]
concurrencies = [1, 2, 16]
covered = [1]
input-len = 8
output-len = 8
"#;

/// A node of one GPU with `hardware` and `checkpoints`.
pub(crate) fn node(hardware: &str, checkpoints: &[&str]) -> NodeProfile {
    let checkpoints: Vec<String> =
        checkpoints.iter().map(|name| format!("\"{name}\" = \"org/{name}\"")).collect();
    let text = format!(
        "name = \"n1\"\nhardware = \"{hardware}\"\ncheckpoint-store = \"/models\"\n\
         cache-dir = \"/cache\"\nwork-dir = \"/work\"\n\
         [gpus]\nids = [0]\nrender-devices = [\"/dev/dri/renderD128\"]\n[image]\nname = \"sglang:rocm\"\n\
         [checkpoints]\n{}\n",
        checkpoints.join("\n"),
    );
    NodeProfile::parse(&text, "node.toml").expect("the test's node profile is valid")
}

pub(crate) fn model(name: &str, tier: Tier, new: bool) -> ModelPlan {
    ModelPlan {
        name: name.to_owned(),
        tier,
        new,
        removed: false,
        renamed_from: None,
        renamed_to: None,
        readme: None,
        reasons: Vec::new(),
    }
}

pub(crate) fn plan(models: Vec<ModelPlan>, common: bool) -> Plan {
    use prgate_scope::plan::{CommonPlan, DiffInfo, DiffSource, Head, ManifestSource, Revision};
    let sha = |c: &str| c.repeat(40);
    Plan {
        schema_version: prgate_scope::plan::SCHEMA_VERSION,
        base: Revision { reference: "main".into(), sha: sha("b") },
        head: Head { reference: "pr".into(), sha: sha("a"), worktree: false },
        merge_base: Some(sha("c")),
        manifest: ManifestSource { path: "prgate.toml".into(), commit: sha("c") },
        diff: DiffInfo { source: DiffSource::Git, trusted: true, warnings: vec![] },
        changed: vec![],
        models,
        common: CommonPlan { selected: common, reasons: vec![] },
        warnings: vec![],
        codeowners: Default::default(),
    }
}

/// Two trees: `base` and `pr` files by path.
struct Trees {
    _root: tempfile::TempDir,
    base: std::path::PathBuf,
    pr: std::path::PathBuf,
}

fn trees(base: &[(&str, &str)], pr: &[(&str, &str)]) -> Trees {
    let root = tempfile::tempdir().expect("a temporary directory");
    let make = |side: &str, files: &[(&str, &str)]| {
        let dir = root.path().join(side);
        std::fs::create_dir_all(&dir).expect("the tree");
        for (path, text) in files {
            let path = dir.join(path);
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("folders");
            std::fs::write(path, text).expect("a file");
        }
        dir
    };
    let base_dir = make("base", base);
    let pr_dir = make("pr", pr);
    Trees { base: base_dir, pr: pr_dir, _root: root }
}

fn build(plan: &Plan, trees: &Trees, node: &NodeProfile) -> Job {
    Job::build(&JobRequest {
        plan,
        base_tree: &trees.base,
        pr_tree: &trees.pr,
        recipes: RecipePaths { model: "test/e2e/{model}.toml", common: "test/e2e/common.toml" },
        node,
        accept_narrowing: false,
    })
}

/// Every step of `job` as `model.check.side[.part]=expect`.
fn steps(job: &JobPlan) -> Vec<String> {
    job.targets
        .iter()
        .flat_map(|target| {
            target.steps.iter().map(move |step| {
                let expect = match &step.expect {
                    Expect::Run => "run".to_owned(),
                    Expect::Blocked { reason, .. } => format!("blocked {}", reason.describe()),
                    Expect::Nothing { .. } => "nothing".to_owned(),
                };
                format!("{}={expect}", file_stem(&target.step_id(step)))
            })
        })
        .collect()
}

const ALPHA: &str = "test/e2e/alpha.toml";

#[test]
fn a_full_model_expects_every_step_its_recipe_asks_for() {
    let trees = trees(&[(ALPHA, RECIPE)], &[(ALPHA, RECIPE)]);
    let plan = plan(vec![model("alpha", Tier::Full, false)], false);
    let job = build(&plan, &trees, &node("cpu-sim", &["alpha-ckpt"]));
    assert_eq!(
        steps(&job.plan),
        [
            "alpha.unit-tests.base=run",
            "alpha.unit-tests.pr=run",
            "alpha.kernel-tests.pr=nothing",
            "alpha.kernel-timing.base=run",
            "alpha.kernel-timing.pr=run",
            "alpha.serving-tests.base=run",
            "alpha.serving-tests.pr=run",
            "alpha.accuracy.base.gsm8k=run",
            "alpha.accuracy.pr.gsm8k=run",
            "alpha.accuracy.base.mmlu=run",
            "alpha.accuracy.pr.mmlu=run",
            "alpha.routing.base=run",
            "alpha.routing.pr=run",
            "alpha.speed.both.concurrency-1=run",
            "alpha.speed.both.concurrency-2=run",
            "alpha.speed.both.concurrency-16=run",
        ]
    );
    assert_eq!(job.plan.family, 1);
    assert!(matches!(job.plan.targets[0].recipe.base, RecipeState::Parsed { .. }));
}

#[test]
fn the_family_is_bases_covered_cells_whatever_the_pr_adds() {
    // Base covers concurrency 1; the PR covers 2 and 16 too (a widening: all three run).
    let widened = RECIPE.replace("covered = [1]", "covered = [1, 2, 16]");
    let both = trees(&[(ALPHA, RECIPE)], &[(ALPHA, &widened)]);
    let changed = plan(vec![model("alpha", Tier::Full, false)], false);
    let job = build(&changed, &both, &node("cpu-sim", &["alpha-ckpt"]));
    assert!(steps(&job.plan).contains(&"alpha.speed.both.concurrency-16=run".to_owned()));
    // Three cells in the family would divide the error rate by 3: base's one cell, regressed,
    // would need more evidence to fail.
    assert_eq!(job.plan.family, 1);
    // A model new in the PR has only its own recipe: its cells count.
    let own = trees(&[], &[(ALPHA, &widened)]);
    let new = plan(vec![model("alpha", Tier::Full, true)], false);
    let job = build(&new, &own, &node("cpu-sim", &["alpha-ckpt"]));
    assert_eq!(job.plan.family, 3);
}

#[test]
fn smoke_new_and_unservable_models() {
    let trees = trees(&[], &[(ALPHA, RECIPE)]);
    // Smoke: no kernel timing or accuracy, the covered concurrencies only; a new model has no
    // base tree for its tests.
    let plan = plan(vec![model("alpha", Tier::Smoke, true)], false);
    let job = build(&plan, &trees, &node("cpu-sim", &["alpha-ckpt"]));
    assert_eq!(
        steps(&job.plan),
        [
            "alpha.unit-tests.pr=run",
            "alpha.kernel-tests.pr=nothing",
            "alpha.serving-tests.base=run",
            "alpha.serving-tests.pr=run",
            "alpha.routing.base=run",
            "alpha.routing.pr=run",
            "alpha.speed.both.concurrency-1=run",
        ]
    );
    assert_eq!(job.plan.targets[0].recipe.base, RecipeState::NoTree);
    // No checkpoint here: everything that needs the server is blocked, the tests still run.
    let job = build(&plan, &trees, &node("cpu-sim", &[]));
    assert_eq!(
        steps(&job.plan),
        [
            "alpha.unit-tests.pr=run",
            "alpha.kernel-tests.pr=nothing",
            "alpha.serving-tests.pr=blocked no checkpoint on these nodes",
            "alpha.routing.pr=blocked no checkpoint on these nodes",
            "alpha.speed.both=blocked no checkpoint on these nodes",
        ]
    );
    assert_eq!(job.plan.family, 0);
}

#[test]
fn a_recipe_the_pr_removed_broke_or_never_had() {
    let smoke = || plan(vec![model("alpha", Tier::Smoke, false)], false);
    let every = |what: &str| {
        ["unit-tests.pr", "kernel-tests.pr", "serving-tests.pr", "routing.pr", "speed.both"]
            .map(|step| format!("alpha.{step}=blocked {what}"))
            .to_vec()
    };
    let node = node("cpu-sim", &["alpha-ckpt"]);
    let cases: Vec<(&str, Trees, Vec<String>)> = vec![
        ("removed", trees(&[(ALPHA, RECIPE)], &[]), every("the PR removed its recipe")),
        ("on neither side", trees(&[], &[]), every("no serving recipe")),
        (
            "not valid",
            trees(&[(ALPHA, RECIPE)], &[(ALPHA, "tp = \"two\"")]),
            every("the PR's recipe is not valid"),
        ),
    ];
    for (name, trees, expect) in cases {
        assert_eq!(steps(&build(&smoke(), &trees, &node).plan), expect, "{name}");
    }
}

/// A model base has, whose base recipe file is there but not valid, cannot be judged: every
/// check is blocked (the PR's own recipe never stands in for base's), naming the file and the
/// error. A file base lacks is a coverage gap: the model runs by the PR's recipe, as does a
/// model new in the PR. The common checks alike.
#[test]
fn a_base_recipe_that_is_not_valid_blocks_every_check_and_a_missing_one_does_not() {
    let node = node("cpu-sim", &["alpha-ckpt"]);
    let invalid = trees(&[(ALPHA, "tp = \"two\"")], &[(ALPHA, RECIPE)]);
    let job = build(&plan(vec![model("alpha", Tier::Smoke, false)], false), &invalid, &node);
    assert_eq!(
        steps(&job.plan),
        ["unit-tests.pr", "kernel-tests.pr", "serving-tests.pr", "routing.pr", "speed.both"]
            .map(|step| format!("alpha.{step}=blocked base's recipe is not valid"))
    );
    let target = &job.plan.targets[0];
    let Expect::Blocked { detail, .. } = &target.steps[0].expect else { panic!("{target:?}") };
    assert!(detail.contains("base's recipe test/e2e/alpha.toml is not valid"), "{detail}");
    assert!(detail.contains("tp"), "the recipe's error: {detail}");
    assert!(target.recipe.contract.is_empty(), "{:?}", target.recipe.contract);
    // Renamed by the PR (alpha is gamma now, with a valid recipe): base's at the old name is
    // what is not valid, and it blocks the new name's checks too.
    let mut gamma = model("gamma", Tier::Smoke, false);
    gamma.renamed_from = Some("alpha".to_owned());
    let renamed = trees(&[(ALPHA, "tp = \"two\"")], &[("test/e2e/gamma.toml", RECIPE)]);
    let job = build(&plan(vec![gamma], false), &renamed, &node);
    assert_eq!(
        steps(&job.plan),
        ["unit-tests.pr", "kernel-tests.pr", "serving-tests.pr", "routing.pr", "speed.both"]
            .map(|step| format!("gamma.{step}=blocked base's recipe is not valid"))
    );
    let target = &job.plan.targets[0];
    let Expect::Blocked { detail, .. } = &target.steps[0].expect else { panic!("{target:?}") };
    assert!(detail.contains("base's recipe test/e2e/alpha.toml is not valid"), "{detail}");
    // Base lacks the file: the model runs by its own recipe; new in the PR, the same.
    let lacking = trees(&[], &[(ALPHA, RECIPE)]);
    for new in [false, true] {
        let job = build(&plan(vec![model("alpha", Tier::Smoke, new)], false), &lacking, &node);
        assert!(steps(&job.plan).iter().all(|step| !step.contains("blocked")), "new {new}");
        assert!(job.plan.targets[0].recipe.contract.own, "new {new}");
    }
    // The common checks: base's file not valid blocks them; a file base lacks does not.
    let common = "test/e2e/common.toml";
    let recipe = "[tests]\nunit = [\"test/unit\"]\n";
    let plan = plan(vec![], true);
    let job = build(&plan, &trees(&[(common, "[tests]\nunit = 1\n")], &[(common, recipe)]), &node);
    assert_eq!(steps(&job.plan), ["~common.common-tests.pr=blocked base's recipe is not valid"]);
    let job = build(&plan, &trees(&[], &[(common, recipe)]), &node);
    assert_eq!(steps(&job.plan), ["~common.common-tests.base=run", "~common.common-tests.pr=run"]);
}

/// The files the PR changes that base's selections run on its side are listed with the
/// target: a file below a selected folder, a file selected by `path::test`, the common
/// checks' selections; an unselected test file, a deleted one and a suite the tier does not
/// run (kernel tests here select nothing) are not.
#[test]
fn the_test_files_the_pr_changes_that_base_selects_are_listed() {
    use prgate_scope::change::ChangeStatus;
    let recipe = RECIPE.replace(
        "serving = [\"test/serving\"]",
        "serving = [\"test/e2e/test_serving.py::test_up\"]",
    );
    let common = "test/e2e/common.toml";
    let common_recipe = "[tests]\nunit = [\"test/common\"]\n";
    let files = [(ALPHA, recipe.as_str()), (common, common_recipe)];
    let trees = trees(&files, &files);
    let mut plan = plan(vec![model("alpha", Tier::Full, false)], true);
    let changed = |path: &str, status| prgate_scope::plan::ChangedPath {
        path: path.to_owned(),
        status,
        old_path: None,
        matches: Vec::new(),
    };
    plan.changed = vec![
        changed("test/unit/alpha/test_layer.py", ChangeStatus::Modified),
        changed("test/unit_helpers.py", ChangeStatus::Modified),
        changed("test/e2e/test_serving.py", ChangeStatus::Modified),
        changed("test/other/test_unselected.py", ChangeStatus::Added),
        changed("test/unit/gone.py", ChangeStatus::Deleted),
        changed("test/common/test_shared.py", ChangeStatus::Modified),
    ];
    let job = build(&plan, &trees, &node("cpu-sim", &["alpha-ckpt"]));
    let listed: Vec<(Option<&str>, &[String])> = job
        .plan
        .targets
        .iter()
        .map(|target| (target.model.as_deref(), target.recipe.pr_tests.as_slice()))
        .collect();
    assert_eq!(
        listed,
        [
            (None, &["test/common/test_shared.py".to_owned()][..]),
            (
                Some("alpha"),
                &[
                    "test/e2e/test_serving.py".to_owned(),
                    "test/unit/alpha/test_layer.py".to_owned()
                ][..]
            ),
        ]
    );
}

#[cfg(unix)]
#[test]
fn a_recipe_is_never_read_through_a_link_or_outside_its_tree() {
    let trees = trees(&[(ALPHA, RECIPE)], &[("real.toml", RECIPE)]);
    let host_file = trees.base.join(ALPHA);
    std::fs::create_dir_all(trees.pr.join("test/e2e")).expect("folders");
    // The recipe itself a link to a file of the node.
    std::os::unix::fs::symlink(&host_file, trees.pr.join(ALPHA)).expect("a link");
    let plan = plan(vec![model("alpha", Tier::Smoke, false)], false);
    let node = node("cpu-sim", &["alpha-ckpt"]);
    let job = build(&plan, &trees, &node);
    let RecipeState::Invalid { error, .. } = &job.plan.targets[0].recipe.pr else {
        panic!("a linked recipe is not read: {:?}", job.plan.targets[0].recipe.pr);
    };
    assert!(error.contains("symbolic link"), "{error}");
    // A folder on the way a link.
    std::fs::remove_dir_all(trees.pr.join("test/e2e")).expect("removed");
    std::os::unix::fs::symlink(trees.base.join("test/e2e"), trees.pr.join("test/e2e"))
        .expect("a link");
    let job = build(&plan, &trees, &node);
    assert!(
        matches!(&job.plan.targets[0].recipe.pr, RecipeState::Invalid { error, .. } if error.contains("symbolic link")),
        "{:?}",
        job.plan.targets[0].recipe.pr
    );
    // A model named to climb out of the tree has no recipe path at all.
    let plan = self::plan(vec![model("../../real", Tier::Smoke, false)], false);
    let job = build(&plan, &trees, &node);
    assert!(
        matches!(&job.plan.targets[0].recipe.pr, RecipeState::Invalid { error, .. } if error.contains("not one plain path component")),
        "{:?}",
        job.plan.targets[0].recipe.pr
    );
    assert!(
        steps(&job.plan).iter().all(|step| step.contains("blocked the PR's recipe is not valid"))
    );
}

#[test]
fn the_common_checks_have_a_step_a_side() {
    let common = "test/e2e/common.toml";
    let recipe = "[tests]\nunit = [\"test/unit\"]\n";
    let node = node("cpu-sim", &[]);
    let plan = plan(vec![], true);
    let job = build(&plan, &trees(&[(common, recipe)], &[(common, recipe)]), &node);
    assert_eq!(steps(&job.plan), ["~common.common-tests.base=run", "~common.common-tests.pr=run"]);
    let job = build(&plan, &trees(&[(common, recipe)], &[]), &node);
    assert_eq!(steps(&job.plan), ["~common.common-tests.pr=blocked the PR removed its recipe"]);
}

/// A record of `step` (`model.check.side[.part]` as in the file stems) of kind `kind`.
fn record(step: &StepId, kind: &str) -> Evidence {
    let concurrency = step.part().and_then(prgate_gate::job::Part::concurrency).unwrap_or(0);
    let outcome = match kind {
        "tests" => Outcome::Tests { results: Vec::new() },
        "pair" => Outcome::SpeedPair {
            concurrency,
            index: 0,
            covered: true,
            base_tpot_ms: 1.0,
            pr_tpot_ms: 1.0,
            first: Side::Base,
            family: None,
            base_runs_ms: None,
        },
        "not-run" => Outcome::NotRun {
            reason: NotRunReason::Crash,
            detail: String::new(),
            subject: step.part().map(ToString::to_string),
            failed_on: None,
        },
        _ => panic!("unknown kind {kind}"),
    };
    Evidence {
        schema_version: prgate_gate::evidence::SCHEMA_VERSION,
        model: step.model().map(str::to_owned),
        check: step.check(),
        side: step.side(),
        provenance: Provenance::default(),
        outcome,
    }
}

#[test]
fn what_accounts_for_the_steps_of_a_job_that_died() {
    let trees = trees(&[(ALPHA, RECIPE)], &[(ALPHA, RECIPE)]);
    let plan = plan(vec![model("alpha", Tier::Smoke, false)], false);
    let job = build(&plan, &trees, &node("cpu-sim", &["alpha-ckpt"]));
    let target = &job.plan.targets[0];
    let ids: Vec<StepId> = target.evidence_steps().collect();
    let unaccounted = |records: &[Evidence]| -> Vec<String> {
        ids.iter().filter(|step| !accounted(step, records)).map(file_stem).collect()
    };
    assert_eq!(unaccounted(&[]).len(), ids.len());
    // Died on the PR side of the unit tests.
    let records = vec![record(&ids[0], "tests")];
    assert_eq!(
        unaccounted(&records),
        [
            "alpha.unit-tests.pr",
            "alpha.serving-tests.base",
            "alpha.serving-tests.pr",
            "alpha.routing.base",
            "alpha.routing.pr",
            "alpha.speed.both.concurrency-1"
        ]
    );
    // A pair fills its cell; a whole-check not-run on the PR side fills both sides.
    let pair = StepId::new(
        Some("alpha"),
        Check::Speed,
        Side::Both,
        Some(prgate_gate::job::Part::Pair { concurrency: 1, index: 0 }),
    );
    let whole = StepId::new(Some("alpha"), Check::ServingTests, Side::Pr, None);
    let records = vec![record(&pair, "pair"), record(&whole, "not-run")];
    assert_eq!(
        unaccounted(&records),
        ["alpha.unit-tests.base", "alpha.unit-tests.pr", "alpha.routing.base", "alpha.routing.pr"]
    );
}

#[test]
fn a_changed_recipe_carries_its_diff_against_base_and_an_unchanged_one_none() {
    let node = node("cpu-sim", &["alpha-ckpt"]);
    let plan = plan(vec![model("alpha", Tier::Full, false)], false);
    let changed = RECIPE.replace("tp = 1", "tp = 2");
    let job = build(&plan, &trees(&[(ALPHA, RECIPE)], &[(ALPHA, &changed)]), &node);
    let diff = job.plan.targets[0].recipe.diff.as_ref().expect("a diff");
    assert_eq!(
        diff.text,
        "@@ -1,5 +1,5 @@\n hardware = [\"cpu-sim\"]\n checkpoint = \"alpha-ckpt\"\n-tp = 1\n+tp = 2\n \n [server]\n"
    );
    assert_eq!(diff.omitted, 0);
    // The same bytes on both sides, a model new in the PR, a recipe the PR removed: no diff.
    let same = build(&plan, &trees(&[(ALPHA, RECIPE)], &[(ALPHA, RECIPE)]), &node);
    assert_eq!(same.plan.targets[0].recipe.diff, None);
    let new = plan_with_new_alpha();
    let fresh = build(&new, &trees(&[], &[(ALPHA, RECIPE)]), &node);
    assert_eq!(fresh.plan.targets[0].recipe.diff, None);
    let removed = build(&plan, &trees(&[(ALPHA, RECIPE)], &[]), &node);
    assert_eq!(removed.plan.targets[0].recipe.diff, None);
    // A recipe that no longer parses still shows what changed.
    let broken = build(&plan, &trees(&[(ALPHA, RECIPE)], &[(ALPHA, "tp = \n")]), &node);
    let diff = broken.plan.targets[0].recipe.diff.as_ref().expect("a diff");
    assert!(diff.text.contains("\n+tp = \n") && diff.text.contains("\n-tp = 1\n"), "{diff:?}");
}

fn plan_with_new_alpha() -> Plan {
    plan(vec![model("alpha", Tier::Full, true)], false)
}

#[test]
fn a_recipes_diff_is_redacted_then_cut() {
    let redactor = crate::redact::Redactor::new([("HF_TOKEN", "hf_SECRETvalue42")]);
    let base = "a = 1\n";
    let pr = "a = 1\ntoken = \"hf_SECRETvalue42\"\n";
    let diff = recipe_diff_with(&redactor, base, pr).expect("a diff");
    assert_eq!(diff.text, "@@ -1 +1,2 @@\n a = 1\n+token = \"[redacted HF_TOKEN]\"\n");
    assert!(recipe_diff_with(&redactor, base, base).is_none());
    // Long: at most DIFF_LINES lines, each at most DIFF_LINE_CHARS characters.
    let long_base: String = (0..100).map(|i| format!("line{i} = {i}\n")).collect();
    let long_pr: String =
        (0..100).map(|i| format!("line{i} = {}\n", "x".repeat(300 + i))).collect();
    let diff = recipe_diff_with(&redactor, &long_base, &long_pr).expect("a diff");
    let lines: Vec<&str> = diff.text.lines().collect();
    assert_eq!(lines.len(), DIFF_LINES);
    assert_eq!(diff.omitted, 1 + 200 - DIFF_LINES);
    let wide = recipe_diff_with(&redactor, base, &format!("a = \"{}\"\n", "é".repeat(500)))
        .expect("a diff");
    let longest = wide.text.lines().map(|line| line.chars().count()).max().unwrap_or(0);
    assert_eq!(longest, DIFF_LINE_CHARS + 1, "cut, with an ellipsis: {wide:?}");
    assert!(wide.text.contains("é…\n"), "{wide:?}");
    assert_eq!((DIFF_LINES, DIFF_LINE_CHARS), (60, 200));
}

#[test]
fn a_split_runs_job_plan_takes_each_target_from_the_node_that_ran_it() {
    let trees = trees(&[], &[(ALPHA, RECIPE)]);
    let plan = plan(vec![model("alpha", Tier::Smoke, true)], false);
    let blocked = build(&plan, &trees, &node("cpu-sim", &[])).plan;
    let ran = build(&plan, &trees, &node("cpu-sim", &["alpha-ckpt"])).plan;
    let alpha = StepId::new(Some("alpha"), Check::UnitTests, Side::Pr, None);
    let records = [record(&alpha, "tests")];
    // The node without the checkpoint has no record of alpha: the node that ran it gives it,
    // whichever came first.
    let merged =
        merge_node_job(Some(merge_node_job(None, blocked.clone(), &[])), ran.clone(), &records);
    assert_eq!(steps(&merged), steps(&ran));
    let merged =
        merge_node_job(Some(merge_node_job(None, ran.clone(), &records)), blocked.clone(), &[]);
    assert_eq!(steps(&merged), steps(&ran));
    // One node: its plan as it is.
    assert_eq!(steps(&merge_node_job(None, blocked.clone(), &[])), steps(&blocked));
}
