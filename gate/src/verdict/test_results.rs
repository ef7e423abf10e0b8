//! The tests section: a model's (or the common) test suites judged on their JUnit results,
//! base against PR with renamed test modules followed, and the router's routing check.
//! Whether a suite ran at all is left to the scope module's accounting.

use std::collections::BTreeSet;

use prgate_scope::plan::Plan;

use crate::evidence::{Check, Outcome, Side, TestOutcome, TestResult};

use super::{Item, Judge, Numbers, SectionName, State, check_name, list};

impl<'a> Judge<'a> {
    pub(super) fn tests(&mut self, model: Option<&str>, check: Check) {
        let records = self.records(model, check).to_vec();
        if records.is_empty() {
            self.pending(model, check);
            return;
        }
        if model.is_none() && self.not_run(None, check) {
            return;
        }
        let results = |side: Side| -> Option<&'a [TestResult]> {
            records.iter().find(|record| record.side == side).and_then(|record| {
                match &record.outcome {
                    Outcome::Tests { results } => Some(results.as_slice()),
                    _ => None,
                }
            })
        };
        let Some(pr) = results(Side::Pr) else {
            self.pending(model, check);
            return;
        };
        let suites = Suites::compare(pr, results(Side::Base), &self.moved_modules);
        let state = suites.state(self.accept_narrowing, self.config.pre_existing_failure.into());
        let summary = suites.summary(self.accept_narrowing);
        self.push(
            SectionName::Tests,
            Item {
                model: model.map(str::to_owned),
                check: check_name(check),
                state,
                rule: "a failing test fails, unless it fails on base too".to_owned(),
                summary,
                numbers: Some(Numbers::Tests {
                    passed: suites.count(TestOutcome::Passed),
                    failed: suites.count(TestOutcome::Failed),
                    skipped: suites.count(TestOutcome::Skipped),
                    errors: suites.count(TestOutcome::Error),
                    pre_existing: suites.pre_existing.len(),
                }),
            },
        );
    }

    pub(super) fn routing(&mut self, model: &str) {
        let pr = self.records(Some(model), Check::Routing).iter().find_map(|record| match &record
            .outcome
        {
            Outcome::Routing { routed, line } if record.side == Side::Pr => {
                Some((*routed, line.clone()))
            }
            _ => None,
        });
        let Some((routed, line)) = pr else {
            self.pending(Some(model), Check::Routing);
            return;
        };
        let (state, summary) = match (routed, line) {
            (true, line) => {
                (State::Pass, format!("the PR server logged: {}", line.unwrap_or_default()))
            }
            // A topology names the instance and the required line it lacks.
            (false, Some(missing)) => (
                self.config.missing_routing.into(),
                format!("the PR server logged no monokernel routing: {missing}"),
            ),
            (false, None) => (
                self.config.missing_routing.into(),
                "the PR server logged no monokernel routing".to_owned(),
            ),
        };
        self.push(
            SectionName::Tests,
            Item::worded(
                Some(model.to_owned()),
                "routing",
                state,
                "the PR server must route through the monokernels",
                summary,
            ),
        );
    }
}

/// The test modules the diff renamed, as pytest's dotted module names (`test/unit/a/t.py` is
/// `test.unit.a.t`): old and new.
pub(super) fn moved_test_modules(plan: &Plan) -> Vec<(String, String)> {
    let module = |path: &str| path.strip_suffix(".py").map(|stem| stem.replace('/', "."));
    plan.renamed_files().filter_map(|(old, new)| Some((module(old)?, module(new)?))).collect()
}

/// A suite's PR results against base's, with renamed test modules followed.
struct Suites<'t> {
    pr: &'t [TestResult],
    /// Whether base's results are there.
    base_ran: bool,
    /// Failing on the PR and not on base.
    new: Vec<&'t str>,
    /// Failing on both sides.
    pre_existing: Vec<&'t str>,
    /// A test that passed on base and is skipped, deselected or gone on the PR side is hidden
    /// by the PR (a conftest.py, an ini file, a test removed): it fails unless accepted.
    hidden: Vec<&'t str>,
    none_ran: bool,
    none_ran_on_base: bool,
}

impl<'t> Suites<'t> {
    fn compare(
        pr: &'t [TestResult],
        base: Option<&'t [TestResult]>,
        moved_modules: &[(String, String)],
    ) -> Suites<'t> {
        let failing =
            |outcome: TestOutcome| matches!(outcome, TestOutcome::Failed | TestOutcome::Error);
        let moved = |id: &'t str| moved_test_id(moved_modules, id);
        let base_failures: Option<BTreeSet<std::borrow::Cow<'t, str>>> = base.map(|base| {
            base.iter().filter(|test| failing(test.outcome)).map(|test| moved(&test.id)).collect()
        });
        let pr_failures: Vec<&str> =
            pr.iter().filter(|test| failing(test.outcome)).map(|test| test.id.as_str()).collect();
        let (pre_existing, new): (Vec<&str>, Vec<&str>) = pr_failures
            .iter()
            .partition(|id| base_failures.as_ref().is_some_and(|base| base.contains(**id)));
        // A suite that ran no test proves nothing: the PR broke it, or, when base ran none
        // either, the node cannot judge it.
        let executed = |results: &[TestResult]| {
            results.iter().filter(|test| test.outcome != TestOutcome::Skipped).count()
        };
        let hidden: Vec<&str> = base
            .map(|base| {
                base.iter()
                    .filter(|test| test.outcome == TestOutcome::Passed)
                    .filter(|test| {
                        let id = moved(&test.id);
                        !pr.iter().any(|ours| {
                            ours.id == id.as_ref() && ours.outcome != TestOutcome::Skipped
                        })
                    })
                    .map(|test| test.id.as_str())
                    .collect()
            })
            .unwrap_or_default();
        Suites {
            pr,
            base_ran: base.is_some(),
            new,
            pre_existing,
            hidden,
            none_ran: executed(pr) == 0,
            none_ran_on_base: base.is_some_and(|base| executed(base) == 0),
        }
    }

    fn count(&self, outcome: TestOutcome) -> usize {
        self.pr.iter().filter(|test| test.outcome == outcome).count()
    }

    /// A new failure fails, and so does a hidden test unless a maintainer accepted the
    /// narrowing; a suite that ran nothing fails (an error when base ran nothing either); a
    /// pre-existing failure is as bad as configured; an accepted hidden test warns.
    fn state(&self, accept_narrowing: bool, pre_existing_failure: State) -> State {
        if !self.new.is_empty() || (!self.hidden.is_empty() && !accept_narrowing) {
            State::Fail
        } else if self.none_ran && self.none_ran_on_base {
            State::Error
        } else if self.none_ran {
            State::Fail
        } else if !self.pre_existing.is_empty() {
            pre_existing_failure
        } else if !self.hidden.is_empty() {
            State::Warn
        } else {
            State::Pass
        }
    }

    fn summary(&self, accept_narrowing: bool) -> String {
        let mut summary = format!(
            "{} passed, {} failed, {} errors, {} skipped",
            self.count(TestOutcome::Passed),
            self.count(TestOutcome::Failed),
            self.count(TestOutcome::Error),
            self.count(TestOutcome::Skipped)
        );
        let flaky: Vec<&str> =
            self.pr.iter().filter(|test| test.flaky).map(|test| test.id.as_str()).collect();
        if !flaky.is_empty() {
            summary.push_str(&format!("; flaky (passed on a rerun): {}", list(&flaky)));
        }
        if !self.new.is_empty() {
            summary.push_str(&format!("; failing on the PR: {}", list(&self.new)));
        }
        if !self.hidden.is_empty() {
            let accepted = if accept_narrowing {
                format!(" (accepted by a maintainer: {})", crate::job::ACCEPT_NARROWING_LABEL)
            } else {
                String::new()
            };
            summary.push_str(&format!(
                "; passed on base but skipped, deselected or missing on the PR{accepted}: {}",
                list(&self.hidden)
            ));
        }
        if !self.pre_existing.is_empty() {
            summary.push_str(&format!(
                "; also failing on base (pre-existing): {}",
                list(&self.pre_existing)
            ));
        }
        if self.none_ran {
            summary.push_str(if self.none_ran_on_base {
                "; no test ran on either side, so the node cannot judge the suite"
            } else {
                "; no test ran on the PR side: a suite that runs nothing proves nothing"
            });
        }
        if !self.base_ran && !self.new.is_empty() {
            summary.push_str("; base was not run, so no failure could be found pre-existing");
        }
        summary
    }
}

/// A base test id (`module::name`, or `module.Class::name`) as the PR side names it: under its
/// module's new name when the diff renamed the module.
fn moved_test_id<'a>(moved: &[(String, String)], id: &'a str) -> std::borrow::Cow<'a, str> {
    for (old, new) in moved {
        if let Some(rest) = id.strip_prefix(old.as_str())
            && (rest.starts_with("::") || rest.starts_with('.'))
        {
            return std::borrow::Cow::Owned(format!("{new}{rest}"));
        }
    }
    std::borrow::Cow::Borrowed(id)
}
