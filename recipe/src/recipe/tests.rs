//! Tests of the recipe: the example, the defaults, every kind of error, the server's argv on
//! both sides, and whether a recipe runs on a node.

use prgate_gate::evidence::Check;

use super::*;
use crate::node::{self, NodeProfile};

/// The smallest valid recipe; cases below replace or add lines.
const MINIMAL: &str = r#"hardware = ["mi355x"]
checkpoint = "m"
tp = 1
[server]
command = "serve --port {port}"
monokernel-flag = "--mono"
routing-pattern = "routed"
"#;

/// Renders a parsed recipe, or the error as users see it.
fn check(text: &str) -> String {
    match Recipe::parse(text, "test/e2e/m.toml") {
        Ok(recipe) => render(&recipe),
        Err(error) => format!("error: {error}"),
    }
}

fn render(recipe: &Recipe) -> String {
    let server = recipe.server();
    let mut lines = vec![
        format!("hardware: {:?}", recipe.hardware()),
        format!("checkpoint: {}, tp: {}", recipe.checkpoint(), recipe.tp()),
        format!("server.command: {:?}", recipe.server_command(MONO, 30000, "/ckpt")),
        format!("server.monokernel-flag: {:?}", server.monokernel_flag()),
        format!("server.health-path: {}", server.health_path),
        format!("server.startup-timeout: {:?}", server.startup_timeout),
        format!("server.routing-pattern: {}", server.routing_pattern),
        format!("server.memory-api: {}", server.memory_api),
        format!("tests: {:?}", recipe.tests()),
    ];
    for script in recipe.kernel_timing() {
        lines.push(format!("kernel-timing {}: {:?}", script.name, script.command("/out/t.json")));
    }
    for benchmark in recipe.accuracy() {
        let evaluator = match &benchmark.evaluator {
            Evaluator::External(external) => format!(
                "external {:?}, metrics {}",
                external.command(30000, "/ckpt", "/results", 3),
                external.metrics
            ),
            Evaluator::Builtin(builtin) => format!("{builtin:?}"),
        };
        lines.push(format!(
            "accuracy {} (token {:?}, repeats {:?}): {evaluator}",
            benchmark.name, benchmark.token, benchmark.repeats
        ));
    }
    lines.push(format!("speed: {:?}", recipe.speed()));
    lines.push(format!("timeouts: {:?}", recipe.timeouts()));
    lines.join("\n")
}

const MONO: ServerSide = ServerSide { monokernel: true };
const OWN_PATH: ServerSide = ServerSide { monokernel: false };

/// `MINIMAL` with the line starting with `key =` replaced by `line`.
fn with(key: &str, line: &str) -> String {
    let prefix = format!("{key} =");
    assert!(MINIMAL.lines().any(|existing| existing.starts_with(&prefix)), "no line {key}");
    MINIMAL
        .lines()
        .map(|existing| if existing.starts_with(&prefix) { line } else { existing })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

#[test]
fn the_example_parses() {
    insta::assert_snapshot!(check(EXAMPLE));
}

#[test]
fn optional_keys_take_their_defaults() {
    insta::assert_snapshot!(check(MINIMAL), @r#"
    hardware: ["mi355x"]
    checkpoint: m, tp: 1
    server.command: ["serve", "--port", "30000", "--mono"]
    server.monokernel-flag: ["--mono"]
    server.health-path: /health
    server.startup-timeout: 1200s
    server.routing-pattern: routed
    server.memory-api: probe
    tests: TestSelections { unit: [], kernel: [], serving: [] }
    speed: None
    timeouts: StepTimeouts { install: None, unit_tests: None, kernel_tests: None, serving_tests: None, kernel_timing: None, accuracy: None, speed_run: None, stall: None }
    "#);
}

/// The example sets every defaulted key to its default, so that it documents them.
#[test]
fn the_example_states_the_defaults() {
    let example = Recipe::parse(EXAMPLE, "example").map_err(|error| error.to_string());
    let example = example.as_ref().map(|recipe| {
        let speed = recipe
            .speed()
            .map(|speed| (speed.requests_per_concurrency, speed.warmup_per_concurrency));
        (recipe.server().health_path.as_str(), recipe.server().startup_timeout, speed)
    });
    assert_eq!(
        example,
        Ok((
            DEFAULT_HEALTH_PATH,
            DEFAULT_STARTUP_TIMEOUT,
            Some((DEFAULT_REQUESTS_PER_CONCURRENCY, DEFAULT_WARMUP_PER_CONCURRENCY))
        ))
    );
}

#[test]
fn the_monokernel_flag_is_added_on_the_monokernel_side_only() {
    let cases = [
        ("at the end", "serve --port {port} --tp {tp}", "--enable-amd-monokernel"),
        ("at {extra_args}", "serve --port {port} {extra_args} --last", "--enable-amd-monokernel"),
        ("two words", "serve --port={port}", "--mono-kernel 'on please'"),
    ];
    let mut rendered = Vec::new();
    for (name, command, flag) in cases {
        let text = with("command", &format!("command = {command:?}"))
            .replace("\"--mono\"", &format!("{flag:?}"));
        let recipe = Recipe::parse(&text, "m.toml").map_err(|error| error.to_string());
        let argv =
            |side| recipe.as_ref().map(|recipe| recipe.server_command(side, 31000, "/models/A B"));
        rendered.push(format!(
            "## {name}\nmonokernel: {:?}\nown path:   {:?}",
            argv(MONO),
            argv(OWN_PATH)
        ));
    }
    insta::assert_snapshot!(rendered.join("\n\n"));
}

#[test]
fn every_kind_of_error_names_the_file_the_key_and_the_value() {
    let speed = "[speed]\nconcurrencies = [1, 4]\ncovered = [1]\ninput-len = 8\noutput-len = 8\n";
    let builtin = "[[accuracy]]\nname = \"g\"\nevaluator = \"builtin\"\ndataset = \"d.jsonl\"\n";
    let external = "[[accuracy]]\nname = \"e\"\nevaluator = \"external\"\n\
                    command = \"eval --port {port} --out {results}\"\nmetrics = \"m.json\"\n";
    let cases: Vec<(&str, String)> = vec![
        ("not toml", "hardware = [\n".to_owned()),
        ("empty file", String::new()),
        ("unknown key", format!("{MINIMAL}health = \"/h\"\n")),
        (
            "external speed without a command",
            format!(
                "{MINIMAL}{speed}benchmark = \"external\"\nformat = \"bench-serving\"\nresult = \"r.jsonl\"\n"
            ),
        ),
        (
            "external speed without the concurrency",
            format!(
                "{MINIMAL}{speed}benchmark = \"external\"\ncommand = \"bench --port {{port}} --out {{results}}\"\nformat = \"inferencex\"\nresult = \"r.json\"\n"
            ),
        ),
        (
            "external speed with an unknown format",
            format!(
                "{MINIMAL}{speed}benchmark = \"external\"\ncommand = \"bench {{port}} {{results}} {{concurrency}}\"\nformat = \"vllm\"\nresult = \"r.json\"\n"
            ),
        ),
        (
            "a command on the built-in benchmark",
            format!("{MINIMAL}{speed}command = \"bench {{port}}\"\n"),
        ),
        (
            "a result path that climbs out",
            format!(
                "{MINIMAL}{speed}benchmark = \"external\"\ncommand = \"bench {{port}} {{results}} {{concurrency}}\"\nformat = \"bench-serving\"\nresult = \"../r.jsonl\"\n"
            ),
        ),
        (
            "shell syntax in the install",
            format!("{MINIMAL}[install]\ncommand = \"pip install . && rm x\"\n"),
        ),
        ("a stall limit past its bound", format!("{MINIMAL}[timeouts]\nstall = \"25h\"\n")),
        ("unknown top-level key", format!("model = \"m\"\n{MINIMAL}")),
        ("wrong type", with("tp", "tp = \"8\"")),
        ("missing server", MINIMAL.split("[server]").next().unwrap_or_default().to_owned()),
        ("missing routing pattern", with("routing-pattern", "")),
        ("empty hardware", with("hardware", "hardware = []")),
        ("uppercase hardware", with("hardware", "hardware = [\"MI355X\"]")),
        ("hardware twice", with("hardware", "hardware = [\"mi355x\", \"mi355x\"]")),
        ("bad checkpoint", with("checkpoint", "checkpoint = \"../m\"")),
        ("zero tp", with("tp", "tp = 0")),
        ("unknown placeholder", with("command", "command = \"serve --port {port} {model}\"")),
        ("no port", with("command", "command = \"serve --tp {tp}\"")),
        ("pipe in command", with("command", "command = \"serve --port {port} | tee log\"")),
        ("unclosed quote", with("command", "command = \"serve --port {port} 'x\"")),
        ("extra_args in a word", with("command", "command = \"serve --port={port}{extra_args}\"")),
        ("placeholder in flag", with("monokernel-flag", "monokernel-flag = \"--mono={tp}\"")),
        ("empty flag", with("monokernel-flag", "monokernel-flag = \"\"")),
        ("blank routing pattern", with("routing-pattern", "routing-pattern = \" \"")),
        (
            "routing pattern that is not a regex",
            with("routing-pattern", "routing-pattern = \"routed (\""),
        ),
        ("bad health path", format!("{MINIMAL}health-path = \"health\"\n")),
        ("unknown memory api", format!("{MINIMAL}memory-api = \"cuda-ipc\"\n")),
        ("unknown routing-logged", format!("{MINIMAL}routing-logged = \"always\"\n")),
        ("bad startup timeout", format!("{MINIMAL}startup-timeout = \"20 minutes\"\n")),
        ("zero startup timeout", format!("{MINIMAL}startup-timeout = \"0s\"\n")),
        ("units out of order", format!("{MINIMAL}startup-timeout = \"30m1h\"\n")),
        ("option as a test", format!("{MINIMAL}[tests]\nunit = [\"--co\"]\n")),
        ("absolute test path", format!("{MINIMAL}[tests]\nkernel = [\"/tmp/t.py\"]\n")),
        ("escaping test path", format!("{MINIMAL}[tests]\nserving = [\"../t.py::test_x\"]\n")),
        ("unknown suite", format!("{MINIMAL}[tests]\ne2e = [\"t.py\"]\n")),
        (
            "timing without output",
            format!("{MINIMAL}[[kernel-timing]]\nname = \"t\"\ncommand = \"python t.py\"\n"),
        ),
        (
            "timing name twice",
            format!(
                "{MINIMAL}[[kernel-timing]]\nname = \"t\"\ncommand = \"t {{output}}\"\n\
                 [[kernel-timing]]\nname = \"t\"\ncommand = \"u {{output}}\"\n"
            ),
        ),
        ("unknown evaluator", format!("{MINIMAL}{}", builtin.replace("builtin", "sgl-eval"))),
        ("builtin without dataset", format!("{MINIMAL}{}", builtin.replace("dataset", "# "))),
        ("builtin with command", format!("{MINIMAL}{builtin}command = \"x {{port}}\"\n")),
        ("builtin with zero limit", format!("{MINIMAL}{builtin}limit = 0\n")),
        ("zero repeats", format!("{MINIMAL}{builtin}repeats = 0\n")),
        ("too many repeats", format!("{MINIMAL}{external}repeats = 65\n")),
        ("repeats not a number", format!("{MINIMAL}{builtin}repeats = \"8\"\n")),
        ("absolute dataset", format!("{MINIMAL}{}", builtin.replace("d.jsonl", "/d.jsonl"))),
        ("external without metrics", format!("{MINIMAL}{}", external.replace("metrics", "# "))),
        ("external without command", format!("{MINIMAL}{}", external.replace("command", "# "))),
        ("external with dataset", format!("{MINIMAL}{external}dataset = \"d.jsonl\"\n")),
        (
            "external without results",
            format!("{MINIMAL}{}", external.replace(" --out {results}", "")),
        ),
        ("bad token name", format!("{MINIMAL}{builtin}token = \"hf token\"\n")),
        ("token without hub dataset", format!("{MINIMAL}{external}token = \"HF_TOKEN\"\n")),
        (
            "hub dataset not pinned",
            format!("{MINIMAL}{external}token = \"HF_TOKEN\"\nhub-dataset = \"org/set@main\"\n"),
        ),
        ("benchmark name twice", format!("{MINIMAL}{builtin}{builtin}")),
        ("no concurrencies", format!("{MINIMAL}{}", speed.replace("[1, 4]", "[]"))),
        ("descending concurrencies", format!("{MINIMAL}{}", speed.replace("[1, 4]", "[4, 1]"))),
        ("zero concurrency", format!("{MINIMAL}{}", speed.replace("[1, 4]", "[0, 4]"))),
        ("covered not swept", format!("{MINIMAL}{}", speed.replace("[1]\n", "[2]\n"))),
        ("missing covered", format!("{MINIMAL}{}", speed.replace("covered = [1]\n", ""))),
        (
            "zero input length",
            format!("{MINIMAL}{}", speed.replace("input-len = 8", "input-len = 0")),
        ),
        ("zero requests", format!("{MINIMAL}{speed}requests-per-concurrency = 0\n")),
        ("bad step timeout", format!("{MINIMAL}[timeouts]\naccuracy = \"2 hours\"\n")),
        ("unknown step", format!("{MINIMAL}[timeouts]\nlint = \"1m\"\n")),
    ];
    let rendered: Vec<String> =
        cases.iter().map(|(name, text)| format!("## {name}\n{}", check(text))).collect();
    insta::assert_snapshot!(rendered.join("\n\n"));
}

#[test]
fn durations() {
    let cases = [
        "90s",
        "20m",
        "1h30m",
        "2h",
        "1h1m1s",
        "",
        "m",
        "10",
        "1d",
        "5m5m",
        "0m",
        "1.5h",
        "168h",
        "168h0m1s",
        "18446744073709551615s",
        "5124095576030431h",
        "99999999999999999999999s",
    ];
    let rendered: Vec<String> = cases
        .iter()
        .map(|text| format!("{text:?} => {:?}", parse_duration(text).map_err(|e| e.to_string())))
        .collect();
    insta::assert_snapshot!(rendered.join("\n"));
}

/// A node profile: `hardware`, `gpus` of them, the checkpoints and secrets listed.
fn node(hardware: &str, gpus: u32, checkpoints: &[&str], secrets: &[&str]) -> NodeProfile {
    let ids: Vec<String> = (0..gpus).map(|id| id.to_string()).collect();
    let devices: Vec<String> =
        (0..gpus).map(|id| format!("\"/dev/dri/renderD{}\"", 128 + 8 * id)).collect();
    let checkpoints: Vec<String> =
        checkpoints.iter().map(|name| format!("\"{name}\" = \"org/{name}\"")).collect();
    let secrets: Vec<String> = secrets.iter().map(|name| format!("\"{name}\"")).collect();
    let text = format!(
        "name = \"n1\"\nhardware = \"{hardware}\"\ncheckpoint-store = \"/models\"\n\
         cache-dir = \"/cache\"\nwork-dir = \"/work\"\nsecrets = [{}]\n\
         [gpus]\nids = [{}]\nrender-devices = [{}]\n[image]\nname = \"sglang:rocm\"\n\
         [checkpoints]\n{}\n",
        secrets.join(", "),
        ids.join(", "),
        devices.join(", "),
        checkpoints.join("\n"),
    );
    NodeProfile::parse(&text, "node.toml")
        .unwrap_or_else(|error| panic!("the test's node profile is valid: {error}"))
}

#[test]
fn whether_the_example_runs_on_a_node() {
    let recipe = Recipe::parse(EXAMPLE, "example")
        .unwrap_or_else(|error| panic!("the example is valid: {error}"));
    let checkpoint = "deepseek-v4.1-flash";
    let cases = [
        ("everything there", node("mi355x", 8, &[checkpoint], &["HF_TOKEN"])),
        ("the other supported hardware", node("mi350x", 8, &[checkpoint], &["HF_TOKEN"])),
        ("unsupported hardware", node("mi300x", 8, &[checkpoint], &["HF_TOKEN"])),
        ("too few GPUs", node("mi355x", 4, &[checkpoint], &["HF_TOKEN"])),
        ("no checkpoint", node("mi355x", 8, &["kimi-k3"], &["HF_TOKEN"])),
        ("no token for the gated dataset", node("mi355x", 8, &[checkpoint], &[])),
        ("nothing there", node("mi300x", 1, &[], &[])),
    ];
    let checks = [
        (Check::UnitTests, None),
        (Check::KernelTests, None),
        (Check::KernelTiming, None),
        (Check::Routing, None),
        (Check::ServingTests, None),
        (Check::Speed, None),
        (Check::Accuracy, Some("gsm8k")),
        (Check::Accuracy, Some("gpqa-diamond")),
    ];
    let mut rendered = Vec::new();
    for (name, node) in cases {
        let outcome = match recipe.check_runs_on(&node) {
            Ok(()) => "runs".to_owned(),
            Err(not_runnable) => {
                let mut lines = vec![format!("not runnable: {not_runnable}")];
                for (check, part) in checks {
                    let blocked = not_runnable.blocker_for(check, part).map_or_else(
                        || "runs".to_owned(),
                        |blocker| {
                            format!("{:?} {:?}", blocker.reason(), blocker.subject().unwrap_or(""))
                        },
                    );
                    let part = part.map(|part| format!(" {part}")).unwrap_or_default();
                    lines.push(format!("  {check:?}{part}: {blocked}"));
                }
                lines.join("\n")
            }
        };
        rendered.push(format!("## {name}\n{outcome}"));
    }
    insta::assert_snapshot!(rendered.join("\n\n"));
}

#[test]
fn the_example_node_runs_the_example_recipe() {
    let node = NodeProfile::parse(node::EXAMPLE, "example node").map_err(|e| e.to_string());
    let recipe = Recipe::parse(EXAMPLE, "example recipe").map_err(|e| e.to_string());
    let runs = node.and_then(|node| {
        recipe.map(|recipe| recipe.check_runs_on(&node).map_err(|error| error.to_string()))
    });
    assert_eq!(runs, Ok(Ok(())));
}

#[test]
fn both_sides_run_by_the_base_recipe_but_the_pr_server_command() {
    let node = NodeProfile::parse(node::EXAMPLE, "example node").expect("the example is valid");
    let base = Recipe::parse(EXAMPLE, "base").expect("the example is valid");
    // The PR changes its server, a timing script, the gated benchmark's command and dataset,
    // drops a covered cell, cuts a limit, and adds an external benchmark and a cell.
    let pr_text = EXAMPLE
        .replace("--mem-fraction-static 0.85", "--mem-fraction-static 0.9")
        .replace("--enable-amd-monokernel\"", "--enable-amd-monokernel --slow-on-base\"")
        .replace("example-org/gpqa-gated@", "someone/private@")
        .replace("sgl-eval run gpqa", "sgl-eval run gpqa --leak")
        .replace("covered = [1, 4, 16]", "covered = [1, 4]")
        .replace("concurrencies = [1, 4, 16, 64, 128]", "concurrencies = [1, 4, 16, 64, 128, 256]")
        .replace("limit = 1319", "limit = 2")
        .replace("memory-api = \"probe\"", "memory-api = \"none\"")
        + "\n[[accuracy]]\nname = \"extra\"\nevaluator = \"external\"\ncommand = \"eval --url http://127.0.0.1:{port} --out {results}\"\nmetrics = \"m.json\"\n";
    let pr = Recipe::parse(&pr_text, "pr").expect("the PR's recipe is valid");
    let sides = contract::decide(Some(&base), &pr, &node, &Default::default());
    assert!(!sides.contract.own);
    assert_eq!(sides.pr.server().command_text(), pr.server().command_text());
    assert_eq!(sides.base.server().command_text(), base.server().command_text());
    for side in [&sides.base, &sides.pr] {
        assert_eq!(side.server().monokernel_flag(), base.server().monokernel_flag());
        assert_eq!(side.kernel_timing(), base.kernel_timing());
        assert_eq!(side.accuracy(), base.accuracy());
        assert_eq!(side.tests(), base.tests());
        let sweep = side.speed().expect("base has a sweep");
        assert_eq!(sweep.covered, [1, 4, 16], "base's covered cells stay");
        assert_eq!(sweep.concurrencies, [1, 4, 16, 64, 128, 256], "the added cell runs");
    }
    let found: Vec<String> = sides
        .contract
        .changes
        .iter()
        .map(|c| format!("{} [{}] {} -> {}", c.key, c.effect.as_str(), c.base, c.pr))
        .collect();
    insta::assert_snapshot!(found.join("\n"));
    let narrowing: Vec<&str> = sides.contract.narrowings().map(|c| c.key.as_str()).collect();
    assert_eq!(narrowing, ["accuracy.gsm8k.limit", "speed.covered"]);
    let own = contract::decide(None, &pr, &node, &Default::default());
    assert!(own.contract.own, "a model without a base recipe runs by its own");
    assert_eq!(own.base, pr);
}

#[test]
fn the_cap_of_repeats_is_bases_and_a_lower_one_narrows() {
    let node = NodeProfile::parse(node::EXAMPLE, "example node").expect("the example is valid");
    let base = Recipe::parse(EXAMPLE, "base").expect("the example is valid");
    let cap = |recipe: &Recipe| {
        let gate = prgate_gate::GateConfig::defaults();
        recipe.accuracy().iter().map(|b| b.repeat_cap(&gate)).collect::<Vec<_>>()
    };
    // The example caps gsm8k at 20 and leaves gpqa-diamond at the gate's default (20).
    assert_eq!(cap(&base), [20, 20]);
    let cases = [
        ("repeats = 20", "repeats = 4", Some("accuracy.gsm8k.repeats [narrowing] 20 -> 4")),
        (
            "repeats = 20",
            "repeats = 40",
            Some("accuracy.gsm8k.repeats [changed, base's used] 20 -> 40"),
        ),
        // Written out as the default it is: no change.
        ("repeats = 20", "# repeats", None),
    ];
    for (from, to, expect) in cases {
        let pr = Recipe::parse(&EXAMPLE.replace(from, to), "pr").expect("valid");
        let sides = contract::decide(Some(&base), &pr, &node, &Default::default());
        let found: Vec<String> = sides
            .contract
            .changes
            .iter()
            .filter(|c| c.key.ends_with("repeats"))
            .map(|c| format!("{} [{}] {} -> {}", c.key, c.effect.as_str(), c.base, c.pr))
            .collect();
        assert_eq!(found, expect.into_iter().map(str::to_owned).collect::<Vec<_>>(), "{to}");
        // Both sides run by base's cap, whatever the PR's says.
        assert_eq!(cap(&sides.base), [20, 20], "{to}");
        assert_eq!(cap(&sides.pr), [20, 20], "{to}");
    }
}

#[test]
fn a_pr_cannot_measure_its_side_with_its_own_speed_benchmark_or_routing_pattern() {
    let node = NodeProfile::parse(node::EXAMPLE, "example node").expect("the example is valid");
    let base = Recipe::parse(EXAMPLE, "base").expect("the example is valid");
    let pr_text = EXAMPLE
        .replace(
            "warmup-per-concurrency = 1\n",
            "warmup-per-concurrency = 1\nbenchmark = \"external\"\ncommand = \"bench --port {port} --out {results} --c {concurrency}\"\nformat = \"bench-serving\"\nresult = \"r.jsonl\"\n",
        )
        .replace(r"routing-pattern = 'sgl_amd_mono: routed \S+ to monokernel'", "routing-pattern = '.'")
        .replace("requests-per-concurrency = 10", "requests-per-concurrency = 1");
    let pr = Recipe::parse(&pr_text, "pr").expect("the PR's recipe is valid");
    let sides = contract::decide(Some(&base), &pr, &node, &Default::default());
    for side in [&sides.base, &sides.pr] {
        assert_eq!(side.speed().map(|s| &s.benchmark), Some(&SpeedBenchmark::Builtin));
        assert_eq!(side.server().routing_pattern, base.server().routing_pattern);
        assert_eq!(side.speed().map(|s| s.requests_per_concurrency), Some(10));
    }
    let effects: Vec<(&str, prgate_gate::job::Effect)> =
        sides.contract.changes.iter().map(|c| (c.key.as_str(), c.effect)).collect();
    use prgate_gate::job::Effect;
    assert_eq!(
        effects,
        [
            ("server.routing-pattern", Effect::Changed),
            ("speed.requests-per-concurrency", Effect::Narrowing),
            ("speed.benchmark", Effect::Changed),
        ]
    );
}

/// The steps a recipe gives a model are its tier's checks, each once at least; a new model's
/// tree steps run on the PR's side alone; a suite the recipe selects nothing for expects
/// nothing; a node without the hardware blocks every step that needs the servers.
#[test]
fn a_recipes_steps_are_its_tiers_checks() {
    use prgate_gate::evidence::Side;
    use prgate_gate::job::{Expect, tier_checks};
    use prgate_scope::plan::Tier;
    use std::collections::BTreeSet;

    let recipe = Recipe::parse(EXAMPLE, "example").expect("the example parses");
    for tier in [Tier::Full, Tier::Smoke, Tier::None] {
        for new in [false, true] {
            let planned = recipe.steps(tier, new, None);
            let checks: BTreeSet<String> =
                planned.steps.iter().map(|step| format!("{:?}", step.check)).collect();
            let expected: BTreeSet<String> =
                tier_checks(tier).iter().map(|check| format!("{check:?}")).collect();
            assert_eq!(checks, expected, "{tier:?}, new {new}");
            assert!(planned.steps.iter().all(|step| step.expect == Expect::Run), "{tier:?}");
            let unit_sides: Vec<Side> = planned
                .steps
                .iter()
                .filter(|step| step.check == Check::UnitTests)
                .map(|step| step.side)
                .collect();
            let tree_sides: &[Side] = match (tier, new) {
                (Tier::None, _) => &[],
                (_, true) => &[Side::Pr],
                (_, false) => &[Side::Base, Side::Pr],
            };
            assert_eq!(unit_sides, tree_sides, "{tier:?}, new {new}");
        }
    }
    let full = recipe.steps(Tier::Full, false, None);
    let smoke = recipe.steps(Tier::Smoke, false, None);
    let cells =
        |steps: &RecipeSteps| steps.steps.iter().filter(|s| s.check == Check::Speed).count();
    assert!(cells(&smoke) < cells(&full), "smoke runs the sweep's smoke cells");

    let no_unit = EXAMPLE.replace(r#"unit = ["test/unit/deepseek_v41"]"#, "unit = []");
    let recipe = Recipe::parse(&no_unit, "no unit tests").expect("parses");
    let planned = recipe.steps(Tier::Full, false, None);
    let unit: Vec<&Expect> = planned
        .steps
        .iter()
        .filter(|step| step.check == Check::UnitTests)
        .map(|step| &step.expect)
        .collect();
    assert!(matches!(unit[..], [Expect::Nothing { .. }]), "{unit:?}");

    let node = NodeProfile::parse(node::EXAMPLE, "example node").expect("the node parses");
    let elsewhere =
        EXAMPLE.replace(r#"hardware = ["mi355x", "mi350x"]"#, r#"hardware = ["mi300x"]"#);
    let recipe = Recipe::parse(&elsewhere, "other hardware").expect("parses");
    assert_ne!(elsewhere, EXAMPLE, "the example names its hardware as this test expects");
    let planned = recipe.steps(Tier::Full, false, Some(&node));
    for step in &planned.steps {
        let served = matches!(
            step.check,
            Check::ServingTests | Check::Routing | Check::Accuracy | Check::Speed
        );
        if served {
            assert!(matches!(step.expect, Expect::Blocked { .. }), "{step:?}");
        }
    }
    assert_eq!(planned.covered_cells, 0);
}
