//! The base side's recipe is the contract (`docs/recipe.md`): a PR that honestly fails (a
//! slower server, worse answers, failing tests) still fails when it also edits the data that
//! measures it: drops its covered speed cell, cuts its accuracy dataset and limit, declares
//! hardware the node lacks, skips its unit test through a `conftest.py` and deselects its
//! kernel test through a `pytest.ini`, or drops its failing common test from the common
//! recipe. Each trick is a control run without it beside the
//! tricked run, on the real sim-server and real pytest.

use crate::run::{Fixture, Sample, THREE_PAIRS, TWO_PAIRS, settle};
use crate::support::Repo;

/// Forty questions: enough for the accuracy rule to see a drop from every answer right to one
/// in five.
const QUESTIONS: &str = r#"{"id": "q1", "question": "1 + 1?\nexpected: 2", "answer": "2"}
{"id": "q2", "question": "2 + 1?\nexpected: 3", "answer": "3"}
{"id": "q3", "question": "3 + 1?\nexpected: 4", "answer": "4"}
{"id": "q4", "question": "4 + 1?\nexpected: 5", "answer": "5"}
{"id": "q5", "question": "5 + 1?\nexpected: 6", "answer": "6"}
{"id": "q6", "question": "6 + 1?\nexpected: 7", "answer": "7"}
{"id": "q7", "question": "7 + 1?\nexpected: 8", "answer": "8"}
{"id": "q8", "question": "8 + 1?\nexpected: 9", "answer": "9"}
{"id": "q9", "question": "9 + 1?\nexpected: 10", "answer": "10"}
{"id": "q10", "question": "10 + 1?\nexpected: 11", "answer": "11"}
{"id": "q11", "question": "11 + 1?\nexpected: 12", "answer": "12"}
{"id": "q12", "question": "12 + 1?\nexpected: 13", "answer": "13"}
{"id": "q13", "question": "13 + 1?\nexpected: 14", "answer": "14"}
{"id": "q14", "question": "14 + 1?\nexpected: 15", "answer": "15"}
{"id": "q15", "question": "15 + 1?\nexpected: 16", "answer": "16"}
{"id": "q16", "question": "16 + 1?\nexpected: 17", "answer": "17"}
{"id": "q17", "question": "17 + 1?\nexpected: 18", "answer": "18"}
{"id": "q18", "question": "18 + 1?\nexpected: 19", "answer": "19"}
{"id": "q19", "question": "19 + 1?\nexpected: 20", "answer": "20"}
{"id": "q20", "question": "20 + 1?\nexpected: 21", "answer": "21"}
{"id": "q21", "question": "21 + 1?\nexpected: 22", "answer": "22"}
{"id": "q22", "question": "22 + 1?\nexpected: 23", "answer": "23"}
{"id": "q23", "question": "23 + 1?\nexpected: 24", "answer": "24"}
{"id": "q24", "question": "24 + 1?\nexpected: 25", "answer": "25"}
{"id": "q25", "question": "25 + 1?\nexpected: 26", "answer": "26"}
{"id": "q26", "question": "26 + 1?\nexpected: 27", "answer": "27"}
{"id": "q27", "question": "27 + 1?\nexpected: 28", "answer": "28"}
{"id": "q28", "question": "28 + 1?\nexpected: 29", "answer": "29"}
{"id": "q29", "question": "29 + 1?\nexpected: 30", "answer": "30"}
{"id": "q30", "question": "30 + 1?\nexpected: 31", "answer": "31"}
{"id": "q31", "question": "31 + 1?\nexpected: 32", "answer": "32"}
{"id": "q32", "question": "32 + 1?\nexpected: 33", "answer": "33"}
{"id": "q33", "question": "33 + 1?\nexpected: 34", "answer": "34"}
{"id": "q34", "question": "34 + 1?\nexpected: 35", "answer": "35"}
{"id": "q35", "question": "35 + 1?\nexpected: 36", "answer": "36"}
{"id": "q36", "question": "36 + 1?\nexpected: 37", "answer": "37"}
{"id": "q37", "question": "37 + 1?\nexpected: 38", "answer": "38"}
{"id": "q38", "question": "38 + 1?\nexpected: 39", "answer": "39"}
{"id": "q39", "question": "39 + 1?\nexpected: 40", "answer": "40"}
{"id": "q40", "question": "40 + 1?\nexpected: 41", "answer": "41"}
"#;

const DATASET: &str = "test/e2e/data/alpha.jsonl";
const RECIPE: &str = "test/e2e/alpha.toml";

fn edit(repo: &Repo, path: &str, edits: &[(&str, &str)]) {
    let mut text = std::fs::read_to_string(repo.path().join(path)).expect("the file");
    for (from, to) in edits {
        assert!(text.contains(from), "{path} has no {from:?}:\n{text}");
        text = text.replacen(from, to, 1);
    }
    repo.write(path, &text);
}

/// The honest PR: its server is ten times slower and answers one question in five right; its
/// unit and kernel tests fail.
fn regress(repo: &Repo) {
    edit(repo, RECIPE, &[("--tpot-ms 2 ", "--tpot-ms 20 --accuracy 0.2 ")]);
    repo.write("test/unit/alpha/test_layer.py", "def test_passes():\n    assert False\n");
    repo.write("test/kernels/test_alpha_k1.py", "def test_k1():\n    assert 1 + 1 == 3\n");
}

/// The same PR, hiding all of it in its own tree.
fn regress_and_hide(repo: &Repo) {
    regress(repo);
    edit(
        repo,
        RECIPE,
        &[
            ("hardware = [\"cpu-sim\"]", "hardware = [\"mi300x\"]"),
            ("covered = [1]", "covered = []"),
            (
                "dataset = \"test/e2e/data/alpha.jsonl\"",
                "dataset = \"test/e2e/data/alpha.jsonl\"\nlimit = 2",
            ),
        ],
    );
    let kept: String = QUESTIONS.lines().take(2).map(|line| format!("{line}\n")).collect();
    repo.write(DATASET, &kept);
    repo.write(
        "test/unit/alpha/conftest.py",
        "import pytest\n\ndef pytest_collection_modifyitems(config, items):\n    for item in items:\n        item.add_marker(pytest.mark.skip(reason='hidden'))\n",
    );
    repo.write(
        "pytest.ini",
        "[pytest]\naddopts = --deselect test/kernels/test_alpha_k1.py::test_k1\n",
    );
}

/// An honest PR that moves every file of its model to a new name, `beta` (so that it would
/// count as new and be compared with SGLang's own path, by its own recipe): its server is ten
/// times slower, answers one question in five right, and adds a failing unit test. Its files
/// move unchanged (a rename git finds however small the file), and its kernel test passes.
fn regress_and_rename(repo: &Repo) {
    for (from, to) in [
        ("pkg/models/alpha", "pkg/models/beta"),
        ("test/unit/alpha", "test/unit/beta"),
        ("test/kernels/test_alpha_k1.py", "test/kernels/test_beta_k1.py"),
        ("test/kernels/alpha_timing.py", "test/kernels/beta_timing.py"),
        ("test/e2e/test_alpha_serving.py", "test/e2e/test_beta_serving.py"),
        (RECIPE, "test/e2e/beta.toml"),
    ] {
        repo.git(&["mv", from, to]);
    }
    edit(
        repo,
        "test/e2e/beta.toml",
        &[
            ("--tpot-ms 2 ", "--tpot-ms 20 --accuracy 0.2 "),
            ("test/unit/alpha", "test/unit/beta"),
            ("test_alpha_k1.py", "test_beta_k1.py"),
            ("test_alpha_serving.py", "test_beta_serving.py"),
            ("alpha_timing.py", "beta_timing.py"),
        ],
    );
    repo.write("test/unit/beta/test_more.py", "def test_more():\n    assert False\n");
}

/// The verdict's item of `check` for alpha (the covered speed cell for `speed`): its state
/// and summary.
fn item(verdict: &serde_json::Value, check: &str) -> (String, String) {
    item_of(verdict, "alpha", check)
}

/// The verdict's item of `check` for `model`.
fn item_of(verdict: &serde_json::Value, model: &str, check: &str) -> (String, String) {
    item_where(verdict, &serde_json::Value::from(model), check)
}

/// The verdict's item of `check` whose `model` is `model` (`null`: the common checks).
fn item_where(
    verdict: &serde_json::Value,
    model: &serde_json::Value,
    check: &str,
) -> (String, String) {
    let items = verdict["sections"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|section| section["items"].as_array().into_iter().flatten());
    let found = items
        .filter(|item| item["model"] == *model && item["check"] == check)
        .find(|item| check != "speed" || item["numbers"]["covered"] == true)
        .unwrap_or_else(|| panic!("no {check} item for {model} in {verdict:#}"));
    let text = |key: &str| found[key].as_str().unwrap_or_default().to_owned();
    (text("state"), text("summary"))
}

/// The gate's verdict on `pr` after `prgate run` with `args`, and its exit code.
fn judged(pr: fn(&Repo), args: &[&str]) -> (i32, serde_json::Value) {
    judged_sample(
        &Sample { gate: THREE_PAIRS, base_files: &[(DATASET, QUESTIONS)], pr, ..Sample::default() },
        args,
    )
}

/// The gate's verdict on `sample` after `prgate run` with `args`, and its exit code.
fn judged_sample(sample: &Sample, args: &[&str]) -> (i32, serde_json::Value) {
    let fixture = Fixture::new(sample);
    let mut run_args = fixture.run_args("results");
    run_args.extend(args.iter().map(|arg| (*arg).to_owned()));
    let run_args: Vec<&str> = run_args.iter().map(String::as_str).collect();
    let run = crate::support::prgate(fixture.repo.path(), &run_args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let (gate, verdict) = fixture.gate_json("results");
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
    (gate.code, verdict)
}

/// The gate's verdict on `pr`, which it fails.
fn verdict_of(pr: fn(&Repo), args: &[&str]) -> serde_json::Value {
    let (code, verdict) = judged(pr, args);
    assert_eq!(code, 1, "the gate fails the PR: {verdict:#}");
    verdict
}

#[test]
fn a_pr_that_hides_its_regressions_in_its_own_recipe_and_harness_still_fails() {
    let control = verdict_of(regress, &[]);
    for check in ["speed", "accuracy tiny", "unit-tests", "kernel-tests"] {
        assert_eq!(item(&control, check).0, "fail", "control {check}: {:?}", item(&control, check));
    }
    let tricked = verdict_of(regress_and_hide, &[]);
    // Base's recipe measured both sides: the covered cell, the forty questions, on this node.
    let (speed, why) = item(&tricked, "speed");
    assert_eq!(speed, "fail", "the dropped covered cell is still judged: {why}");
    let (accuracy, why) = item(&tricked, "accuracy tiny");
    assert_eq!(accuracy, "fail", "base's dataset and limit still ask 40 questions: {why}");
    assert!(why.contains("40"), "{why}");
    // The conftest.py's skip hides a test that passed on base; the pytest.ini's deselect does
    // not reach prgate's pytest (`-o addopts=`): the kernel test runs and fails.
    let (unit, why) = item(&tricked, "unit-tests");
    assert_eq!(unit, "fail", "{why}");
    assert!(why.contains("passed on base but skipped"), "{why}");
    let (kernel, why) = item(&tricked, "kernel-tests");
    assert_eq!(kernel, "fail", "{why}");
    assert!(why.contains("failing on the PR: test.kernels.test_alpha_k1::test_k1"), "{why}");
    // Every narrowing is named, and fails on its own.
    let (contract, why) = item(&tricked, "recipe-contract");
    assert_eq!(contract, "fail", "{why}");
    for key in
        ["hardware (narrowing)", "speed.covered (narrowing)", "accuracy.tiny.limit (narrowing)"]
    {
        assert!(why.contains(key), "{key} in {why}");
    }
    assert!(why.contains("server.command (PR's own side)"), "{why}");
    let harness = tricked["sections"].to_string();
    assert!(harness.contains("the PR changes the test harness"), "{harness}");
    assert!(harness.contains("test/unit/alpha/conftest.py") && harness.contains("pytest.ini"));

    // Renamed, the model is the same model: held to alpha's base recipe and base side, its
    // slower server, worse answers and failing test still fail, under its new name; its
    // renamed tests are found where they moved, and are the same tests as base's.
    let renamed = verdict_of(regress_and_rename, &[]);
    for check in ["speed", "accuracy tiny", "unit-tests"] {
        let (state, why) = item_of(&renamed, "beta", check);
        assert_eq!(state, "fail", "renamed {check}: {why}");
    }
    let (_, why) = item_of(&renamed, "beta", "unit-tests");
    assert!(why.contains("failing on the PR: test.unit.beta.test_more::test_more"), "{why}");
    assert!(!why.contains("passed on base but"), "the moved test is base's: {why}");
    let (kernel, why) = item_of(&renamed, "beta", "kernel-tests");
    assert_eq!(kernel, "pass", "{why}");
    let (contract, why) = item_of(&renamed, "beta", "recipe-contract");
    assert_eq!(contract, "pass", "the rename alone changes no contract: {why}");
    assert!(why.contains("base's recipe measures both sides"), "{why}");
    let (said, why) = item_of(&renamed, "alpha", "model-renamed");
    assert_eq!(said, "warn", "{why}");
    assert!(why.contains("renamed by the PR to beta"), "{why}");
}

/// Base's common recipe: the shared unit tests and the guard's kernel test.
const COMMON: &str =
    "[tests]\nunit = [\"test/common\"]\nkernel = [\"test/kernels/test_guard.py\"]\n";

/// A PR that breaks the shared code (`pkg/__init__.py`, so the common checks run), so the
/// guard's kernel test fails, and drops that test from the common recipe (keeping the unit
/// tests, since a recipe that selects nothing is refused).
fn break_the_guard_and_drop_its_test(repo: &Repo) {
    repo.write("pkg/__init__.py", "GUARD = False\n");
    repo.write("test/kernels/test_guard.py", "def test_guard():\n    assert False\n");
    repo.write("test/e2e/common.toml", "[tests]\nunit = [\"test/common\"]\n");
}

#[test]
fn a_pr_that_drops_its_failing_common_test_from_the_common_recipe_still_fails() {
    let sample = Sample {
        gate: TWO_PAIRS,
        base_files: &[
            ("test/e2e/common.toml", COMMON),
            ("test/common/test_shared.py", "def test_shared():\n    assert True\n"),
            ("test/kernels/test_guard.py", "def test_guard():\n    assert True\n"),
        ],
        pr: break_the_guard_and_drop_its_test,
        ..Sample::default()
    };
    let (code, verdict) = judged_sample(&sample, &[]);
    assert_eq!(code, 1, "the gate fails the PR: {verdict:#}");
    let common = serde_json::Value::Null;
    // Base's recipe selected the guard's test on both sides: it ran, and fails on the PR.
    let (tests, why) = item_where(&verdict, &common, "common-tests");
    assert_eq!(tests, "fail", "{why}");
    assert!(why.contains("failing on the PR: test.kernels.test_guard::test_guard"), "{why}");
    // The dropped selection is a narrowing, named, and fails on its own.
    let (contract, why) = item_where(&verdict, &common, "recipe-contract");
    assert_eq!(contract, "fail", "{why}");
    assert!(why.contains("tests (narrowing): base test/kernels/test_guard.py, PR -"), "{why}");
}

/// A PR that only narrows its recipe: it drops the covered cell and cuts the benchmark to two
/// questions.
fn narrow(repo: &Repo) {
    repo.write("pkg/models/alpha/layer.py", "# alpha, unchanged speed\n");
    edit(
        repo,
        RECIPE,
        &[
            ("covered = [1]", "covered = []"),
            (
                "dataset = \"test/e2e/data/alpha.jsonl\"",
                "dataset = \"test/e2e/data/alpha.jsonl\"\nlimit = 2",
            ),
        ],
    );
}

#[test]
fn a_narrowing_fails_on_its_own_and_passes_as_a_warning_with_a_maintainers_approval() {
    let (code, verdict) = judged(narrow, &[]);
    let (contract, why) = item(&verdict, "recipe-contract");
    assert_eq!((code, contract.as_str()), (1, "fail"), "{why}");
    assert!(why.contains("needs a maintainer's accept-narrowing label"), "{why}");
    // `prgate ci` sets the flag from the PR's `accept-narrowing` label.
    let (code, verdict) = judged(narrow, &["--accept-narrowing"]);
    let (contract, why) = item(&verdict, "recipe-contract");
    assert_eq!((code, contract.as_str()), (0, "warn"), "{verdict:#}");
    assert!(why.contains("accepted by a maintainer (the accept-narrowing label)"), "{why}");
    // Base's recipe still measured what the PR dropped.
    let speed = item(&verdict, "speed").0;
    assert!(speed == "pass" || speed == "warn", "the covered cell is judged: {verdict:#}");
    assert!(item(&verdict, "accuracy tiny").1.contains("40"), "{verdict:#}");
}

/// The sample's server command line in its recipe, as `recipe()` writes it.
fn server_line() -> String {
    let prgate = env!("CARGO_BIN_EXE_prgate");
    format!(
        "command = \"{prgate} sim-server --listen 127.0.0.1:{{port}} --tpot-ms 2  {{extra_args}}\""
    )
}

/// The PR's server command through `sh -c`, running `before` first; the monokernel flag lands
/// in `$1`, which the script ignores: the server routes nothing.
fn unrouted_server(repo: &Repo, before: &str) {
    let prgate = env!("CARGO_BIN_EXE_prgate");
    let command = format!(
        "command = '''sh -c '{before}exec {prgate} sim-server --listen 127.0.0.1:{{port}} --tpot-ms 2' sim {{extra_args}}'''"
    );
    edit(repo, RECIPE, &[(server_line().as_str(), command.as_str())]);
}

/// The gate's routing item for a PR whose server command is `pr`'s: its state and summary.
fn routing_of(pr: fn(&Repo)) -> (String, String) {
    routing_with(pr, "")
}

/// The same, with more keys in both sides' `[server]` table, and the gate's exit code
/// unchecked.
fn routing_with(pr: fn(&Repo), server_keys: &'static str) -> (String, String) {
    // No speed sweep: the routing check is what is judged here.
    let sample = Sample { speed: Some(""), pr, server_keys, ..Sample::default() };
    let (code, verdict) = judged_sample(&sample, &[]);
    if server_keys.is_empty() {
        assert_eq!(code, 1, "the gate fails the PR: {verdict:#}");
    }
    item(&verdict, "routing")
}

#[test]
fn a_pr_server_that_prints_its_own_routing_line_is_not_routed() {
    // The control: the PR's server drops the monokernel flag, and logs no routing.
    let (control, why) = routing_of(|repo| unrouted_server(repo, ""));
    assert_eq!(control, "fail", "{why}");
    // The same server printing a routing line while it starts (spelled so that its command
    // does not hold the line): printed before it was healthy, it answers no request.
    let (printed, why) =
        routing_of(|repo| unrouted_server(repo, "printf \"[%s] routed alpha\\n\" monokernel; "));
    assert_eq!(printed, "fail", "{why}");
    assert!(why.contains("logged no monokernel routing"), "{why}");
    // Written out in its command, the line is named as the PR's own.
    let (echoed, why) =
        routing_of(|repo| unrouted_server(repo, "echo \"[monokernel] routed alpha\"; "));
    assert_eq!(echoed, "fail", "{why}");
    assert!(why.contains("the PR's own server command holds the routing line itself"), "{why}");
    // Where base's recipe says its monokernels log their routing while they load, a line
    // printed before the server was healthy counts: base's decision, shown in the docs.
    let (loading, why) = routing_with(
        |repo| unrouted_server(repo, "printf \"[%s] routed alpha\\n\" monokernel; "),
        "routing-logged = \"any\"",
    );
    assert_eq!(loading, "pass", "{why}");
}

#[test]
fn a_kernel_timing_measured_by_a_script_the_pr_changes_is_marked_as_the_prs_own() {
    // The PR's timing script reports its kernel ten times faster than base's does.
    let pr = |repo: &Repo| {
        edit(repo, "test/kernels/alpha_timing.py", &[("[10.0, 10.5, 9.8]", "[1.0, 1.05, 0.98]")]);
    };
    let sample = Sample { speed: Some(""), pr, ..Sample::default() };
    let (_code, verdict) = judged_sample(&sample, &[]);
    let (state, why) = item(&verdict, "kernel-timing");
    assert_eq!(state, "warn", "{why}");
    assert!(why.contains("layer/k1: 10.0 µs → 1.0 µs"), "{why}");
    assert!(
        why.contains(
            "the PR side measured by the PR's own script (it changes test/kernels/alpha_timing.py)"
        ),
        "{why}"
    );
    // The control: the same timing by base's own script is a plain number.
    let sample = Sample { speed: Some(""), ..Sample::default() };
    let (_code, verdict) = judged_sample(&sample, &[]);
    let (state, why) = item(&verdict, "kernel-timing");
    assert_eq!(state, "pass", "{why}");
    assert!(!why.contains("own script"), "{why}");
}

/// A key an older prgate read and this one refuses: base's recipes are there but not valid, as
/// after a prgate upgrade, or on a merge-base from before a recipe was fixed.
const RETIRED_KEY: &str = "retired-key = true\n";

/// A PR that brings valid recipes in place of base's invalid ones, and drops the model's speed
/// sweep and the common checks' kernel test on the way.
fn fix_base_recipes_and_drop_checks(repo: &Repo) {
    repo.write("pkg/__init__.py", "# shared, changed\n");
    repo.write("pkg/models/alpha/layer.py", "# alpha, changed\n");
    let sweep = "[speed]\nconcurrencies = [1, 2]\ncovered = [1]\ninput-len = 8\noutput-len = 32\nrequests-per-concurrency = 2\nwarmup-per-concurrency = 1\n";
    edit(repo, RECIPE, &[(RETIRED_KEY, ""), (sweep, "")]);
    repo.write("test/e2e/common.toml", "[tests]\nunit = [\"test/common\"]\n");
}

#[test]
fn a_model_and_common_checks_whose_base_recipe_is_not_valid_cannot_be_judged_by_the_prs_own() {
    let sample = Sample {
        recipe_extra: RETIRED_KEY,
        base_files: &[
            ("test/e2e/common.toml", "[tests]\nunit = [\"test/common\"]\nretired-key = true\n"),
            ("test/common/test_shared.py", "def test_shared():\n    assert True\n"),
        ],
        pr: fix_base_recipes_and_drop_checks,
        ..Sample::default()
    };
    let (code, verdict) = judged_sample(&sample, &[]);
    assert_eq!((code, verdict["result"].as_str()), (2, Some("error")), "{verdict:#}");
    // The model exists on base: its base recipe is broken, not absent, so the PR's own recipe
    // (without its sweep) does not stand in for it.
    let (contract, why) = item(&verdict, "recipe-contract");
    assert_eq!(contract, "error", "{why}");
    assert!(why.contains("base's recipe test/e2e/alpha.toml is not valid"), "{why}");
    assert!(why.contains("retired-key"), "the recipe's error: {why}");
    let (unit, why) = item(&verdict, "unit-tests");
    assert_eq!(unit, "error", "{why}");
    assert!(why.contains("base's recipe is not valid"), "{why}");
    // The common checks alike: base's file is there, so it is base's to fix.
    let common = serde_json::Value::Null;
    let (contract, why) = item_where(&verdict, &common, "recipe-contract");
    assert_eq!(contract, "error", "{why}");
    assert!(why.contains("base's recipe test/e2e/common.toml is not valid"), "{why}");
    let (tests, why) = item_where(&verdict, &common, "common-tests");
    assert_eq!(tests, "error", "{why}");
    assert!(verdict["author_must_provide"].as_array().is_some_and(Vec::is_empty), "{verdict:#}");
}

#[test]
fn a_test_file_base_selects_that_the_pr_changes_is_named_as_the_prs_own() {
    // The PR loosens the tolerance of the unit test base's recipe selects (`test/unit/alpha`),
    // and adds a test file no selection runs.
    let pr = |repo: &Repo| {
        repo.write("pkg/models/alpha/layer.py", "# alpha, changed\n");
        repo.write(
            "test/unit/alpha/test_layer.py",
            "def test_passes():\n    assert abs(1.0 - 1.4) < 0.5  # atol loosened\n",
        );
        repo.write("test/other/test_unselected.py", "def test_other():\n    assert True\n");
    };
    let sample = Sample { speed: Some(""), pr, ..Sample::default() };
    let (_code, verdict) = judged_sample(&sample, &[]);
    let (state, why) = item(&verdict, "pr-test-file");
    assert_eq!(state, "warn", "{why}");
    assert_eq!(
        why,
        "measured by the PR's own test file: test/unit/alpha/test_layer.py (added or changed by this PR)"
    );
    let sections = verdict["sections"].to_string();
    assert_eq!(sections.matches("pr-test-file").count(), 1, "{sections}");
    // The unselected file is not the PR's own test file; it is a path no pattern matches.
    let (state, why) = item_where(&verdict, &serde_json::Value::Null, "unmatched-path");
    assert_eq!(state, "warn", "{why}");
    assert!(why.ends_with(": test/other/test_unselected.py"), "{why}");
}
