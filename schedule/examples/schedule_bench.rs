//! How close the scheduler's makespans come to their lower bound: on model sets shaped like the
//! CI prgate replaces (a dozen models on two MI355X nodes, docs/schedule.md), and on a
//! deterministic sweep of random sets with at least three times more jobs than nodes.
//!
//! ```sh
//! cargo run --release -p prgate-schedule --example schedule_bench
//! ```
//!
//! Prints Markdown tables (bench/schedule.md holds their last output). The numbers are ratios
//! of makespans to bounds, not times: the same on every machine.

use std::collections::BTreeSet;
use std::time::Duration;

use prgate_recipe::recipe::Recipe;
use prgate_recipe::recipe::common::CommonRecipe;
use prgate_schedule::schedule::{self, History, Job, Method, Needs, Node, estimate_model};
use prgate_scope::plan::{ModelPlan, Tier};

/// A model of the seed's shape: its recipe's speed sweep, accuracy benchmarks and where it
/// can run.
struct Model {
    name: &'static str,
    hardware: &'static str,
    checkpoint_on_nodes: bool,
    concurrencies: &'static str,
    covered: &'static str,
    accuracy: &'static [&'static str],
    output_len: u32,
    timing_scripts: usize,
}

/// What most of the seed's models have; a row of [`MODELS`] names the fields where it differs.
const SEED_MODEL: Model = Model {
    name: "",
    hardware: "mi355x",
    checkpoint_on_nodes: true,
    concurrencies: "1",
    covered: "1",
    accuracy: &["gsm8k", "gpqa-diamond"],
    output_len: 1024,
    timing_scripts: 1,
};

const MODELS: [Model; 12] = [
    Model {
        name: "deepseek_v41",
        concurrencies: "1, 4, 16, 64, 128",
        covered: "1, 4, 16",
        accuracy: &["gsm8k", "gpqa-diamond", "aime26"],
        ..SEED_MODEL
    },
    Model {
        name: "kimi_k3",
        concurrencies: "1, 4, 16, 64",
        covered: "1, 4, 16",
        accuracy: &["gsm8k", "gpqa-diamond", "aime26"],
        output_len: 2048,
        timing_scripts: 2,
        ..SEED_MODEL
    },
    Model {
        name: "kimi_k31",
        checkpoint_on_nodes: false,
        concurrencies: "1, 4, 8, 16, 64",
        covered: "1, 4, 8",
        accuracy: &["gsm8k", "gpqa-diamond", "aime26"],
        output_len: 2048,
        timing_scripts: 2,
        ..SEED_MODEL
    },
    Model {
        name: "glm53_flash",
        concurrencies: "1, 8, 32, 128",
        covered: "1, 8",
        accuracy: &["gsm8k", "gpqa-diamond", "aime26"],
        ..SEED_MODEL
    },
    Model {
        name: "glm53_flash_mxfp4",
        checkpoint_on_nodes: false,
        concurrencies: "1, 8, 32, 128",
        covered: "1, 8",
        ..SEED_MODEL
    },
    Model {
        name: "qwen38_flash_next",
        concurrencies: "1, 4, 16, 64",
        covered: "1, 4",
        ..SEED_MODEL
    },
    Model {
        name: "qwen38_flash_next_mxfp4",
        checkpoint_on_nodes: false,
        concurrencies: "1, 4, 16, 64",
        covered: "1, 4",
        ..SEED_MODEL
    },
    Model {
        name: "qwen38_vl",
        concurrencies: "1, 8, 32",
        covered: "1, 8",
        accuracy: &["gsm8k", "mmmu-pro"],
        output_len: 512,
        ..SEED_MODEL
    },
    Model {
        name: "step4_flash",
        concurrencies: "1, 16, 64",
        covered: "1, 16",
        timing_scripts: 0,
        ..SEED_MODEL
    },
    Model {
        name: "minimax_m31_flash",
        hardware: "mi350x",
        concurrencies: "1, 4, 16",
        covered: "1, 4",
        ..SEED_MODEL
    },
    Model {
        name: "muse_spark",
        concurrencies: "1",
        covered: "1",
        accuracy: &[],
        timing_scripts: 0,
        ..SEED_MODEL
    },
    Model {
        name: "qwen38_24t",
        concurrencies: "1",
        covered: "1",
        accuracy: &[],
        timing_scripts: 0,
        ..SEED_MODEL
    },
];

impl Model {
    /// The model's entry in a plan that runs it on `tier` (not new, not removed, no reasons).
    fn plan(&self, tier: Tier) -> ModelPlan {
        ModelPlan {
            name: self.name.to_owned(),
            tier,
            new: false,
            removed: false,
            renamed_from: None,
            renamed_to: None,
            readme: None,
            reasons: Vec::new(),
        }
    }

    fn recipe(&self) -> Option<Recipe> {
        // The seed's two models without a serving recipe.
        if matches!(self.name, "muse_spark" | "qwen38_24t") {
            return None;
        }
        let mut text = format!(
            "hardware = [\"{}\"]\ncheckpoint = \"{}\"\ntp = 8\n\n[server]\ncommand = \"python -m sglang.launch_server --port {{port}}\"\nmonokernel-flag = \"--enable-amd-monokernel\"\nrouting-pattern = 'routed'\n\n[tests]\nunit = [\"test/unit/{name}\"]\nkernel = [\"test/kernels/test_{name}_k1.py\"]\nserving = [\"test/e2e/test_serving.py::test_{name}\"]\n\n",
            self.hardware,
            self.name,
            name = self.name
        );
        for index in 0..self.timing_scripts {
            text.push_str(&format!(
                "[[kernel-timing]]\nname = \"bench-{index}\"\ncommand = \"python bench.py --json {{output}}\"\n\n"
            ));
        }
        for benchmark in self.accuracy {
            text.push_str(&format!(
                "[[accuracy]]\nname = \"{benchmark}\"\nevaluator = \"builtin\"\ndataset = \"data/{benchmark}.jsonl\"\n\n"
            ));
        }
        text.push_str(&format!(
            "[speed]\nconcurrencies = [{}]\ncovered = [{}]\ninput-len = 1024\noutput-len = {}\n",
            self.concurrencies, self.covered, self.output_len
        ));
        Some(Recipe::parse(&text, self.name).expect("the bench's recipes are valid"))
    }
}

/// The two MI355X nodes of the seed, with the checkpoints they have.
fn seed_nodes() -> Vec<Node> {
    let checkpoints: BTreeSet<String> = MODELS
        .iter()
        .filter(|model| model.checkpoint_on_nodes)
        .map(|model| model.name.to_owned())
        .collect();
    (1..=2)
        .map(|index| Node {
            name: format!("mi355x-{index}"),
            hardware: "mi355x".to_owned(),
            gpus: Some(8),
            checkpoints: Some(checkpoints.clone()),
        })
        .collect()
}

/// The jobs of a plan where `full` models run the full tier and, when `shared`, every other
/// model the smoke tier (and the common checks run).
fn seed_jobs(full: &[&str], shared: bool) -> Vec<Job> {
    let history = History::default();
    let mut jobs = Vec::new();
    for model in &MODELS {
        let tier = if full.contains(&model.name) {
            Tier::Full
        } else if shared {
            Tier::Smoke
        } else {
            continue;
        };
        let recipe = model.recipe();
        let estimate = estimate_model(&model.plan(tier), recipe.as_ref(), &history);
        jobs.push(Job::for_model(model.name, &estimate, recipe.as_ref()));
    }
    if shared {
        let common = CommonRecipe::parse(
            "[tests]\nunit = [\"test/unit/common\"]\nkernel = [\"test/kernels/test_guard.py\"]\n",
            "common.toml",
        )
        .expect("the bench's common recipe is valid");
        jobs.push(Job::for_common_checks(&schedule::estimate_common(Some(&common), &history)));
    }
    jobs
}

/// max(longest job, total / nodes): the bound the issue names, over the jobs some node runs.
fn simple_bound(jobs: &[Job], result: &schedule::Schedule, nodes: usize) -> f64 {
    let placed: Vec<f64> = result
        .nodes()
        .iter()
        .flat_map(|load| load.jobs.iter().map(|&job| jobs[job].duration.as_secs_f64()))
        .collect();
    let total: f64 = placed.iter().sum();
    placed.iter().copied().fold(total / nodes as f64, f64::max)
}

/// What one method did over many sets.
#[derive(Default)]
struct Tally {
    sets: usize,
    worst: f64,
    worst_simple: f64,
    worst_unproven: Option<f64>,
    sum: f64,
    optimal: usize,
}

impl Tally {
    fn add(&mut self, jobs: &[Job], result: &schedule::Schedule, nodes: usize) {
        let makespan = result.makespan().as_secs_f64();
        let ratio = result.ratio().unwrap_or(1.0);
        let simple = simple_bound(jobs, result, nodes);
        let simple_ratio = if simple > 0.0 { makespan / simple } else { 1.0 };
        self.sets += 1;
        self.worst = self.worst.max(ratio);
        self.worst_simple = self.worst_simple.max(simple_ratio);
        self.sum += ratio;
        if result.optimal() {
            self.optimal += 1;
        } else {
            self.worst_unproven = Some(self.worst_unproven.unwrap_or(1.0).max(ratio));
        }
    }

    fn row(&self, label: &str) -> String {
        format!(
            "| {label} | {} | {:.4} | {} | {:.4} | {:.4} | {:.1}% |",
            self.sets,
            self.worst,
            self.worst_unproven.map_or_else(|| "-".to_owned(), |worst| format!("{worst:.4}")),
            self.worst_simple,
            self.sum / self.sets.max(1) as f64,
            100.0 * self.optimal as f64 / self.sets.max(1) as f64
        )
    }
}

const METHODS: [(Method, &str); 3] = [
    (Method::Lpt, "LPT"),
    (Method::LocalSearch, "LPT + local search"),
    (Method::Exact, "LPT + local search + exact"),
];

fn hours(duration: Duration) -> String {
    let minutes = duration.as_secs().div_ceil(60);
    format!("{}h{:02}", minutes / 60, minutes % 60)
}

/// Each model's estimate on each tier, from its recipe and the constants.
fn seed_models() {
    println!("## The models\n");
    println!("| model | full | smoke | runs on the two MI355X nodes |");
    println!("| --- | --- | --- | --- |");
    for model in &MODELS {
        let recipe = model.recipe();
        let estimate = |tier| {
            hours(
                estimate_model(&model.plan(tier), recipe.as_ref(), &History::default()).duration(),
            )
        };
        let runs = match (recipe.is_some(), model.hardware, model.checkpoint_on_nodes) {
            (false, _, _) => "yes (no recipe: every check not-run at once)",
            (true, "mi355x", true) => "yes",
            (true, "mi355x", false) => "no: no checkpoint",
            _ => "no: MI350X only",
        };
        println!(
            "| {} | {} | {} | {runs} |",
            model.name,
            estimate(Tier::Full),
            estimate(Tier::Smoke)
        );
    }
    println!();
}

fn seed_sets() {
    println!("## Model sets shaped like the seed (two MI355X nodes)\n");
    println!(
        "| set | jobs placed | unschedulable | LPT | + local search | + exact | bound | ratio | optimal |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let sets: [(&str, &[&str], bool); 5] = [
        ("shared change: every model smoke, common", &[], true),
        ("shared change and kimi_k3 full", &["kimi_k3"], true),
        (
            "untrusted diff: every model full, common",
            &[
                "deepseek_v41",
                "kimi_k3",
                "kimi_k31",
                "glm53_flash",
                "glm53_flash_mxfp4",
                "qwen38_flash_next",
                "qwen38_flash_next_mxfp4",
                "qwen38_vl",
                "step4_flash",
                "minimax_m31_flash",
                "muse_spark",
                "qwen38_24t",
            ],
            true,
        ),
        ("kimi_k3 and kimi_k31 full", &["kimi_k3", "kimi_k31"], false),
        (
            "deepseek_v41, glm53_flash, qwen38_vl full",
            &["deepseek_v41", "glm53_flash", "qwen38_vl"],
            false,
        ),
    ];
    let nodes = seed_nodes();
    for (label, full, shared) in sets {
        let jobs = seed_jobs(full, shared);
        let results: Vec<schedule::Schedule> =
            METHODS.iter().map(|(method, _)| schedule::schedule(&jobs, &nodes, *method)).collect();
        let exact = &results[2];
        println!(
            "| {label} | {} | {} | {} | {} | {} | {} | {:.4} | {} |",
            jobs.len() - exact.unschedulable().len(),
            exact.unschedulable().len(),
            hours(results[0].makespan()),
            hours(results[1].makespan()),
            hours(exact.makespan()),
            hours(exact.lower_bound().duration),
            exact.ratio().unwrap_or(1.0),
            if exact.optimal() { "yes" } else { "no" },
        );
    }
    println!();
}

/// splitmix64: the sweep is the same on every machine.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low + 1)
    }
}

/// A random set: `nodes` nodes (a quarter of them MI350X when `mixed`), 3 to 5 jobs a node:
/// a quarter full-tier (4-8 h), half smoke (1.5-3.5 h), a quarter tests only (5-40 min); when
/// mixed, a job supports one kind of node with probability 1/3.
fn random_set(random: &mut Random, count: usize, mixed: bool) -> (Vec<Node>, Vec<Job>) {
    let other = if mixed { (count / 4).max(1) } else { 0 };
    let nodes: Vec<Node> = (0..count)
        .map(|index| Node {
            name: format!("n{index}"),
            hardware: if index < other { "mi350x".into() } else { "mi355x".into() },
            gpus: None,
            checkpoints: None,
        })
        .collect();
    let jobs = (0..random.between(3 * count as u64, 5 * count as u64))
        .map(|index| {
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
    (nodes, jobs)
}

fn sweep() {
    const SETS: usize = 500;
    println!("## Random sets ({SETS} per row, seed 2026)\n");
    println!(
        "| nodes | hardware | method | sets | worst ratio | worst ratio, not proven optimal | worst vs max(longest, total/N) | mean ratio | proven optimal |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut random = Random(2026);
    for mixed in [false, true] {
        for count in [2, 3, 4, 6, 8] {
            let mut tallies: Vec<Tally> = METHODS.iter().map(|_| Tally::default()).collect();
            for _set in 0..SETS {
                let (nodes, jobs) = random_set(&mut random, count, mixed);
                for ((method, _), tally) in METHODS.iter().zip(&mut tallies) {
                    tally.add(&jobs, &schedule::schedule(&jobs, &nodes, *method), count);
                }
            }
            let hardware = if mixed { "mixed" } else { "identical" };
            for ((_, label), tally) in METHODS.iter().zip(&tallies) {
                println!("{}", tally.row(&format!("{count} | {hardware} | {label}")));
            }
        }
    }
    println!();
}

fn main() {
    seed_models();
    seed_sets();
    sweep();
}
