//! `prgate plan --estimate`: recipes read from head's tree, nodes from `--nodes` or profiles,
//! past durations from event streams, and the errors.

use std::path::Path;

use prgate_runner::node::EXAMPLE as NODE;
use prgate_runner::recipe::EXAMPLE as RECIPE;

use crate::support::{Repo, plan_json, prgate, text};

const COMMON: &str = "[tests]\nunit = [\"pkg/common\"]\n";

/// The standard repository with real recipes on main: alpha (MI355X or MI350X, three
/// concurrencies), beta (MI350X only), beta_x's stays invalid; a common recipe. The `pr` branch
/// edits alpha's recipe (a comment: base's recipe is what is measured) and a shared path: alpha
/// full, beta and beta_x smoke.
fn repo_with_recipes() -> Repo {
    let repo = Repo::standard();
    repo.write("test/e2e/alpha.toml", &ALPHA)
        .write("test/e2e/beta.toml", &RECIPE.replace("[\"mi355x\", \"mi350x\"]", "[\"mi350x\"]"))
        .write("test/e2e/common.toml", COMMON);
    repo.commit("recipes");
    repo.branch("pr", "main");
    repo.write("test/e2e/alpha.toml", &format!("# alpha, edited by the PR\n{}", *ALPHA))
        .write("pkg/common/guard.py", "# shared\n");
    repo.commit("pr");
    repo
}

/// alpha's recipe on main: the example's, with three concurrencies, not five.
static ALPHA: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    RECIPE.replace("concurrencies = [1, 4, 16, 64, 128]", "concurrencies = [1, 4, 16]")
});

/// alpha's job in a plan's estimate.
fn alpha_of(plan: &serde_json::Value) -> serde_json::Value {
    let jobs = plan["estimate"]["jobs"].as_array().expect("jobs");
    jobs.iter().find(|job| job["model"] == "alpha").expect("alpha's job").clone()
}

/// Every job as `model tier seconds source node-or-why`, one a line.
fn jobs(plan: &serde_json::Value) -> String {
    plan["estimate"]["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|job| {
            let place = match job["node"].as_str() {
                Some(node) => node.to_owned(),
                None => format!("unschedulable: {}", text(&job["unschedulable"])),
            };
            format!(
                "{} {} {} {} {place}",
                job["model"].as_str().unwrap_or("(common)"),
                job["tier"].as_str().unwrap_or("-"),
                job["seconds"],
                text(&job["source"]),
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn identical_nodes_take_the_models_their_recipes_in_head_allow() {
    let repo = repo_with_recipes();
    let args = ["--base", "main", "--head", "pr", "--estimate", "--nodes", "2"];
    let plan = plan_json(repo.path(), &args);
    // alpha full from head's recipe: 5h20m16s of tests, timing, accuracy (three repeats of
    // 20 minutes a benchmark a side) and the four loads (two for the accuracy rounds)
    // before the speed phase, and three speed cells of 11 blocks of 2 runs of 255.28s and a
    // third of the phase's 10 reloads each (`--nodes` gives no GPU count: one server at a
    // time; the recipe names no memory API, so the estimate counts the blocked design, the
    // upper bound). beta is
    // smoke on MI350X only; beta_x's recipe is not valid.
    assert_eq!(
        jobs(&plan),
        "(common) - 600 recipe node-2
alpha full 42105 recipe node-1
beta smoke 25897 recipe unschedulable: no node has hardware the recipe supports (mi350x); the nodes are 2 mi355x
beta_x smoke 0 no-recipe node-2"
    );
    let estimate = &plan["estimate"];
    assert_eq!(estimate["makespan_seconds"], 42105);
    assert_eq!(estimate["lower_bound_seconds"], 42105);
    assert_eq!(estimate["lower_bound_basis"], "the longest job (alpha)");
    assert_eq!(estimate["optimal"], true);
    assert_eq!(estimate["nodes"][1]["jobs"], serde_json::json!([null, "beta_x"]));
    assert!(
        text(&plan["estimate"]["jobs"][3]["note"]).starts_with("the recipe is not valid"),
        "{}",
        plan["estimate"]["jobs"][3]
    );

    let human = prgate(
        repo.path(),
        &["plan", "--base", "main", "--head", "pr", "--estimate", "--nodes", "2"],
    );
    assert_eq!(human.code, 0, "{}", human.stderr);
    let estimate_part = &human.stdout[human.stdout.find("estimate on").expect("an estimate")..];
    insta::assert_snapshot!("plan_estimate_human", estimate_part);

    let markdown = prgate(
        repo.path(),
        &[
            "plan",
            "--base",
            "main",
            "--head",
            "pr",
            "--estimate",
            "--nodes",
            "2",
            "--format",
            "markdown",
        ],
    );
    assert_eq!(markdown.code, 0, "{}", markdown.stderr);
    assert!(
        markdown.stdout.contains("| `alpha` | full | 11h42m | recipe | `node-1` |"),
        "{}",
        markdown.stdout
    );
    assert!(
        markdown.stdout.contains("| `node-2` | `mi355x` | 10m | common checks, `beta_x` |"),
        "{}",
        markdown.stdout
    );

    // More nodes of the hardware beta needs: it is placed.
    let plan = plan_json(
        repo.path(),
        &["--base", "main", "--head", "pr", "--estimate", "--nodes", "3", "--hardware", "MI350X"],
    );
    assert_eq!(plan["estimate"]["nodes"][0]["hardware"], "mi350x");
    assert_eq!(plan["estimate"]["jobs"][2]["node"], "node-2");
}

/// A `step-finished` line of the event stream for `model`.
fn finished(
    model: &str,
    check: &str,
    side: &str,
    part: Option<&str>,
    from_s: u64,
    to_s: u64,
) -> String {
    let part = part.map_or_else(|| "null".to_owned(), |part| format!("\"{part}\""));
    format!(
        "{{\"schema_version\":1,\"event\":\"step-finished\",\"model\":\"{model}\",\"check\":\"{check}\",\"side\":\"{side}\",\"part\":{part},\"time_ms\":{},\"started_ms\":{},\"outcome\":\"tests\"}}\n",
        to_s * 1000,
        from_s * 1000
    )
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write a file");
    path.display().to_string()
}

#[test]
fn node_profiles_and_history_shape_the_schedule() {
    let repo = repo_with_recipes();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mi355x = write(dir.path(), "mi355x.toml", NODE);
    let mi350x = write(
        dir.path(),
        "mi350x.toml",
        &NODE
            .replace("name = \"mi355x-1\"", "name = \"mi350x-1\"")
            .replace("hardware = \"mi355x\"", "hardware = \"mi350x\""),
    );
    // alpha's tests took a minute a side, and its first cell 10 minutes, in a past run.
    let mut events = String::new();
    let mut at = 1_000;
    for check in ["unit-tests", "kernel-tests", "serving-tests"] {
        for side in ["base", "pr"] {
            events.push_str(&finished("alpha", check, side, None, at, at + 60));
            at += 60;
        }
    }
    events.push_str(&finished(
        "alpha",
        "speed",
        "both",
        Some("concurrency-1-pair-1"),
        at,
        at + 600,
    ));
    let history = write(dir.path(), "events.jsonl", &events);
    let args = [
        "--base",
        "main",
        "--head",
        "pr",
        "--estimate",
        "--node",
        &mi355x,
        "--node",
        &mi350x,
        "--history",
        &history,
    ];
    let plan = plan_json(repo.path(), &args);
    // alpha: 42105s (one server at a time: 2 + 2n loads, 2n + 1 blocks of 2 runs a cell), less 6 tests of
    // 5m at 1m each and the startups before the speed phase (an old stream without load events:
    // in its serving tests), and its first cell at 10m instead of its recipe's time; the
    // common checks and beta_x go beside beta, whose 25897s leave the shorter node's room.
    assert_eq!(
        jobs(&plan),
        "(common) - 600 recipe mi350x-1
alpha full 31219 history+recipe mi355x-1
beta smoke 25897 recipe mi350x-1
beta_x smoke 0 no-recipe mi350x-1"
    );
    assert_eq!(plan["estimate"]["history_files"], 1);
    let human = prgate(repo.path(), &[&["plan"][..], &args].concat());
    assert!(human.stdout.contains("history+recipe (8 parts)"), "{}", human.stdout);
}

#[test]
fn estimate_errors_name_what_is_wrong() {
    let repo = repo_with_recipes();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let bad = write(dir.path(), "events.jsonl", "{\"not\": \"an event\"}\n");
    let base = ["plan", "--base", "main", "--head", "pr"];
    let cases: [(&[&str], &str); 5] = [
        (&["--estimate"], "--nodes <N>|--node <FILE>"),
        (&["--nodes", "2"], "--estimate"),
        (&["--estimate", "--nodes", "0"], "0 is not in 1..=1000"),
        (&["--estimate", "--nodes", "2", "--node", "x.toml"], "cannot be used with"),
        (
            &["--estimate", "--nodes", "2", "--history", &bad],
            "events.jsonl:1: not an event of prgate run's event stream: unknown field `not`",
        ),
    ];
    for (args, expect) in cases {
        let run = prgate(repo.path(), &[&base[..], args].concat());
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(expect), "{args:?}: {}", run.stderr);
    }
    let missing =
        prgate(repo.path(), &[&base[..], &["--estimate", "--node", "nowhere.toml"]].concat());
    assert_eq!(missing.code, 2);
    assert!(missing.stderr.contains("reading the node profile nowhere.toml"), "{}", missing.stderr);
}

/// A 2P1D topology of tp 8 (one node per instance).
const TOPOLOGY: &str = "[topology.prefill]\ninstances = 2\ntp = 8\ncommand = \"s --port {port} --b {bootstrap_port}\"\n[topology.decode]\ninstances = 1\ntp = 8\ncommand = \"s --port {port}\"\n[topology.router]\ncommand = \"r --port {port}\"\n\n[timeouts]";

#[test]
fn a_topology_job_holds_its_nodes_and_every_instances_gpus() {
    // Base's recipe decides how a model is served: `pd` serves alpha disaggregated, and the
    // PR edits its recipe.
    let repo = Repo::standard();
    repo.write("test/e2e/alpha.toml", RECIPE);
    repo.commit("recipes");
    repo.branch("pd", "main");
    repo.write("test/e2e/alpha.toml", &RECIPE.replace("[timeouts]", TOPOLOGY));
    repo.commit("pd: alpha served disaggregated");
    repo.branch("pr", "pd");
    repo.write("test/e2e/alpha.toml", &format!("# pr\n{}", RECIPE.replace("[timeouts]", TOPOLOGY)));
    repo.commit("pr: alpha's recipe edited");
    let args = ["--base", "pd", "--head", "pr", "--estimate", "--nodes", "2"];
    let plan = plan_json(repo.path(), &args);
    let alpha = alpha_of(&plan);
    let seconds = alpha["seconds"].as_u64().expect("seconds");
    assert_eq!(alpha["holds"]["nodes"], 3, "{alpha}");
    assert_eq!(alpha["holds"]["gpus"], 24, "{alpha}");
    assert_eq!(alpha["holds"]["gpu_seconds"], seconds * 24, "{alpha}");
    // A model on one node holds its tp (`--nodes` gives no GPU count: one server at a time).
    repo.branch("plain", "main");
    repo.write("test/e2e/alpha.toml", &RECIPE.replace("[1, 4, 16, 64, 128]", "[1, 4, 16]"));
    repo.commit("plain: alpha on one node");
    let plain = plan_json(
        repo.path(),
        &["--base", "main", "--head", "plain", "--estimate", "--nodes", "2"],
    );
    let holds = alpha_of(&plain)["holds"].clone();
    assert_eq!((holds["nodes"].as_u64(), holds["gpus"].as_u64()), (Some(1), Some(8)), "{holds}");
    let human = prgate(
        repo.path(),
        &["plan", "--base", "pd", "--head", "pr", "--estimate", "--nodes", "2"],
    );
    assert_eq!(human.code, 0, "{}", human.stderr);
    assert!(human.stdout.contains(" on 3 nodes, 24 GPUs ("), "{}", human.stdout);
}

/// With `--worktree`, a recipe that is a symbolic link (here to a valid recipe outside the
/// repository) is no recipe: the link is never followed.
#[test]
fn a_linked_recipe_in_the_working_tree_is_not_read() {
    let repo = repo_with_recipes();
    let outside = tempfile::tempdir().expect("a temporary directory");
    let target = write(outside.path(), "alpha.toml", RECIPE);
    let recipe = repo.path().join("test/e2e/alpha.toml");
    std::fs::remove_file(&recipe).expect("alpha's recipe");
    std::os::unix::fs::symlink(&target, &recipe).expect("a link");
    let args = ["--base", "main", "--worktree", "--estimate", "--nodes", "2"];
    let plan = plan_json(repo.path(), &args);
    let alpha = alpha_of(&plan);
    assert_eq!(alpha["seconds"], 0, "{alpha}");
    assert!(text(&alpha["note"]).contains("test/e2e/alpha.toml"), "{alpha}");
}

/// A PR's recipe does not shorten its own estimate: what is measured is base's (the cells a PR
/// drops run anyway), widened by the cells it adds.
#[test]
fn a_recipe_is_estimated_by_what_base_measures() {
    let repo = repo_with_recipes();
    let alpha = |head: &str| {
        let args = ["--base", "main", "--head", head, "--estimate", "--nodes", "2"];
        alpha_of(&plan_json(repo.path(), &args))["seconds"].as_u64().expect("seconds")
    };
    let edited = alpha("pr");
    repo.branch("narrow", "main");
    repo.write("test/e2e/alpha.toml", &ALPHA.replace("[1, 4, 16]", "[1]"));
    repo.commit("narrow: one cell");
    repo.branch("wide", "main");
    repo.write("test/e2e/alpha.toml", &ALPHA.replace("[1, 4, 16]", "[1, 4, 16, 64]"));
    repo.commit("wide: a fourth cell");
    assert_eq!(alpha("narrow"), edited);
    assert!(alpha("wide") > edited, "{} > {edited}", alpha("wide"));
}

#[test]
fn the_common_checks_are_estimated_by_bases_common_recipe() {
    let repo = repo_with_recipes();
    let common = |head: &str| {
        let args = ["--base", "main", "--head", head, "--estimate", "--nodes", "2"];
        let plan = plan_json(repo.path(), &args);
        let jobs = plan["estimate"]["jobs"].as_array().expect("jobs").clone();
        let job = jobs.into_iter().find(|job| job["model"].is_null()).expect("the common job");
        job["seconds"].as_u64().expect("seconds")
    };
    let base = common("pr");
    // The PR's own install command is not what runs: base's recipe has none.
    repo.branch("installs", "main");
    repo.write(
        "test/e2e/common.toml",
        &format!("[install]\ncommand = \"pip install .\"\n{COMMON}"),
    )
    .write("pkg/common/guard.py", "# shared, again\n");
    repo.commit("installs: its own install command");
    assert_eq!(common("installs"), base);
}

#[test]
fn a_renamed_model_is_estimated_by_its_old_names_base_recipe() {
    let repo = repo_with_recipes();
    let seconds = |plan: &serde_json::Value, model: &str| {
        let jobs = plan["estimate"]["jobs"].as_array().expect("jobs");
        let job = jobs.iter().find(|job| job["model"] == model).expect("the model's job");
        job["seconds"].as_u64().expect("seconds")
    };
    let args =
        |head: &'static str| ["--base", "main", "--head", head, "--estimate", "--nodes", "2"];
    let alpha = seconds(&plan_json(repo.path(), &args("pr")), "alpha");
    // The PR renames alpha to gamma and drops two of base's cells in the moved recipe.
    repo.branch("renamed", "main");
    for (from, to) in [
        ("pkg/models/alpha", "pkg/models/gamma"),
        ("test/unit/alpha", "test/unit/gamma"),
        ("test/kernels/test_alpha_k1.py", "test/kernels/test_gamma_k1.py"),
        ("test/e2e/alpha.toml", "test/e2e/gamma.toml"),
    ] {
        repo.git(&["mv", from, to]);
    }
    repo.write("test/e2e/gamma.toml", &ALPHA.replace("[1, 4, 16]", "[1]"));
    repo.commit("renamed: alpha is gamma, with one cell");
    let plan = plan_json(repo.path(), &args("renamed"));
    let gamma = plan["models"].as_array().expect("models").iter().find(|m| m["name"] == "gamma");
    assert_eq!(gamma.map(|m| m["renamed_from"].clone()), Some("alpha".into()), "{plan:#}");
    assert_eq!(seconds(&plan, "gamma"), alpha, "base's recipe, at alpha's name, is costed");
}

#[test]
fn a_model_whose_base_recipe_is_not_valid_is_estimated_at_nothing_as_the_run_blocks_it() {
    let repo = repo_with_recipes();
    // Main breaks alpha's recipe; a PR then fixes it in its own tree and changes alpha's code.
    repo.branch("broken", "main").write("test/e2e/alpha.toml", "[server\n");
    repo.commit("broken: alpha's recipe does not parse");
    repo.branch("fixes", "broken").write("test/e2e/alpha.toml", &ALPHA);
    repo.write("pkg/models/alpha/layer.py", "# fixed\n");
    repo.commit("fixes: alpha's recipe, and its code");
    let args = ["--base", "broken", "--head", "fixes", "--estimate", "--nodes", "2"];
    let alpha = alpha_of(&plan_json(repo.path(), &args));
    // The run blocks every check (base-recipe-invalid): nothing is loaded or measured.
    assert_eq!(alpha["seconds"], 0, "{alpha:#}");
    assert!(text(&alpha["note"]).starts_with("base's recipe is not valid"), "{alpha:#}");
}
