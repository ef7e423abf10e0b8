//! What a re-run took over from an earlier run (docs/rerun.md), in words for the comment's
//! header and the job summary: "12 of 14 steps reused from run …".
//!
//! A step of the job plan counts as reused when records marked `provenance.reused` account for
//! it and no record this run measured does. Pure: the job plan and the records in, a line out;
//! the comment escapes it where it shows it.

use std::collections::BTreeSet;

use prgate_gate::evidence::Evidence;
use prgate_gate::job::{JobPlan, accounted};

/// How much of a run was taken over from earlier runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reuse {
    /// The job plan's steps that must produce evidence.
    pub steps: usize,
    /// Of them, those that reused records account for.
    pub reused: usize,
    /// The runs that measured the reused records, sorted.
    pub runs: Vec<String>,
}

impl Reuse {
    /// What `records` reused of `job`'s steps; `None` when nothing was.
    pub fn of(job: &JobPlan, records: &[Evidence]) -> Option<Reuse> {
        let (reused_records, measured): (Vec<Evidence>, Vec<Evidence>) =
            records.iter().cloned().partition(|record| record.provenance.reused.is_some());
        if reused_records.is_empty() {
            return None;
        }
        let steps: Vec<_> = job.evidence_steps().collect();
        let reused = steps
            .iter()
            .filter(|step| accounted(step, &reused_records) && !accounted(step, &measured))
            .count();
        let runs: BTreeSet<String> = reused_records
            .iter()
            .filter_map(|record| record.provenance.reused.as_ref().map(|r| r.run.clone()))
            .collect();
        Some(Reuse { steps: steps.len(), reused, runs: runs.into_iter().collect() })
    }

    /// The line: `12 of 14 steps reused from run URL (their inputs unchanged); the rest ran
    /// again.` Text from the runs' names is as given: escape it where it is shown.
    pub fn words(&self) -> String {
        let from = match self.runs.as_slice() {
            [] => "an earlier run".to_owned(),
            [one] => format!("run {one}"),
            [first, rest @ ..] => format!("runs {first} and {} more", rest.len()),
        };
        let rest = if self.reused == self.steps {
            "nothing ran again".to_owned()
        } else {
            "the rest ran again".to_owned()
        };
        format!(
            "{} of {} steps reused from {from} (their inputs unchanged); {rest}.",
            self.reused, self.steps
        )
    }
}

#[cfg(test)]
mod tests {
    use prgate_gate::evidence::{
        Check, Outcome, Provenance, Reused, SCHEMA_VERSION, Side, TestOutcome, TestResult,
    };
    use prgate_gate::job::{Expect, ExpectedStep, RecipeState, Recipes, Target};
    use prgate_scope::plan::Tier;

    use super::*;

    fn job() -> JobPlan {
        let recipe = RecipeState::Parsed { path: "r".into(), hash: "h".into() };
        let run = |check, side| ExpectedStep { check, side, part: None, expect: Expect::Run };
        JobPlan {
            schema_version: 1,
            pr_commit: "p".into(),
            base_commit: "b".into(),
            family: 0,
            accept_narrowing: false,
            targets: vec![Target {
                model: Some("alpha".into()),
                tier: Tier::Smoke,
                new: false,
                recipe: Recipes {
                    base: recipe.clone(),
                    pr: recipe,
                    diff: None,
                    contract: Default::default(),
                    pr_scripts: Vec::new(),
                    pr_tests: Vec::new(),
                },
                steps: vec![
                    run(Check::UnitTests, Side::Base),
                    run(Check::UnitTests, Side::Pr),
                    run(Check::Routing, Side::Pr),
                ],
            }],
        }
    }

    fn record(check: Check, side: Side, reused: Option<&str>) -> Evidence {
        let results = vec![TestResult {
            id: "t".into(),
            outcome: TestOutcome::Passed,
            message: None,
            flaky: false,
        }];
        Evidence {
            schema_version: SCHEMA_VERSION,
            model: Some("alpha".into()),
            check,
            side,
            provenance: Provenance {
                reused: reused.map(|run| Reused { run: run.into() }),
                ..Provenance::default()
            },
            outcome: match check {
                Check::Routing => Outcome::Routing { routed: true, line: None },
                _ => Outcome::Tests { results },
            },
        }
    }

    #[test]
    fn counts_the_steps_only_reused_records_account_for() {
        let check = |records: Vec<Evidence>, expect: Option<&str>| {
            assert_eq!(Reuse::of(&job(), &records).map(|reuse| reuse.words()).as_deref(), expect);
        };
        check(
            vec![
                record(Check::UnitTests, Side::Base, None),
                record(Check::UnitTests, Side::Pr, None),
            ],
            None,
        );
        check(
            vec![
                record(Check::UnitTests, Side::Base, Some("https://ci/runs/1")),
                record(Check::UnitTests, Side::Pr, None),
                record(Check::Routing, Side::Pr, Some("https://ci/runs/1")),
            ],
            Some(
                "2 of 3 steps reused from run https://ci/runs/1 (their inputs unchanged); the rest ran again.",
            ),
        );
        check(
            vec![
                record(Check::UnitTests, Side::Base, Some("run-a")),
                record(Check::UnitTests, Side::Pr, Some("run-b")),
                record(Check::Routing, Side::Pr, Some("run-a")),
            ],
            Some(
                "3 of 3 steps reused from runs run-a and 1 more (their inputs unchanged); nothing ran again.",
            ),
        );
    }
}
