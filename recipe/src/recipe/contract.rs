//! The contract: what each side of a model's comparison runs by, decided in one place.
//!
//! What is measured, how and how much is the base branch's decision: when the base side's
//! tree has a valid recipe, **both** sides run by it, and the PR's recipe decides only its own
//! side's server command (`server.command`, and each topology role's command). Everything else
//! of the PR's recipe (the requirements, the tests, the timing scripts, the benchmarks and their
//! datasets and limits, the sweep, the routing pattern and monokernel flag, the time limits)
//! is compared with base's, and every difference is a [`ContractChange`]: the PR's own side,
//! a widening (speed cells the PR adds are swept too), a change (base's value is used), or a
//! narrowing (base's value is used, and the verdict fails unless a maintainer accepted it). A
//! model without a base recipe runs by its own (`own`), which the job plan and comment say:
//! one new in the PR, or whose recipe file base's tree lacks. A base file that is there but not
//! valid never reaches here as `None`: the runner blocks the model's checks
//! (`prgate_runner::job`, `base-recipe-invalid`).
//!
//! The common checks' recipe is held to base's the same way ([`decide_common`]): both sides
//! run base's selections, install command and time limits, so a PR cannot drop its failing
//! common test from the recipe, nor run its own install command on the base side.
//!
//! What it leaves to others: reading the recipes (`prgate_runner::job`), running them
//! (`prgate_runner::run`), judging the changes (the gate's verdict).

use prgate_gate::job::{Contract, ContractChange, Effect};

use super::common::CommonRecipe;
use super::renames::Renames;
use super::{AccuracyBenchmark, Evaluator, Install, Recipe, SpeedBenchmark};
use crate::node::{NodeProfile, Spelling, write_duration};

/// What each side of a model runs by, and how the PR's recipe differs from the contract.
#[derive(Debug, Clone)]
pub struct Sides {
    /// The base side: base's recipe as it is (or the PR's, for a model without one).
    pub base: Recipe,
    /// The PR side: base's recipe with the PR's server command, and the cells it adds.
    pub pr: Recipe,
    pub contract: Contract,
}

/// The recipe each side runs by. `base` is the base side's own recipe when it has a valid one;
/// `node` decides whether a changed requirement narrows what this node can run; `renames` are
/// the diff's, for a model the PR renamed: the PR side runs base's recipe with the paths it
/// reads in the PR's tree moved with them ([`Recipe::seen_through`]), and the PR's recipe is
/// compared with that.
pub fn decide(base: Option<&Recipe>, pr: &Recipe, node: &NodeProfile, renames: &Renames) -> Sides {
    let Some(base) = base else {
        let contract = Contract { own: true, changes: Vec::new() };
        return Sides { base: pr.clone(), pr: pr.clone(), contract };
    };
    let changes = differences(&base.seen_through(renames), pr, node);
    let (base, pr) = measured(base, pr, renames);
    Sides { base, pr, contract: Contract { own: false, changes } }
}

/// What each side runs by when the base side has a valid recipe, wherever it runs: base's
/// recipe, with the speed cells the PR adds (a widening runs; none of base's is dropped), and
/// on the PR side its own server and topology commands (`renames` move the paths it reads in
/// the PR's tree). The estimate costs this without a node; [`decide`] adds the contract.
pub fn measured(base: &Recipe, pr: &Recipe, renames: &Renames) -> (Recipe, Recipe) {
    let mut measured = base.clone();
    if let (Some(sweep), Some(theirs)) = (&mut measured.speed, &pr.speed) {
        for (ours, added) in [
            (&mut sweep.concurrencies, &theirs.concurrencies),
            (&mut sweep.covered, &theirs.covered),
        ] {
            ours.extend(added.iter().copied());
            ours.sort_unstable();
            ours.dedup();
        }
    }
    let mut pr_side = measured.seen_through(renames);
    pr_side.server.command = pr.server.command.clone();
    pr_side.topology =
        measured.topology.as_ref().map(|topology| topology.with_commands_of(pr.topology.as_ref()));
    (measured, pr_side)
}

/// The common checks' recipe both sides run by, and its contract: base's (`base`, when the
/// base side has a valid one), with every difference of the PR's listed (a selection the PR
/// drops narrows, one it adds widens but does not run, the install command and the time limits
/// are base's); without one, the PR's own.
pub fn decide_common(base: Option<&CommonRecipe>, pr: &CommonRecipe) -> (CommonRecipe, Contract) {
    let Some(base) = base else {
        return (pr.clone(), Contract { own: true, changes: Vec::new() });
    };
    let mut changes = Changes::default();
    changes.set("tests", &base.selections, &pr.selections, Clone::clone);
    let (ours, theirs) = (install_text(base.install.as_ref()), install_text(pr.install.as_ref()));
    changes.value("install.command", &ours, &theirs, Effect::Changed);
    for (key, ours, theirs) in [
        ("timeouts.install", base.install_timeout, pr.install_timeout),
        ("timeouts.tests", base.tests_timeout, pr.tests_timeout),
    ] {
        let text = |limit: Option<std::time::Duration>| {
            limit.map_or("-".to_owned(), |limit| write_duration(limit, Spelling::Units))
        };
        changes.value(key, &text(ours), &text(theirs), Effect::Changed);
    }
    (base.clone(), Contract { own: false, changes: changes.0 })
}

/// An install command as its recipe wrote it, `-` for none.
fn install_text(install: Option<&Install>) -> String {
    install.map_or("-".to_owned(), |install| install.command_text().to_owned())
}

/// Every difference of `pr` from `base`, in the recipe's key order.
pub fn differences(base: &Recipe, pr: &Recipe, node: &NodeProfile) -> Vec<ContractChange> {
    let mut changes = Changes::default();
    requirements(&mut changes, base, pr, node);
    let (ours, theirs) = (&base.server, &pr.server);
    changes.value("server.command", ours.command.text(), theirs.command.text(), Effect::Own);
    let flag = |server: &super::Server| server.monokernel_flag.join(" ");
    changes.value("server.monokernel-flag", &flag(ours), &flag(theirs), Effect::Changed);
    changes.value("server.health-path", &ours.health_path, &theirs.health_path, Effect::Changed);
    let startup = |server: &super::Server| format!("{:?}", server.startup_timeout);
    changes.value("server.startup-timeout", &startup(ours), &startup(theirs), Effect::Changed);
    let api = |server: &super::Server| server.memory_api.to_string();
    changes.value("server.memory-api", &api(ours), &api(theirs), Effect::Changed);
    let logged = |server: &super::Server| server.routing_logged.as_str();
    changes.value("server.routing-logged", logged(ours), logged(theirs), Effect::Changed);
    changes.value(
        "server.routing-pattern",
        &ours.routing_pattern,
        &theirs.routing_pattern,
        Effect::Changed,
    );
    for (suite, a, b) in [
        ("unit", &base.tests.unit, &pr.tests.unit),
        ("kernel", &base.tests.kernel, &pr.tests.kernel),
        ("serving", &base.tests.serving, &pr.tests.serving),
    ] {
        changes.set(&format!("tests.{suite}"), a, b, |selection| selection.clone());
    }
    let timing_names = |recipe: &Recipe| {
        recipe.kernel_timing.iter().map(|script| script.name.clone()).collect::<Vec<_>>()
    };
    changes.set("kernel-timing", &timing_names(base), &timing_names(pr), Clone::clone);
    for script in &base.kernel_timing {
        if let Some(other) = pr.kernel_timing.iter().find(|other| other.name == script.name) {
            let key = format!("kernel-timing.{}.command", script.name);
            changes.value(&key, script.command.text(), other.command.text(), Effect::Changed);
        }
    }
    accuracy(&mut changes, base, pr);
    speed(&mut changes, base, pr);
    let timeouts = |recipe: &Recipe| format!("{:?}", recipe.timeouts);
    changes.value("timeouts", &timeouts(base), &timeouts(pr), Effect::Changed);
    let (ours, theirs) = (install_text(base.install.as_ref()), install_text(pr.install.as_ref()));
    changes.value("install.command", &ours, &theirs, Effect::Changed);
    let same_topology = match (&base.topology, &pr.topology) {
        (None, None) => true,
        // The same shape once the PR's role commands are set aside.
        (Some(ours), Some(theirs)) => theirs.with_commands_of(Some(ours)) == *ours,
        _ => false,
    };
    if !same_topology {
        let shape = |recipe: &Recipe| if recipe.topology.is_some() { "set" } else { "-" };
        changes.push("topology", shape(base), shape(pr), Effect::Changed);
    }
    changes.0
}

/// The hardware, checkpoint and tp: a narrowing when this node can run base's but not the PR's.
fn requirements(changes: &mut Changes, base: &Recipe, pr: &Recipe, node: &NodeProfile) {
    let narrows = |ours: bool, theirs: bool| {
        if ours && !theirs { Effect::Narrowing } else { Effect::Changed }
    };
    let hardware = |recipe: &Recipe| recipe.hardware.iter().any(|h| h == node.hardware());
    changes.value(
        "hardware",
        &base.hardware.join(", "),
        &pr.hardware.join(", "),
        narrows(hardware(base), hardware(pr)),
    );
    let checkpoint = |recipe: &Recipe| node.checkpoint_path(&recipe.checkpoint).is_some();
    changes.value(
        "checkpoint",
        &base.checkpoint,
        &pr.checkpoint,
        narrows(checkpoint(base), checkpoint(pr)),
    );
    let gpus = |recipe: &Recipe| node.gpu_count() >= recipe.tp as usize;
    changes.value("tp", &base.tp.to_string(), &pr.tp.to_string(), narrows(gpus(base), gpus(pr)));
}

/// The accuracy benchmarks: one removed narrows, one added widens; a limit or a cap of repeats
/// lowered narrows.
fn accuracy(changes: &mut Changes, base: &Recipe, pr: &Recipe) {
    let names =
        |recipe: &Recipe| recipe.accuracy.iter().map(|b| b.name.clone()).collect::<Vec<_>>();
    changes.set("accuracy", &names(base), &names(pr), Clone::clone);
    for ours in &base.accuracy {
        let Some(theirs) = pr.accuracy.iter().find(|other| other.name == ours.name) else {
            continue;
        };
        let key = |field: &str| format!("accuracy.{}.{field}", ours.name);
        match (&ours.evaluator, &theirs.evaluator) {
            (Evaluator::Builtin(a), Evaluator::Builtin(b)) => {
                changes.value(&key("dataset"), &a.dataset, &b.dataset, Effect::Changed);
                let limit = |limit: Option<u32>| limit.map_or("all".to_owned(), |l| l.to_string());
                let effect = match (a.limit, b.limit) {
                    (None, Some(_)) => Effect::Narrowing,
                    (Some(x), Some(y)) if y < x => Effect::Narrowing,
                    _ => Effect::Widening,
                };
                changes.value(&key("limit"), &limit(a.limit), &limit(b.limit), effect);
            }
            (Evaluator::External(a), Evaluator::External(b)) => {
                let (x, y) = (a.command.text(), b.command.text());
                changes.value(&key("command"), x, y, Effect::Changed);
                changes.value(&key("metrics"), &a.metrics, &b.metrics, Effect::Changed);
            }
            _ => {
                changes.push(&key("evaluator"), evaluator(ours), evaluator(theirs), Effect::Changed)
            }
        }
        let gated = |b: &AccuracyBenchmark| {
            format!(
                "{} {}",
                b.token.as_deref().unwrap_or("-"),
                b.hub_dataset.as_ref().map_or("-".to_owned(), ToString::to_string)
            )
        };
        changes.value(&key("token"), &gated(ours), &gated(theirs), Effect::Changed);
        // The cap of repeats is base's: a PR's lower one narrows, a higher one is not used.
        // A recipe without one has the gate's embedded default.
        let default = prgate_gate::GateConfig::defaults().accuracy_repeats;
        let cap = |b: &AccuracyBenchmark| b.repeats.unwrap_or(default);
        let effect = if cap(theirs) < cap(ours) { Effect::Narrowing } else { Effect::Changed };
        let (ours, theirs) = (cap(ours).to_string(), cap(theirs).to_string());
        changes.value(&key("repeats"), &ours, &theirs, effect);
    }
}

fn evaluator(benchmark: &AccuracyBenchmark) -> &'static str {
    match benchmark.evaluator {
        Evaluator::Builtin(_) => "builtin",
        Evaluator::External(_) => "external",
    }
}

/// The sweep: removed, cells removed or fewer requests narrow; added ones widen.
fn speed(changes: &mut Changes, base: &Recipe, pr: &Recipe) {
    let (ours, theirs) = match (&base.speed, &pr.speed) {
        (None, None) => return,
        (Some(_), None) => return changes.push("speed", "set", "-", Effect::Narrowing),
        (None, Some(_)) => return changes.push("speed", "-", "set", Effect::Widening),
        (Some(ours), Some(theirs)) => (ours, theirs),
    };
    changes.set("speed.concurrencies", &ours.concurrencies, &theirs.concurrencies, u32::to_string);
    changes.set("speed.covered", &ours.covered, &theirs.covered, u32::to_string);
    for (key, a, b) in [
        ("speed.input-len", ours.input_len, theirs.input_len),
        ("speed.output-len", ours.output_len, theirs.output_len),
        (
            "speed.warmup-per-concurrency",
            ours.warmup_per_concurrency,
            theirs.warmup_per_concurrency,
        ),
    ] {
        changes.value(key, &a.to_string(), &b.to_string(), Effect::Changed);
    }
    let (a, b) = (ours.requests_per_concurrency, theirs.requests_per_concurrency);
    let effect = if b < a { Effect::Narrowing } else { Effect::Widening };
    changes.value("speed.requests-per-concurrency", &a.to_string(), &b.to_string(), effect);
    let bench = |sweep: &super::SpeedSweep| match &sweep.benchmark {
        SpeedBenchmark::Builtin => "builtin".to_owned(),
        SpeedBenchmark::External(external) => external.command_text().to_owned(),
    };
    changes.value("speed.benchmark", &bench(ours), &bench(theirs), Effect::Changed);
}

/// The differences found so far.
#[derive(Default)]
struct Changes(Vec<ContractChange>);

impl Changes {
    fn push(&mut self, key: &str, base: &str, pr: &str, effect: Effect) {
        let (base, pr) = (base.to_owned(), pr.to_owned());
        self.0.push(ContractChange { key: key.to_owned(), base, pr, effect });
    }

    /// A value that differs.
    fn value(&mut self, key: &str, base: &str, pr: &str, effect: Effect) {
        if base != pr {
            self.push(key, base, pr, effect);
        }
    }

    /// A list of things measured: each one base has and the PR lacks narrows, each one the PR
    /// adds widens.
    fn set<T: PartialEq>(&mut self, key: &str, base: &[T], pr: &[T], text: impl Fn(&T) -> String) {
        let removed: Vec<String> = base.iter().filter(|x| !pr.contains(x)).map(&text).collect();
        let added: Vec<String> = pr.iter().filter(|x| !base.contains(x)).map(&text).collect();
        if !removed.is_empty() {
            self.push(key, &removed.join(", "), "-", Effect::Narrowing);
        }
        if !added.is_empty() {
            self.push(key, "-", &added.join(", "), Effect::Widening);
        }
    }
}
