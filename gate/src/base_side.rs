//! What judges a PR, from its base side: the `[gate]` table of `prgate.toml` over the defaults,
//! and the repository's CODEOWNERS policy ([`POLICY_PATH`], else prgate's default), both as
//! they are at the plan's base-side commit, so that a PR cannot change what judges it; and the
//! verdict they give on a run's evidence (the rules judged before any GPU work, the title's
//! gain rule, the checklist).
//!
//! Text in: the binary reads the manifest and the policy file at that commit
//! (`prgate_scope::base_side`) and hands them over; this opens nothing. The drift guard's
//! settings at a branch's tip are read the same way ([`settings_at`]).

use prgate_scope::git::short_sha;
use prgate_scope::{ConfigError, Manifest, Plan};

use crate::codeowners::{DEFAULT_POLICY, Policy, PolicyError};
use crate::evidence::{Evidence, EvidenceError};
use crate::rules::{RuleOutcome, judge_rules};
use crate::{Completion, GateConfig, JobPlan, JudgeRequest, Verdict};

/// Where a repository keeps its own CODEOWNERS policy, read at the base side's commit.
pub const POLICY_PATH: &str = "CODEOWNERS.rules";

/// What judges a PR, from its base side: the gate's settings and the CODEOWNERS policy.
#[derive(Debug, Clone)]
pub struct BaseSide {
    pub config: GateConfig,
    pub policy: Policy,
}

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
        Ok(BaseSide { config, policy })
    }

    /// The rules judged before any GPU work: the policy on the plan's facts, and the title's
    /// rule when the PR has a title.
    pub fn rules(&self, plan: &Plan, title: Option<&str>) -> Vec<RuleOutcome> {
        judge_rules(plan, title, &self.config, &self.policy)
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
