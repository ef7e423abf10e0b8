use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::time::Duration;

use prgate_scope::plan::{ModelPlan, Tier};

use super::*;
use crate::recipe::{EXAMPLE, Recipe};

fn model(name: &str, tier: Tier, new: bool) -> ModelPlan {
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

fn example() -> Recipe {
    Recipe::parse(EXAMPLE, "example.toml").expect("the example recipe parses")
}

/// `1h02m03s`, `5m00s`, `0s`.
fn clock(duration: Duration) -> String {
    let seconds = duration.as_secs();
    let (hours, minutes, seconds) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    match (hours, minutes) {
        (0, 0) => format!("{seconds}s"),
        (0, _) => format!("{minutes}m{seconds:02}s"),
        _ => format!("{hours}h{minutes:02}m{seconds:02}s"),
    }
}

/// An estimate as a table: one part a line, then the total.
fn show(estimate: &Estimate) -> String {
    let mut out = String::new();
    for part in estimate.parts() {
        let _ = writeln!(
            out,
            "{:<34}{:>10}  {}",
            part.part.to_string(),
            clock(part.duration),
            part.source.as_str()
        );
    }
    let _ = write!(
        out,
        "{:<34}{:>10}  {}",
        "total",
        clock(estimate.duration()),
        estimate.source().as_str()
    );
    out
}

fn check_estimate(plan: &ModelPlan, recipe: Option<&Recipe>, history: &History, expect: &str) {
    let actual = show(&estimate_model(plan, recipe, history));
    assert_eq!(actual, expect.trim_start_matches('\n'), "\n{actual}");
}

#[test]
fn a_full_tier_from_the_recipe_runs_every_part_on_both_sides() {
    // An accuracy benchmark: the repeats an unchanged PR takes (3), 20 minutes each; one at a
    // time, the two rounds after the first reload once each (base's server ends up, to open the
    // pairs): 4 loads before the speed phase.
    // A speed run: 30s + 20ms · (1 + 10) waves · 1024 tokens = 255.28s; one server at a time
    // (no node given) and no memory API named (`probe`: the blocked design, the upper bound),
    // a cell is 11 blocks (2n + 1) of 2 runs and its share of the phase's 10 reloads (10m04s
    // each, 5 cells): 1h33m36s + 20m08s.
    check_estimate(
        &model("deepseek_v41", Tier::Full, false),
        Some(&example()),
        &History::default(),
        "
server startups                       40m16s  recipe
unit tests (base)                      5m00s  recipe
unit tests (pr)                        5m00s  recipe
kernel tests (base)                    5m00s  recipe
kernel tests (pr)                      5m00s  recipe
kernel timing (base)                   5m00s  recipe
kernel timing (pr)                     5m00s  recipe
serving tests (base)                   5m00s  recipe
serving tests (pr)                     5m00s  recipe
accuracy gsm8k (base)               1h00m00s  recipe
accuracy gsm8k (pr)                 1h00m00s  recipe
accuracy gpqa-diamond (base)        1h00m00s  recipe
accuracy gpqa-diamond (pr)          1h00m00s  recipe
speed at concurrency 1              1h53m44s  recipe
speed at concurrency 4              1h53m44s  recipe
speed at concurrency 16             1h53m44s  recipe
speed at concurrency 64             1h53m44s  recipe
speed at concurrency 128            1h53m44s  recipe
total                              14h48m56s  recipe",
    );
    // A recipe that names SGLang's API: 11 runs a cell and its share of the phase's 10 wakes
    // (30s each): 46m48s + 1m00s.
    let waking = EXAMPLE.replace("memory-api = \"probe\"", "memory-api = \"sglang\"");
    let waking = Recipe::parse(&waking, "example.toml").expect("parses");
    let estimate = estimate_model(
        &model("deepseek_v41", Tier::Full, false),
        Some(&waking),
        &History::default(),
    );
    let cell = estimate.parts().iter().find(|part| part.part == Part::SpeedCell { concurrency: 1 });
    assert_eq!(cell.map(|part| part.duration.as_secs()), Some(46 * 60 + 48 + 60));
}

#[test]
fn smoke_runs_tests_and_the_covered_cells_and_a_new_model_has_no_base_tree() {
    let with_install =
        EXAMPLE.replace("[tests]\n", "[install]\ncommand = \"pip install -e .\"\n\n[tests]\n");
    let recipe = Recipe::parse(&with_install, "example.toml").expect("parses");
    check_estimate(
        &model("deepseek_v41", Tier::Smoke, true),
        Some(&recipe),
        &History::default(),
        "
install                                5m00s  recipe
server startups                       20m08s  recipe
unit tests (pr)                        5m00s  recipe
kernel tests (pr)                      5m00s  recipe
serving tests (base)                   5m00s  recipe
serving tests (pr)                     5m00s  recipe
speed at concurrency 1              2h07m09s  recipe
speed at concurrency 4              2h07m09s  recipe
speed at concurrency 16             2h07m09s  recipe
total                               7h06m36s  recipe",
    );
}

#[test]
fn without_a_recipe_every_check_is_not_run_at_once() {
    check_estimate(
        &model("muse_spark", Tier::Full, false),
        None,
        &History::default(),
        "
total                                     0s  no-recipe",
    );
}

/// A `step-finished` line of the event stream, times in seconds.
fn finished(
    model: Option<&str>,
    check: &str,
    side: &str,
    part: Option<&str>,
    from: u64,
    to: u64,
) -> String {
    let quote = |value: Option<&str>| {
        value.map_or_else(|| "null".to_owned(), |value| format!("\"{value}\""))
    };
    format!(
        "{{\"schema_version\":1,\"event\":\"step-finished\",\"model\":{},\"check\":\"{check}\",\"side\":\"{side}\",\"part\":{},\"time_ms\":{},\"started_ms\":{},\"outcome\":\"tests\"}}\n",
        quote(model),
        quote(part),
        to * 1000,
        from * 1000,
    )
}

/// A full run of the example recipe's steps for `model`, from `start`, each step `minutes`
/// long, with `pairs` pairs per speed cell.
fn full_run(model: &str, start: u64, minutes: u64, pairs: u32) -> String {
    let mut steps: Vec<(&str, &str, Option<String>)> = Vec::new();
    for check in ["unit-tests", "kernel-tests", "kernel-timing", "serving-tests", "routing"] {
        for side in ["base", "pr"] {
            steps.push((check, side, None));
        }
    }
    for benchmark in ["gsm8k", "gpqa-diamond"] {
        for side in ["base", "pr"] {
            steps.push(("accuracy", side, Some(benchmark.to_owned())));
        }
    }
    for concurrency in [1, 4, 16, 64, 128] {
        for pair in 1..=pairs {
            steps.push(("speed", "both", Some(format!("concurrency-{concurrency}-pair-{pair}"))));
        }
    }
    let mut text = String::new();
    let mut at = start;
    for (check, side, part) in steps {
        text.push_str(&finished(Some(model), check, side, part.as_deref(), at, at + minutes * 60));
        at += minutes * 60;
    }
    text
}

#[test]
fn history_replaces_the_recipe_part_by_part_from_the_latest_run_that_has_it() {
    let recipe = example();
    // A full run (1-minute steps, 7 pairs a cell), then a smoke run of tests and three cells
    // (2-minute steps, 3 pairs a cell).
    let mut events = full_run("deepseek_v41", 0, 1, 7);
    let mut at = 100_000;
    for check in ["unit-tests", "kernel-tests", "serving-tests"] {
        for side in ["base", "pr"] {
            events.push_str(&finished(Some("deepseek_v41"), check, side, None, at, at + 120));
            at += 120;
        }
    }
    for concurrency in [1, 4, 16] {
        for pair in 1..=3 {
            let part = format!("concurrency-{concurrency}-pair-{pair}");
            events.push_str(&finished(
                Some("deepseek_v41"),
                "speed",
                "both",
                Some(&part),
                at,
                at + 120,
            ));
            at += 120;
        }
    }
    // Another model's steps, and the common checks', are not this model's.
    events.push_str(&finished(Some("kimi_k3"), "unit-tests", "base", None, 0, 9_999));
    events.push_str(&finished(None, "common-tests", "base", None, 0, 9_999));
    let history = History::parse(&events, "events.jsonl").expect("parses");

    check_estimate(
        &model("deepseek_v41", Tier::Full, false),
        Some(&recipe),
        &history,
        "
server startups                           0s  history
unit tests (base)                      2m00s  history
unit tests (pr)                        2m00s  history
kernel tests (base)                    2m00s  history
kernel tests (pr)                      2m00s  history
kernel timing (base)                   1m00s  history
kernel timing (pr)                     1m00s  history
serving tests (base)                   2m00s  history
serving tests (pr)                     2m00s  history
accuracy gsm8k (base)                  1m00s  history
accuracy gsm8k (pr)                    1m00s  history
accuracy gpqa-diamond (base)           1m00s  history
accuracy gpqa-diamond (pr)             1m00s  history
speed at concurrency 1                 6m00s  history
speed at concurrency 4                 6m00s  history
speed at concurrency 16                6m00s  history
speed at concurrency 64                7m00s  history
speed at concurrency 128               7m00s  history
total                                 50m00s  history",
    );

    // A recipe with a benchmark no run had: that part comes from the recipe.
    let more = EXAMPLE.replace("name = \"gsm8k\"", "name = \"aime26\"");
    let recipe = Recipe::parse(&more, "example.toml").expect("parses");
    let estimate =
        estimate_model(&model("deepseek_v41", Tier::Full, false), Some(&recipe), &history);
    assert_eq!(estimate.source(), EstimateSource::Mixed);
    let aime: Vec<String> = estimate
        .parts()
        .iter()
        .filter(|part| part.part.to_string().starts_with("accuracy aime26"))
        .map(|part| format!("{} {}", clock(part.duration), part.source.as_str()))
        .collect();
    assert_eq!(aime, ["1h00m00s recipe", "1h00m00s recipe"]);
}

#[test]
fn an_accuracy_benchmark_counts_its_expected_repeats_and_its_past_repeats_add_up() {
    let accuracy = |estimate: &Estimate| -> Vec<String> {
        estimate
            .parts()
            .iter()
            .filter(|part| part.part.to_string().starts_with("accuracy gsm8k"))
            .map(|part| format!("{} {}", clock(part.duration), part.source.as_str()))
            .collect()
    };
    let full = model("deepseek_v41", Tier::Full, false);
    // The expected repeats, or the recipe's cap when it is lower.
    for (repeats, expect) in [(20, "1h00m00s"), (3, "1h00m00s"), (2, "40m00s"), (1, "20m00s")] {
        let text = EXAMPLE.replacen("repeats = 20", &format!("repeats = {repeats}"), 1);
        let recipe = Recipe::parse(&text, "example.toml").expect("parses");
        let estimate = estimate_model(&full, Some(&recipe), &History::default());
        assert_eq!(accuracy(&estimate), [format!("{expect} recipe"), format!("{expect} recipe")]);
    }
    // A past run's repeats of a benchmark, each its own step, are the benchmark's time.
    let mut events = String::new();
    let mut at = 0;
    for (side, repeats) in [("base", 2), ("pr", 4)] {
        for repeat in 0..repeats {
            let part = format!("gsm8k@repeat-{repeat}");
            let step = finished(Some("deepseek_v41"), "accuracy", side, Some(&part), at, at + 90);
            events.push_str(&step);
            at += 90;
        }
    }
    let history = History::parse(&events, "events.jsonl").expect("parses");
    let estimate = estimate_model(&full, Some(&example()), &history);
    assert_eq!(accuracy(&estimate), ["3m00s history", "6m00s history"]);

    // The rounds' switches are server loads (blocked) or wakes (by memory release), priced at
    // the model's past loads and wakes: 2 loads + 2 switches of the 3 rounds.
    let server = |event: &str, side: &str, from: u64, to: u64| {
        format!(
            "{{\"schema_version\":1,\"event\":\"{event}\",\"model\":\"deepseek_v41\",\"check\":\"routing\",\"side\":\"{side}\",\"part\":null,\"time_ms\":{},\"started_ms\":{}}}\n",
            to * 1000,
            from * 1000
        )
    };
    let mut events = server("server-started", "pr", 0, 100);
    events.push_str(&server("server-started", "base", 100, 200));
    events.push_str(&server("server-woken", "pr", 200, 210));
    let history = History::parse(&events, "events.jsonl").expect("parses");
    let startups = |recipe: &Recipe| {
        let estimate = estimate_model(&full, Some(recipe), &history);
        estimate.parts()[0].clone()
    };
    let blocked = startups(&example());
    assert_eq!((blocked.part, clock(blocked.duration)), (Part::ServerStartups, "6m40s".into()));
    let waking = EXAMPLE.replace("memory-api = \"probe\"", "memory-api = \"sglang\"");
    let waking = startups(&Recipe::parse(&waking, "example.toml").expect("parses"));
    assert_eq!(clock(waking.duration), "3m40s");

    // A past run's own rounds count: six repeats on a side are five switches, and one more
    // back to base's server for the pairs (the demo's PR #130 loaded 14 times for them).
    for repeat in 0..6 {
        let part = format!("gsm8k@repeat-{repeat}");
        let step = finished(Some("deepseek_v41"), "accuracy", "pr", Some(&part), 300, 301);
        events.push_str(&step);
    }
    let history = History::parse(&events, "events.jsonl").expect("parses");
    let blocked = estimate_model(&full, Some(&example()), &history).parts()[0].clone();
    assert_eq!(clock(blocked.duration), "13m20s", "100s a load, 2 + 6 loads");
}

#[test]
fn a_resumed_run_continues_its_run_and_a_fresh_run_starts_a_new_one() {
    let unit = |side, from, to| finished(Some("m"), "unit-tests", side, None, from, to);
    let kernel = |side, from, to| finished(Some("m"), "kernel-tests", side, None, from, to);
    let cases = [
        // Killed after the base side; resumed: one run, both sides.
        (vec![unit("base", 0, 60), unit("pr", 500, 620)], "1m00s 2m00s"),
        // Run twice: the second run's durations.
        (
            vec![
                unit("base", 0, 60),
                unit("pr", 60, 120),
                unit("base", 200, 380),
                unit("pr", 380, 560),
            ],
            "3m00s 3m00s",
        ),
        // The second run was cut short: its base side, and the first run's PR side.
        (vec![unit("base", 0, 60), unit("pr", 60, 120), unit("base", 200, 440)], "4m00s 1m00s"),
        // Another check's steps in between do not split a run.
        (vec![unit("base", 0, 60), kernel("base", 60, 70), unit("pr", 70, 370)], "1m00s 5m00s"),
    ];
    let recipe = example();
    for (lines, expect) in cases {
        let history = History::parse(&lines.concat(), "events.jsonl").expect("parses");
        let estimate = estimate_model(&model("m", Tier::Smoke, false), Some(&recipe), &history);
        let unit: Vec<String> = estimate
            .parts()
            .iter()
            .filter(|part| matches!(part.part, Part::Tests { check: Check::UnitTests, .. }))
            .map(|part| clock(part.duration))
            .collect();
        assert_eq!(unit.join(" "), expect, "{lines:?}");
    }
}

#[test]
fn the_common_checks_are_a_job_of_their_own() {
    let common = crate::recipe::common::CommonRecipe::parse(
        "[tests]\nunit = [\"test/unit/common\"]\n",
        "common.toml",
    )
    .expect("parses");
    let estimate = estimate_common(Some(&common), &History::default());
    assert_eq!(clock(estimate.duration()), "10m00s");
    let events = finished(None, "common-tests", "base", None, 0, 90);
    let history = History::parse(&events, "events.jsonl").expect("parses");
    let estimate = estimate_common(Some(&common), &history);
    assert_eq!(
        (clock(estimate.duration()), estimate.source()),
        ("6m30s".to_owned(), EstimateSource::Mixed)
    );
    assert_eq!(estimate_common(None, &history).source(), EstimateSource::NoRecipe);
}

#[test]
fn history_errors_name_the_file_and_the_line() {
    let good = finished(Some("m"), "unit-tests", "base", None, 0, 60);
    let check = |text: String, expect: &str| {
        let outcome = History::parse(&text, "events.jsonl").map(|history| history.models().len());
        let actual = match outcome {
            Ok(models) => format!("ok, {models} models"),
            Err(error) => error.to_string(),
        };
        assert_eq!(actual, expect, "{text}");
    };
    check(format!("{good}\n{good}"), "ok, 1 models");
    // A last line cut short by a kill is skipped; the same line inside the file is an error.
    check(format!("{good}{{\"schema_version\":1,\"ev"), "ok, 1 models");
    // ... and said.
    let torn = History::parse(&format!("{good}{{\"schema_version\":1,\"ev"), "events.jsonl")
        .expect("parses");
    assert_eq!(
        torn.skipped(),
        [
            "events.jsonl:2: the last line is cut short (a write a kill stopped), so it is skipped: EOF while parsing a string at line 1 column 23"
        ]
    );
    let whole = History::parse(&format!("{good}{good}"), "events.jsonl").expect("parses");
    assert!(whole.skipped().is_empty());
    assert_eq!(History::merge([whole, torn]).skipped().len(), 1);
    check(
        format!("{{\"schema_version\":1,\"ev\n{good}"),
        "events.jsonl:1: not an event of prgate run's event stream: EOF while parsing a string at line 1 column 23",
    );
    check(
        format!("{good}{}", good.replace("\"schema_version\":1", "\"schema_version\":2")),
        "events.jsonl:2: schema_version 2 is newer than this prgate reads (1)\nhint: use the prgate that wrote it",
    );
    // Started and skipped steps are fine; a key the format does not have is refused, named
    // (ARCHITECTURE.md, "unknown keys, one rule").
    let skipped = "{\"schema_version\":1,\"event\":\"step-skipped\",\"model\":null,\"check\":\"common-tests\",\"side\":\"base\",\"part\":null,\"time_ms\":5";
    check(format!("{skipped}}}\n"), "ok, 0 models");
    let unknown = History::parse(&format!("{skipped},\"new_field\":1}}\n"), "events.jsonl")
        .map(|history| history.models().len());
    let error = unknown.expect_err("an unknown key is refused").to_string();
    assert!(error.starts_with("events.jsonl:1: not an event"), "{error}");
    assert!(error.contains("unknown field `new_field`"), "{error}");
}

/// A node `name:hardware`, optionally `:gpus` and `:checkpoint+checkpoint`.
fn node(spec: &str) -> Node {
    let fields: Vec<&str> = spec.split(':').collect();
    Node {
        name: fields[0].to_owned(),
        hardware: fields[1].to_owned(),
        gpus: fields.get(2).map(|gpus| gpus.parse().expect("a GPU count")),
        checkpoints: fields
            .get(3)
            .map(|list| list.split('+').map(str::to_owned).collect::<BTreeSet<_>>()),
    }
}

/// A job `name minutes [hardware,hardware [tp [checkpoint]]]`.
fn job(spec: &str) -> Job {
    let fields: Vec<&str> = spec.split_whitespace().collect();
    let minutes: u64 = fields[1].parse().expect("minutes");
    Job {
        model: Some(fields[0].to_owned()),
        duration: Duration::from_secs(minutes * 60),
        needs: Needs {
            hardware: fields.get(2).map(|list| list.split(',').map(str::to_owned).collect()),
            gpus: fields.get(3).map(|tp| tp.parse().expect("tp")),
            checkpoint: fields.get(4).map(|name| (*name).to_owned()),
        },
    }
}

fn minutes(duration: Duration) -> u64 {
    duration.as_secs() / 60
}

/// A schedule as text: each node's jobs and total, the makespan against the bound, and the
/// jobs no node can run.
fn render(schedule: &Schedule, jobs: &[Job], nodes: usize) -> String {
    let name = |job: usize| jobs[job].model.clone().unwrap_or_else(|| "(common)".to_owned());
    let mut out = String::new();
    for load in schedule.nodes() {
        let names: Vec<String> = load.jobs.iter().map(|&job| name(job)).collect();
        let _ = writeln!(out, "{} {}: {}", load.node, minutes(load.total), names.join(" "));
    }
    let bound = schedule.lower_bound();
    let _ = write!(
        out,
        "makespan {}, bound {} ({}){}",
        minutes(schedule.makespan()),
        minutes(bound.duration),
        bound.basis.describe(name, nodes),
        if schedule.optimal() { ", optimal" } else { "" }
    );
    for unschedulable in schedule.unschedulable() {
        let _ =
            write!(out, "\n{} unschedulable: {}", name(unschedulable.job), unschedulable.reason);
    }
    out
}

#[test]
fn an_unschedulable_job_records_no_checkpoint_only_where_a_node_lacks_just_that() {
    use prgate_gate::evidence::NotRunReason::{HardwareAbsent, NoCheckpoint};
    let cases: [(&[&str], &str, _); 4] = [
        (&["n1:mi355x:8:glm", "n2:mi355x:4:qwen"], "qwen 40 mi355x 8 qwen", NoCheckpoint),
        (&["n1:mi355x:4:qwen"], "qwen 40 mi355x 8 qwen", HardwareAbsent),
        (&["n1:mi350x:8:qwen"], "qwen 40 mi355x 8 qwen", HardwareAbsent),
        (&[], "qwen 40 mi355x 8 qwen", HardwareAbsent),
    ];
    for (nodes, spec, expect) in cases {
        let nodes: Vec<Node> = nodes.iter().map(|spec| node(spec)).collect();
        let schedule = schedule(&[job(spec)], &nodes, Method::Exact);
        let found: Vec<_> = schedule.unschedulable().iter().map(|job| job.not_run).collect();
        assert_eq!(found, [expect], "{nodes:?}");
    }
}

fn check_schedule(nodes: &[&str], jobs: &[&str], method: Method, expect: &str) {
    let nodes: Vec<Node> = nodes.iter().map(|spec| node(spec)).collect();
    let jobs: Vec<Job> = jobs.iter().map(|spec| job(spec)).collect();
    let schedule = schedule(&jobs, &nodes, method);
    let actual = render(&schedule, &jobs, nodes.len());
    assert_eq!(actual, expect.trim_start_matches('\n'), "\n{actual}");
}

#[test]
fn lpt_is_improved_to_the_optimum() {
    let nodes = ["n1:mi355x", "n2:mi355x"];
    let jobs = ["a 30", "b 30", "c 20", "d 20", "e 20"];
    // LPT: a, b apart, then c, d, e alternate: 70 against the optimum 60.
    check_schedule(
        &nodes,
        &jobs,
        Method::Lpt,
        "
n1 70: a c e
n2 50: b d
makespan 70, bound 60 (5 jobs spread evenly over the 2 nodes)",
    );
    check_schedule(
        &nodes,
        &jobs,
        Method::LocalSearch,
        "
n1 60: c d e
n2 60: a b
makespan 60, bound 60 (5 jobs spread evenly over the 2 nodes), optimal",
    );
    // A case the local search does not fix and the exact search does.
    let jobs = ["a 143", "b 122", "c 117", "d 92", "e 35", "f 16"];
    check_schedule(
        &nodes,
        &jobs,
        Method::LocalSearch,
        "
n1 270: a d e
n2 255: b c f
makespan 270, bound 262 (6 jobs spread evenly over the 2 nodes)",
    );
    check_schedule(
        &nodes,
        &jobs,
        Method::Exact,
        "
n1 260: a c
n2 265: b d e f
makespan 265, bound 262 (6 jobs spread evenly over the 2 nodes), optimal",
    );
}

#[test]
fn jobs_go_only_where_their_hardware_gpus_and_checkpoint_are() {
    check_schedule(
        &["a1:mi355x", "a2:mi355x", "b1:mi350x"],
        &["big 300 mi355x", "wide 200 mi355x,mi350x", "old 100 mi350x", "x 50 mi300x", "t 10"],
        Method::Exact,
        "
a1 300: big
a2 200: wide
b1 110: old t
makespan 300, bound 300 (the longest job (big)), optimal
x unschedulable: no node has hardware the recipe supports (mi300x); the nodes are 1 mi350x, 2 mi355x",
    );
    check_schedule(
        &["n1:mi355x:8:kimi-k3+glm", "n2:mi355x:4:kimi-k3+glm+qwen"],
        &[
            "kimi 100 mi355x 8 kimi-k3",
            "glm 60 mi355x 4 glm",
            "qwen 40 mi355x 8 qwen",
            "tiny 20 mi355x 2 qwen",
        ],
        Method::Exact,
        "
n1 100: kimi
n2 80: glm tiny
makespan 100, bound 100 (the longest job (kimi)), optimal
qwen unschedulable: node n1 has no checkpoint qwen; node n2 has 4 GPUs; the recipe needs 8 (tp)",
    );
    check_schedule(
        &[],
        &["a 10"],
        Method::Exact,
        "
makespan 0, bound 0 (no jobs), optimal
a unschedulable: there are no nodes",
    );
}

#[test]
fn the_bound_takes_the_strongest_argument() {
    let two = ["n1:x", "n2:x"];
    // Three equal jobs on two nodes: two of them share one.
    check_schedule(
        &two,
        &["a 60", "b 60", "c 60"],
        Method::Exact,
        "
n1 120: a c
n2 60: b
makespan 120, bound 120 (2 of the 3 longest jobs share one of the 2 nodes), optimal",
    );
    // Jobs confined to some nodes are spread over those; a job that may go either way still
    // lands on a node with what only that node can run.
    check_schedule(
        &["n1:a", "n2:b"],
        &["x 60 a", "y 60 a", "v 60 a", "z 150 a,b"],
        Method::Exact,
        "
n1 180: x y v
n2 150: z
makespan 180, bound 180 (3 jobs spread evenly over the only 1 node that can run them), optimal",
    );
    check_schedule(&["n1:a", "n2:b"], &["x 100 a", "w 120 b", "z 150 a,b"], Method::Exact, "
n1 250: z x
n2 120: w
makespan 250, bound 250 (z plus the jobs only its node can run, on the least busy of its nodes), optimal");
    check_schedule(
        &two,
        &[],
        Method::Exact,
        "
n1 0: \nn2 0: \nmakespan 0, bound 0 (no jobs), optimal",
    );
}

/// The simulated server's SplitMix64, so the sweep is the same on every machine.
struct Random(prgate_sim_server::rng::SplitMix64);

impl Random {
    /// Uniform in `low..=high`.
    fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.0.next_u64() % (high - low + 1)
    }
}

/// Whether `schedule` places every job that fits exactly once, on a node it fits, with the
/// right totals, and never beats its bound.
fn assert_valid(schedule: &Schedule, jobs: &[Job], nodes: &[Node]) {
    let mut seen = vec![0; jobs.len()];
    for (index, load) in schedule.nodes().iter().enumerate() {
        let mut total = Duration::ZERO;
        for &job in &load.jobs {
            seen[job] += 1;
            total += jobs[job].duration;
            assert_eq!(jobs[job].needs.blocker(&nodes[index]), None, "job {job} on {}", load.node);
        }
        assert_eq!(total, load.total);
    }
    for unschedulable in schedule.unschedulable() {
        seen[unschedulable.job] += 1;
    }
    assert!(seen.iter().all(|&count| count == 1), "{seen:?}");
    assert!(schedule.makespan() >= schedule.lower_bound().duration);
}

#[test]
fn a_sweep_of_random_sets_keeps_every_invariant_and_is_optimal_or_within_ten_percent_of_the_bound()
{
    let mut random = Random(prgate_sim_server::rng::SplitMix64::new(2026));
    // The bound is not always reachable (three equal jobs on two nodes): a schedule proven
    // optimal may be further from it.
    let mut worst_unproven: f64 = 1.0;
    for _case in 0..300 {
        let count = usize::try_from(random.between(2, 4)).unwrap_or(2);
        let mixed = random.between(0, 3) == 0;
        let nodes: Vec<Node> = (0..count)
            .map(|index| Node {
                name: format!("n{index}"),
                hardware: if mixed && index == 0 { "mi350x".into() } else { "mi355x".into() },
                gpus: None,
                checkpoints: None,
            })
            .collect();
        let jobs: Vec<Job> = (0..random.between(3 * count as u64, 5 * count as u64))
            .map(|index| {
                // A quarter full-tier (4-8h), half smoke (1.5-3.5h), a quarter tests only.
                let minutes = match random.between(0, 3) {
                    0 => random.between(240, 480),
                    1 | 2 => random.between(90, 210),
                    _ => random.between(5, 40),
                };
                let hardware = match (mixed, random.between(0, 5)) {
                    (true, 0) => vec!["mi350x".to_owned()],
                    (true, 1) => vec!["mi355x".to_owned()],
                    _ => vec!["mi355x".to_owned(), "mi350x".to_owned()],
                };
                Job {
                    model: Some(format!("m{index}")),
                    duration: Duration::from_secs(minutes * 60),
                    needs: Needs { hardware: Some(hardware), ..Needs::default() },
                }
            })
            .collect();
        let lpt = schedule(&jobs, &nodes, Method::Lpt);
        let local = schedule(&jobs, &nodes, Method::LocalSearch);
        let exact = schedule(&jobs, &nodes, Method::Exact);
        for schedule in [&lpt, &local, &exact] {
            assert_valid(schedule, &jobs, &nodes);
        }
        assert!(exact.makespan() <= local.makespan() && local.makespan() <= lpt.makespan());
        if !exact.optimal() {
            worst_unproven = worst_unproven.max(exact.ratio().unwrap_or(1.0));
        }
    }
    assert!(
        worst_unproven <= 1.10,
        "a makespan not proven optimal is {worst_unproven:.3} times its bound"
    );
}

#[test]
fn realistic_model_sets_stay_within_ten_percent_of_the_bound() {
    // The sets of bench/schedule.md shaped like the seed: the jobs two MI355X nodes can run
    // of a dozen models (a few big, many small, two without a recipe) and the common checks,
    // in minutes as the recipe estimate gives them.
    let sets: [&[u64]; 4] = [
        // A shared change: every model smoke, the common checks.
        &[178, 291, 136, 136, 98, 136, 0, 0, 10],
        // A shared change and kimi_k3 full.
        &[178, 511, 136, 136, 98, 136, 0, 0, 10],
        // An untrusted diff: every model full.
        &[393, 511, 351, 311, 212, 258, 0, 0, 10],
        // Three models full.
        &[393, 351, 212],
    ];
    let nodes = [node("n1:mi355x"), node("n2:mi355x")];
    for minutes_list in sets {
        let jobs: Vec<Job> = minutes_list
            .iter()
            .enumerate()
            .map(|(index, minutes)| Job {
                model: Some(format!("m{index}")),
                duration: Duration::from_secs(minutes * 60),
                needs: Needs::default(),
            })
            .collect();
        let schedule = schedule(&jobs, &nodes, Method::Exact);
        assert_valid(&schedule, &jobs, &nodes);
        let ratio = schedule.ratio().unwrap_or(1.0);
        assert!(ratio <= 1.10, "{minutes_list:?}: {ratio:.3}");
        assert!(schedule.optimal(), "{minutes_list:?}");
    }
}

#[test]
fn identical_nodes_are_numbered_from_one_with_their_hardware_lowercase() {
    let nodes = Node::identical(3, "MI355X");
    let named: Vec<(&str, &str)> =
        nodes.iter().map(|node| (node.name.as_str(), node.hardware.as_str())).collect();
    assert_eq!(named, [("node-1", "mi355x"), ("node-2", "mi355x"), ("node-3", "mi355x")]);
    assert!(nodes.iter().all(|node| node.gpus.is_none() && node.checkpoints.is_none()));
    assert!(Node::identical(0, "mi355x").is_empty());
}
