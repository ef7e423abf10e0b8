//! The verdict's scope and accounting: the scope section (tiers, removed models, the recipe
//! contract) and, check by check, whether the evidence accounts for what the plan asked — run,
//! not run and why, missing or pending. It also refuses evidence that belongs to another plan.
//! How a check that did run is judged is left to the sections' own modules.

use std::collections::{BTreeMap, BTreeSet};

use prgate_scope::plan::{Plan, Tier};

use crate::config::Severity;
use crate::evidence::{Check, Evidence, EvidenceError, NotRunKind, NotRunReason, Outcome, Side};
use crate::job::{Expect, ExpectedStep, RecipeState, Target};

use super::{Completion, Item, Judge, SectionName, State, check_name, section_of};

impl<'a> Judge<'a> {
    pub(super) fn scope(&mut self, plan: &Plan) {
        let count = |tier: Tier| plan.models.iter().filter(|model| model.tier == tier).count();
        let mut summary = format!(
            "{} full, {} smoke, {} none; common checks {}",
            count(Tier::Full),
            count(Tier::Smoke),
            count(Tier::None),
            if plan.common.selected { "run" } else { "skipped" }
        );
        let state = if plan.diff.trusted {
            State::Pass
        } else {
            summary
                .push_str(&format!("; the diff is not trusted: {}", plan.diff.warnings.join("; ")));
            State::Warn
        };
        self.push(
            SectionName::Scope,
            Item::worded(
                None,
                "scope",
                state,
                "a model's own change runs its full tier, a shared change every model's smoke tier",
                summary,
            ),
        );
        self.removed_models(plan);
        let harness: Vec<&str> = plan
            .changed
            .iter()
            .flat_map(|changed| std::iter::once(&changed.path).chain(changed.old_path.as_ref()))
            .map(String::as_str)
            .filter(|path| is_test_harness(path))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if !harness.is_empty() {
            let rule = "a change to pytest's own configuration or plugins is read by a reviewer: it can skip, deselect or rewrite tests on the PR side";
            let summary = format!("the PR changes the test harness: {}", harness.join(", "));
            let item = Item::worded(None, "test-harness", State::Warn, rule, summary);
            self.push(SectionName::Scope, item);
        }
        self.unmatched_paths(plan);
    }

    /// Changed paths no pattern of base's manifest matches (not a model's, not shared, not
    /// ignored) select no check: nothing measures them. Said as a warning, for a reviewer to
    /// confirm, so that code moved where no pattern looks is not passed unseen.
    fn unmatched_paths(&mut self, plan: &Plan) {
        let unmatched: Vec<&str> = plan
            .changed
            .iter()
            .filter(|changed| changed.matches.is_empty())
            .map(|changed| changed.path.as_str())
            .collect();
        if unmatched.is_empty() {
            return;
        }
        const SHOWN: usize = 10;
        let mut summary = format!(
            "no pattern of base's manifest matches {} changed path(s), so no check measures them: {}",
            unmatched.len(),
            unmatched.iter().take(SHOWN).copied().collect::<Vec<_>>().join(", ")
        );
        if unmatched.len() > SHOWN {
            summary
                .push_str(&format!(" and {} more (the plan lists them)", unmatched.len() - SHOWN));
        }
        let rule = "a changed path selects the checks of what it belongs to; one that no pattern matches (a model's, shared, or ignored) selects nothing, and a reviewer confirms nothing needs measuring";
        let item = Item::worded(None, "unmatched-path", State::Warn, rule, summary);
        self.push(SectionName::Scope, item);
    }

    /// A model the PR removes leaves the verdict: it is said, never silent, and it narrows what
    /// base measures, so it fails unless a maintainer accepted it (the job plan's
    /// `accept_narrowing`): a PR
    /// cannot drop a model's checks, nor move its files under a new name git does not see as a
    /// rename to be judged as a new model by its own recipe. A model whose files the PR renamed
    /// (`renamed_to` in the plan) is the same model under its new name: it is judged there,
    /// held to this name's base recipe and base results.
    fn removed_models(&mut self, plan: &Plan) {
        let label = crate::job::ACCEPT_NARROWING_LABEL;
        for model in plan.models.iter().filter(|model| model.removed) {
            let (check, state, summary) = match &model.renamed_to {
                None if self.accept_narrowing => (
                    "model-removed",
                    State::Warn,
                    format!(
                        "{}: removed by the PR, accepted by a maintainer (the {label} label); its checks no longer run",
                        model.name
                    ),
                ),
                None => (
                    "model-removed",
                    State::Fail,
                    format!(
                        "{}: removed by the PR; its checks no longer run, which narrows what base measures and needs a maintainer's {label} label",
                        model.name
                    ),
                ),
                Some(to) => (
                    "model-renamed",
                    State::Warn,
                    format!(
                        "{}: renamed by the PR to {to}; it is judged as {to}, held to {}'s base recipe and base results",
                        model.name, model.name
                    ),
                ),
            };
            let rule = "a model that leaves the verdict is said, for a reviewer to confirm; removing one narrows what base measures";
            let item = Item::worded(Some(model.name.clone()), check, state, rule, summary);
            self.push(SectionName::Scope, item);
        }
    }

    /// The contract of a model's recipe: a model without a base recipe runs by its own; every
    /// difference of the PR's recipe from base's is listed, and a narrowing fails unless a
    /// maintainer accepted it (the job plan's `accept_narrowing`). A target base has (a model
    /// that is not new, or the common checks) whose base recipe file is there but not valid
    /// cannot be judged: the PR's own recipe never stands in for base's.
    pub(super) fn contract(&mut self, target: &Target) {
        if let (false, RecipeState::Invalid { path, error, .. }) = (target.new, &target.recipe.base)
        {
            let rule = "base's recipe decides what is measured; a PR is never judged by its own recipe in place of base's";
            let summary = format!(
                "cannot be judged: base's recipe {path} is not valid ({error}); the PR's own recipe does not stand in for it: fix {path} on the base branch, then run again"
            );
            let item =
                Item::worded(target.model.clone(), "recipe-contract", State::Error, rule, summary);
            self.push(SectionName::Scope, item);
            return;
        }
        let contract = &target.recipe.contract;
        if contract.is_empty() {
            return;
        }
        let narrowing = contract.narrowings().count();
        let (state, mut summary) = if contract.own {
            let text = if target.new {
                "new model (its own recipe): no base recipe to hold it to"
            } else {
                "its own recipe: the base side has no valid recipe to hold it to"
            };
            (State::Pass, text.to_owned())
        } else if narrowing == 0 {
            (State::Pass, "base's recipe measures both sides".to_owned())
        } else if self.accept_narrowing {
            let label = crate::job::ACCEPT_NARROWING_LABEL;
            let text = format!(
                "the PR's recipe narrows base's in {narrowing} place(s), accepted by a maintainer (the {label} label); base's recipe measures both sides"
            );
            (State::Warn, text)
        } else {
            let text = format!(
                "the PR's recipe narrows what base's measures in {narrowing} place(s): base's recipe still measures both sides, and a narrowing needs a maintainer's {} label",
                crate::job::ACCEPT_NARROWING_LABEL
            );
            (State::Fail, text)
        };
        for change in &contract.changes {
            summary.push_str(&format!(
                "; {} ({}): base {}, PR {}",
                change.key,
                change.effect.as_str(),
                clip(&change.base),
                clip(&change.pr)
            ));
        }
        let rule = "base's recipe decides what is measured, how and how much, for both sides; the PR decides only its own server command";
        let item = Item::worded(target.model.clone(), "recipe-contract", state, rule, summary);
        self.push(SectionName::Scope, item);
    }

    /// A test file the PR changes that base's selections run on its side: base chose the test,
    /// but the PR side runs it as the PR wrote it (a loosened tolerance passes), so each is a
    /// warning naming the file, for a reviewer to read.
    pub(super) fn pr_tests(&mut self, target: &Target) {
        for file in &target.recipe.pr_tests {
            let rule = "base's selections choose the tests; a test file the PR changes runs on the PR side as the PR wrote it, and a reviewer reads it";
            let summary =
                format!("measured by the PR's own test file: {file} (added or changed by this PR)");
            let item =
                Item::worded(target.model.clone(), "pr-test-file", State::Warn, rule, summary);
            self.push(SectionName::Scope, item);
        }
    }

    /// Not-run records become items by what they mean ([`NotRunKind`]): a coverage gap is
    /// author-provided, a step broken by what it runs fails on the PR side (and cannot be
    /// judged when the base side broke too), and what the node could not judge is an error.
    /// Returns whether they stand for the whole check (the PR side measured nothing of it).
    pub(super) fn not_run(&mut self, model: Option<&str>, check: Check) -> bool {
        let records: Vec<&Evidence> = self.records(model, check).to_vec();
        // The PR's own results are always judged: a not-run record only stands for the check
        // when the PR side measured nothing.
        let measured_pr = records.iter().any(|record| {
            record.side != Side::Base && !matches!(record.outcome, Outcome::NotRun { .. })
        });
        let mut whole = false;
        for record in &records {
            let Outcome::NotRun { reason, detail, subject, failed_on } = &record.outcome else {
                continue;
            };
            whole |= subject.is_none() && !measured_pr;
            let case = NotRunCase {
                what: match subject {
                    Some(subject) => format!("{} ({subject})", check.describe()),
                    None => check.describe().to_owned(),
                },
                detail: if detail.is_empty() { String::new() } else { format!(" — {detail}") },
                reason: *reason,
                base_side: record.side == Side::Base || *failed_on == Some(Side::Base),
                broke_on_base: broke_on_base(&records, record),
            };
            let (state, rule, summary) = self.not_run_case(model, check, measured_pr, &case);
            self.push(
                section_of(check),
                Item::worded(model.map(str::to_owned), check_name(check), state, rule, summary),
            );
        }
        whole
    }

    /// One not-run record's state, rule and summary; a coverage gap is also something the
    /// author must provide.
    fn not_run_case(
        &mut self,
        model: Option<&str>,
        check: Check,
        measured_pr: bool,
        case: &NotRunCase,
    ) -> (State, &'static str, String) {
        let NotRunCase { what, detail, reason, base_side, .. } = case;
        match reason.kind() {
            NotRunKind::NothingToCheck => (
                State::NothingToCheck,
                "the recipe asks nothing of it",
                format!("{what}: nothing to check{detail}"),
            ),
            kind if judged_without_base(kind, *base_side, measured_pr, check) => (
                State::Warn,
                "base and PR are compared side by side",
                format!(
                    "{what} could not run on the base side: {}{detail}; the PR's results are judged without base",
                    reason.describe()
                ),
            ),
            NotRunKind::CoverageGap => self.coverage_gap(model, case),
            NotRunKind::Broken => broken_case(case),
            NotRunKind::CannotJudge => (
                State::Error,
                "every expected step is judged, or the run ends in error",
                format!("{what} could not be judged: {}{detail}", reason.describe()),
            ),
        }
    }

    /// A coverage gap's state, rule and summary: the author must provide it, and the gate's
    /// `not_run` severity says what it weighs.
    fn coverage_gap(
        &mut self,
        model: Option<&str>,
        case: &NotRunCase,
    ) -> (State, &'static str, String) {
        let NotRunCase { what, detail, reason, .. } = case;
        let owner = model.unwrap_or("common");
        self.author.insert(format!("{owner}: {what}: {}{detail}", reason.describe()));
        let state = match self.config.not_run {
            Severity::Pass => State::Pass,
            Severity::Warn => State::AuthorProvided,
            Severity::Fail => State::Fail,
        };
        (
            state,
            "a check that cannot run on these nodes is provided by the author",
            format!("{what} could not run: {}{detail}", reason.describe()),
        )
    }

    /// A check that has no evidence: pending while the run goes on, an error once it is over;
    /// `why`, when known, after a colon.
    pub(super) fn missing(&mut self, model: Option<&str>, check: Check, why: Option<&str>) {
        let state = match self.completion {
            Completion::InProgress => State::Pending,
            Completion::Final => State::Error,
        };
        let why = why.map(|why| format!(": {why}")).unwrap_or_default();
        let summary = match self.completion {
            Completion::InProgress => format!("no evidence of {} yet{why}", check.describe()),
            Completion::Final => {
                format!("no evidence of {}: the run ended without it{why}", check.describe())
            }
        };
        self.push(
            section_of(check),
            Item::worded(
                model.map(str::to_owned),
                check_name(check),
                state,
                "every planned check reports",
                summary,
            ),
        );
    }

    pub(super) fn pending(&mut self, model: Option<&str>, check: Check) {
        self.missing(model, check, None);
    }

    /// Whether the job plan's steps of `check` are accounted for by the evidence, so the check
    /// can be judged; when they are not (or the recipe asks nothing of it), says so in an item.
    pub(super) fn accounted(&mut self, target: &Target, check: Check) -> bool {
        let steps: Vec<&ExpectedStep> = target.steps_of(check).collect();
        if steps.is_empty() {
            self.missing(
                target.model.as_deref(),
                check,
                Some("the job plan expects no step of it"),
            );
            return false;
        }
        if let Some(why) = steps.iter().find_map(|step| match &step.expect {
            Expect::Nothing { why } => Some(why),
            _ => None,
        }) && steps.iter().all(|step| matches!(step.expect, Expect::Nothing { .. }))
        {
            self.push(
                section_of(check),
                Item::worded(
                    target.model.clone(),
                    check_name(check),
                    State::NothingToCheck,
                    "the recipe asks nothing of it",
                    format!("{}: nothing to check ({why})", check.describe()),
                ),
            );
            return false;
        }
        let unaccounted: Vec<String> = steps
            .iter()
            .filter(|step| !matches!(step.expect, Expect::Nothing { .. }))
            .map(|step| target.step_id(step))
            .filter(|id| !crate::job::accounted(id, self.evidence))
            .map(|id| id.to_string())
            .collect();
        if unaccounted.is_empty() {
            return true;
        }
        self.missing(target.model.as_deref(), check, Some(&unaccounted.join("; ")));
        false
    }

    pub(super) fn check(&mut self, model: &str, check: Check, covered_cells: usize) {
        if self.records(Some(model), check).is_empty() {
            self.pending(Some(model), check);
            return;
        }
        if self.not_run(Some(model), check) {
            return;
        }
        // Only not-run parts (a benchmark, a cell): their items stand for the check.
        let measured = self
            .records(Some(model), check)
            .iter()
            .any(|record| !matches!(record.outcome, Outcome::NotRun { .. }));
        if !measured {
            return;
        }
        match check {
            Check::UnitTests | Check::KernelTests | Check::ServingTests | Check::CommonTests => {
                self.tests(Some(model), check)
            }
            Check::Routing => self.routing(model),
            Check::Accuracy => self.accuracy(model),
            Check::KernelTiming => self.kernels(model),
            Check::Speed => self.speed(model, covered_cells),
        }
    }
}

/// Evidence that does not belong to this plan: a model it does not have, or a PR commit that
/// is not its head (a rerun's leftovers, another PR's results).
pub(super) fn check_against_plan(plan: &Plan, evidence: &[Evidence]) -> Result<(), EvidenceError> {
    for (index, record) in evidence.iter().enumerate() {
        let fail = |problem: String| Err(EvidenceError { record: index, problem });
        if let Some(model) = &record.model
            && !plan.models.iter().any(|planned| &planned.name == model)
        {
            return fail(format!("model {model} is not in the plan"));
        }
        if let Some(commit) = &record.provenance.pr_commit
            && commit != &plan.head.sha
        {
            return fail(format!(
                "it was measured on PR commit {commit}, but the plan is for {}",
                plan.head.sha
            ));
        }
        if let Some(commit) = &record.provenance.base_commit
            && Some(commit) != plan.merge_base.as_ref()
            && commit != &plan.base.sha
        {
            return fail(format!(
                "it was measured on base commit {commit}, which is neither the plan's merge-base nor its base"
            ));
        }
    }
    // Base and PR of one model run side by side: on one node, one image, one recipe.
    let mut seen: BTreeMap<(Option<&str>, &str), (&str, usize)> = BTreeMap::new();
    for (index, record) in evidence.iter().enumerate() {
        let provenance = &record.provenance;
        for (what, value) in [
            ("node", provenance.node.as_deref()),
            ("image", provenance.image_digest.as_deref()),
            ("recipe", provenance.recipe_hash.as_deref()),
        ] {
            let Some(value) = value else { continue };
            match seen.get(&(record.model.as_deref(), what)) {
                Some((first, first_index)) if *first != value => {
                    return Err(EvidenceError {
                        record: index,
                        problem: format!(
                            "its {what} is {value}, but record {first_index} of the same model has {first}: base and PR must run side by side with the same {what}"
                        ),
                    });
                }
                Some(_) => {}
                None => {
                    seen.insert((record.model.as_deref(), what), (value, index));
                }
            }
        }
    }
    Ok(())
}

/// A broken step's state, rule and summary: broken on the base side or on both sides it cannot
/// be judged; broken by the PR alone it fails.
fn broken_case(case: &NotRunCase) -> (State, &'static str, String) {
    let NotRunCase { what, detail, reason, base_side, broke_on_base } = case;
    if *base_side {
        (
            State::Error,
            "base and PR are compared side by side",
            format!(
                "{what} broke on the base side ({}){detail}; without base there is nothing to compare the PR with",
                reason.describe()
            ),
        )
    } else if *broke_on_base {
        (
            State::Error,
            "a step that breaks on base too cannot be judged",
            format!(
                "{what} broke on both sides ({}){detail}; the base side broke the same way, so the node cannot judge the PR",
                reason.describe()
            ),
        )
    } else {
        (
            State::Fail,
            "a check the PR broke (crash, timeout, no result, a removed or broken recipe) fails",
            format!("{what}: {}{detail}", reason.describe()),
        )
    }
}

/// A not-run record as its item words it.
struct NotRunCase {
    /// The check, with the part that did not run.
    what: String,
    /// The record's detail after a dash, or nothing.
    detail: String,
    reason: NotRunReason,
    /// The base side did not run it (or failed it).
    base_side: bool,
    /// The base side of the same step broke too.
    broke_on_base: bool,
}

/// Whether a base-side not-run of `kind` leaves the PR's own results to be judged without base
/// (a warning): a coverage gap, or a test suite that broke on base while the PR's ran.
fn judged_without_base(kind: NotRunKind, base_side: bool, measured_pr: bool, check: Check) -> bool {
    base_side
        && measured_pr
        && match kind {
            NotRunKind::CoverageGap => true,
            NotRunKind::Broken => is_tests(check),
            NotRunKind::CannotJudge | NotRunKind::NothingToCheck => false,
        }
}

/// Whether `check` is a test suite (judged on the PR's results alone when base is missing).
fn is_tests(check: Check) -> bool {
    matches!(
        check,
        Check::UnitTests | Check::KernelTests | Check::ServingTests | Check::CommonTests
    )
}

/// Whether the base side of `record`'s step broke too (a broken or unjudgeable not-run of the
/// same part on the base side).
fn broke_on_base(records: &[&Evidence], record: &Evidence) -> bool {
    let Outcome::NotRun { subject, .. } = &record.outcome else { return false };
    records.iter().any(|other| {
        other.side == Side::Base
            && matches!(&other.outcome, Outcome::NotRun { reason, subject: base_subject, .. }
                if base_subject == subject
                    && matches!(reason.kind(), NotRunKind::Broken | NotRunKind::CannotJudge))
    })
}

/// A recipe value as a verdict line shows it: its white space folded to single spaces, cut
/// after 80 characters with `…` ([`prgate_scope::text::clip`]).
fn clip(text: &str) -> String {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    prgate_scope::text::clip(&text, 80).into_owned()
}

/// The files pytest reads its configuration and plugins from (`conftest.py`, `pytest.toml`,
/// `.pytest.toml`, `pytest.ini`, `.pytest.ini` (pytest 9; `pytest.toml` comes first and can set
/// `pythonpath` and plugins), `pyproject.toml`, `setup.cfg`, `tox.ini`; `setup.py`, whose entry
/// points can register a
/// `pytest11` plugin), and the ones Python runs at every start in the side's environment
/// (`sitecustomize.py`, `usercustomize.py`, a `.pth` file), at any depth: each can skip,
/// deselect or rewrite tests, or their report, on the PR side.
fn is_test_harness(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    // `python -m pytest` runs from the tree's root, which Python puts first on `sys.path`: a
    // module there, or a package named as pytest or one it imports, replaces the real one.
    let top = path.split('/').next().unwrap_or(path);
    let shadows = (!path.contains('/') && name.ends_with(".py"))
        || (path.contains('/') && SHADOWED_PACKAGES.contains(&top));
    shadows
        || matches!(
            name,
            "conftest.py"
                | "pytest.toml"
                | ".pytest.toml"
                | "pytest.ini"
                | ".pytest.ini"
                | "pyproject.toml"
                | "setup.cfg"
                | "tox.ini"
                | "setup.py"
                | "sitecustomize.py"
                | "usercustomize.py"
        )
        || name.ends_with(".pth")
}

/// The packages `python -m pytest` imports as it starts (pytest and its dependencies): one of
/// these names as a folder at the tree's root is imported in their place.
const SHADOWED_PACKAGES: [&str; 8] =
    ["pytest", "_pytest", "pluggy", "py", "iniconfig", "packaging", "tomli", "exceptiongroup"];

#[cfg(test)]
mod tests {
    use super::is_test_harness;

    #[test]
    fn the_harness_is_what_pytest_and_python_read_at_start_at_any_depth() {
        for path in [
            "conftest.py",
            "test/unit/alpha/conftest.py",
            "pytest.ini",
            "pytest.toml",
            "test/.pytest.toml",
            "sub/.pytest.ini",
            "pyproject.toml",
            "setup.cfg",
            "tox.ini",
            "setup.py",
            "pkg/sitecustomize.py",
            "usercustomize.py",
            ".prgate-user/lib/python3.12/site-packages/zz.pth",
            // At the root, first on `sys.path` under `python -m pytest`: pytest itself.
            "pytest.py",
            "json.py",
            "pytest/__main__.py",
            "_pytest/junitxml.py",
            "pluggy/__init__.py",
        ] {
            assert!(is_test_harness(path), "{path}");
        }
        for path in [
            "test/unit/alpha/test_layer.py",
            "pkg/setup_helpers.py",
            "pkg/pytest_helpers.py",
            "pkg/pytest/plugin.py",
            "tests/pytest.py",
            "docs/pth.md",
            "docs/pytest.toml.md",
        ] {
            assert!(!is_test_harness(path), "{path}");
        }
    }
}
