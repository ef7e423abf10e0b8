//! What judges a PR, from its base side: the `[gate]` table of `prgate.toml` over the defaults,
//! and the repository's CODEOWNERS policy ([`POLICY_PATH`], else prgate's default), both as
//! they are at the plan's base-side commit, so that a PR cannot change what judges it; and the
//! verdict they give on a run's evidence (the rules judged before any GPU work, the title's
//! gain rule, the checklist).
//!
//! The base side is the merge-base, so a PR that branched from an old commit would be judged by
//! rules the base branch has since changed (a lower `[speed] max-loss`, a benchmark added to a
//! recipe). When any file that judges it differs between the merge-base and the base branch's
//! tip ([`BaseMoved`]), the rule `base-moved` fails: the author updates the branch. `prgate ci`
//! then starts no GPU work: every planned check is recorded not run
//! ([`BaseMoved::not_run_detail`]), and the verdict is the rule's `fail`.
//!
//! Text in: the binary reads the manifest and the policy file at that commit
//! (`prgate_scope::base_side`) and hands them over, with which judging files moved; this opens
//! nothing. The drift guard's
//! settings at a branch's tip are read the same way ([`settings_at`]).

use prgate_scope::git::short_sha;
use prgate_scope::{ConfigError, Manifest, Plan};

use crate::codeowners::{DEFAULT_POLICY, Policy, PolicyError};
use crate::config::Severity;
use crate::evidence::{Evidence, EvidenceError};
use crate::rules::{Finding, RuleOutcome, judge_rules};
use crate::{Completion, GateConfig, JobPlan, JudgeRequest, Verdict};

/// Where a repository keeps its own CODEOWNERS policy, read at the base side's commit.
pub const POLICY_PATH: &str = "CODEOWNERS.rules";

/// What judges a PR, from its base side: the gate's settings and the CODEOWNERS policy.
#[derive(Debug, Clone)]
pub struct BaseSide {
    pub config: GateConfig,
    pub policy: Policy,
    /// The files that judge the PR which the base branch changed since the PR branched.
    pub moved: Option<BaseMoved>,
}

/// Files that judge a PR (the manifest, the policy, the recipes of what it runs) that differ
/// between its merge-base and the base branch's tip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseMoved {
    pub merge_base: String,
    pub tip: String,
    /// The files, as paths in the tree; never empty.
    pub paths: Vec<String>,
}

impl BaseMoved {
    /// Why a check was not started ([`crate::evidence::NotRunReason::BaseMoved`]): `prgate ci`
    /// spends no GPU time on a PR the rule fails whatever it measures.
    pub fn not_run_detail(&self) -> String {
        format!(
            "not started: {} changed on the base branch since this PR branched from it, so the rule {BASE_MOVED_RULE} fails it whatever it measures; update the branch and run again",
            self.paths.join(", ")
        )
    }

    /// The `base-moved` rule's failure.
    fn rule(&self) -> RuleOutcome {
        let message = format!(
            "{} changed on the base branch since this PR branched from it (merge-base {}, the base is now at {}): the PR would be judged by rules the base branch no longer has; update the branch (merge or rebase the base into it) and run again",
            self.paths.join(", "),
            short_sha(&self.merge_base),
            short_sha(&self.tip)
        );
        RuleOutcome::new(BASE_MOVED_RULE, vec![Finding::new(Severity::Fail, message)])
    }
}

/// The name of the rule that fails a PR whose judging files moved on the base branch.
pub const BASE_MOVED_RULE: &str = "base-moved";

/// Why the base side's settings or policy were refused: the error names the file at its
/// commit (`prgate.toml at 0123abc`, `CODEOWNERS.rules at 0123abc`), the key or line, the value.
#[derive(Debug, thiserror::Error)]
pub enum BaseSideError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Policy(#[from] PolicyError),
}

/// The gate's settings of `manifest`, the `prgate.toml` at `commit` (named so in an error).
pub fn settings_at(manifest: &Manifest, commit: &str) -> Result<GateConfig, ConfigError> {
    let file = format!("prgate.toml at {}", short_sha(commit));
    GateConfig::with_overrides(manifest.gate_table(), &file)
}

impl BaseSide {
    /// What judges a PR at the base side's `commit`: its `manifest`'s settings, and `policy`,
    /// the text of [`POLICY_PATH`] there (`None` when the repository has none: prgate's
    /// default policy).
    pub fn of(
        manifest: &Manifest,
        policy: Option<&str>,
        commit: &str,
    ) -> Result<BaseSide, BaseSideError> {
        let config = settings_at(manifest, commit)?;
        let policy = match policy {
            Some(text) => Policy::parse(text, &format!("{POLICY_PATH} at {}", short_sha(commit)))?,
            None => Policy::parse(DEFAULT_POLICY, "prgate's default CODEOWNERS.rules")?,
        };
        Ok(BaseSide { config, policy, moved: None })
    }

    /// Why a run of this PR is not started, if it is not: files that judge it moved on the
    /// base branch, so the rule `base-moved` fails it whatever it measures. The reason and the
    /// words of every planned check's `not-run` record.
    pub fn not_started(&self) -> Option<(crate::evidence::NotRunReason, String)> {
        let moved = self.moved.as_ref()?;
        Some((crate::evidence::NotRunReason::BaseMoved, moved.not_run_detail()))
    }

    /// This base side, knowing which of `paths` (the files that judge the PR) differ between
    /// the PR's `merge_base` and the base branch's `tip`; none: nothing moved.
    pub fn with_moved(self, merge_base: &str, tip: &str, paths: Vec<String>) -> BaseSide {
        let moved = (!paths.is_empty()).then(|| BaseMoved {
            merge_base: merge_base.to_owned(),
            tip: tip.to_owned(),
            paths,
        });
        BaseSide { moved, ..self }
    }

    /// The rules judged before any GPU work: the policy on the plan's facts, the title's rule
    /// when the PR has a title, and `base-moved` when the judging files moved.
    pub fn rules(&self, plan: &Plan, title: Option<&str>) -> Vec<RuleOutcome> {
        let mut outcomes = judge_rules(plan, title, &self.config, &self.policy);
        outcomes.extend(self.moved.as_ref().map(BaseMoved::rule));
        outcomes
    }

    /// Whether a PR titled `title` must show a speed gain (its type is one of `[gain] types`).
    pub fn gain_required(&self, title: Option<&str>) -> bool {
        crate::title::requires_gain(title, &self.config.gain.types)
    }

    /// The verdict on `evidence` of a run of `plan` (that had to produce `job`, when known) by
    /// a PR titled `title`: over ([`Completion::Final`]) or still going.
    pub fn judge(
        &self,
        plan: &Plan,
        job: Option<&JobPlan>,
        evidence: &[Evidence],
        title: Option<&str>,
        completion: Completion,
    ) -> Result<Verdict, EvidenceError> {
        crate::judge_with(JudgeRequest {
            plan,
            job,
            evidence,
            rules: self.rules(plan, title),
            gain_required: self.gain_required(title),
            config: &self.config,
            completion,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

    fn manifest(gate: &str) -> Manifest {
        let text = format!("[scope]\nmodels = [\"models/{{model}}/**\"]\n{gate}");
        Manifest::parse(&text, "prgate.toml").expect("the test manifest parses")
    }

    #[test]
    fn the_settings_are_the_manifests_over_the_defaults() {
        let defaults = BaseSide::of(&manifest(""), None, COMMIT).expect("the defaults");
        assert_eq!(defaults.config.gain.types, GateConfig::defaults().gain.types);
        let changed = manifest("[gate.gain]\ntypes = [\"Perf\"]\n");
        let base = BaseSide::of(&changed, None, COMMIT).expect("an override");
        assert_eq!(base.config.gain.types, ["Perf"]);
    }

    #[test]
    fn without_a_policy_file_the_default_policy_judges() {
        let base = BaseSide::of(&manifest(""), None, COMMIT).expect("the defaults");
        let default = Policy::parse(DEFAULT_POLICY, "x").expect("the default policy parses");
        assert_eq!(base.policy, default);
    }

    #[test]
    fn an_error_names_the_file_at_the_base_sides_commit() {
        let bad_key = manifest("[gate]\nno-such-key = 1\n");
        let error = BaseSide::of(&bad_key, None, COMMIT).expect_err("an unknown key");
        assert!(error.to_string().contains("prgate.toml at 0123456"), "{error}");
        let error =
            BaseSide::of(&manifest(""), Some("not a rule\n"), COMMIT).expect_err("a bad line");
        assert!(error.to_string().starts_with("CODEOWNERS.rules at 0123456:1: "), "{error}");
    }

    #[test]
    fn judging_files_that_moved_on_the_base_branch_fail_the_base_moved_rule() {
        let plan = crate::verdict::tests::plan(Vec::new(), false, true);
        let base = BaseSide::of(&manifest(""), None, COMMIT).expect("the defaults");
        let unmoved = base.clone().with_moved(COMMIT, "f".repeat(40).as_str(), Vec::new());
        assert!(unmoved.rules(&plan, None).iter().all(|rule| rule.name != BASE_MOVED_RULE));
        let paths = vec!["prgate.toml".to_owned(), "test/e2e/alpha.toml".to_owned()];
        let moved = base.with_moved(COMMIT, "f".repeat(40).as_str(), paths);
        let rules = moved.rules(&plan, None);
        let rule = rules.iter().find(|rule| rule.name == BASE_MOVED_RULE).expect("the rule");
        assert_eq!(rule.verdict, Severity::Fail);
        assert_eq!(
            rule.findings[0].message,
            "prgate.toml, test/e2e/alpha.toml changed on the base branch since this PR branched from it (merge-base 0123456, the base is now at fffffff): the PR would be judged by rules the base branch no longer has; update the branch (merge or rebase the base into it) and run again"
        );
        // The run is not started; one that nothing moved for is.
        assert_eq!(unmoved.not_started(), None);
        let (reason, detail) = moved.not_started().expect("not started");
        assert_eq!(reason, crate::evidence::NotRunReason::BaseMoved);
        assert!(detail.starts_with("not started: prgate.toml, test/e2e/alpha.toml changed"));
    }

    #[test]
    fn a_title_of_a_gain_type_requires_a_gain() {
        let base = BaseSide::of(&manifest(""), None, COMMIT).expect("the defaults");
        for (title, required) in [
            (Some("[Perf] kimi: faster decode"), true),
            (Some("[Fix] kimi: a crash"), false),
            (None, false),
        ] {
            assert_eq!(base.gain_required(title), required, "{title:?}");
        }
    }
}
