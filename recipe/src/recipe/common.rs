//! The common checks' recipe (`test/e2e/common.toml` by default): the shared code's unit tests
//! and the guard/dispatch kernel tests, run on both sides when the plan selects the common
//! checks. Like a model's recipe it is read from both trees and checked the same way, and, as
//! for a model, base's valid one is what both sides run by: a difference of the PR's is listed
//! in the target's contract (`super::contract::decide_common`), a dropped selection narrows.
//!
//! ```toml
//! [install]                      # optional: how a side's tree is installed
//! command = "python -m pip install --user --no-deps --no-build-isolation -e ."
//!
//! [tests]
//! unit = ["test/unit/common"]                                      # pytest selections
//! kernel = ["test/kernels/test_guard.py", "test/kernels/test_dispatch.py"]
//!
//! [timeouts]                     # optional, durations as in a model's recipe
//! install = "30m"
//! tests = "1h"
//! ```
//!
//! Both selections run in one pytest session per side; the gate reads them as the
//! `common-tests` check. A recipe that selects nothing is an error: a PR that removes the
//! common tests should say so by removing the file, which the runner records as not run.

use std::time::Duration;

use serde::Deserialize;

use super::{Checker, Install, RecipeError, check_selection};

/// A checked common recipe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommonRecipe {
    /// The pytest selections: the unit tests, then the kernel tests.
    pub selections: Vec<String>,
    pub install: Option<Install>,
    pub install_timeout: Option<Duration>,
    pub tests_timeout: Option<Duration>,
}

impl CommonRecipe {
    /// Parses and checks a common recipe; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<CommonRecipe, RecipeError> {
        let checker = Checker { file };
        let raw: RawCommon = checker.toml(text)?;
        let mut selections = Vec::new();
        for (suite, list) in [("unit", raw.tests.unit), ("kernel", raw.tests.kernel)] {
            for (index, selection) in list.into_iter().enumerate() {
                check_selection(&selection).map_err(|problem| {
                    checker.value(&format!("tests.{suite}[{index}]"), &selection, problem)
                })?;
                selections.push(selection);
            }
        }
        if selections.is_empty() {
            return Err(
                checker.key("tests", "selects nothing: list the common unit or kernel tests")
            );
        }
        let install = raw
            .install
            .map(|install| {
                checker
                    .template("install.command", &install.command, &[], &[])
                    .map(|command| Install { command })
            })
            .transpose()?;
        let timeouts = raw.timeouts.unwrap_or_default();
        Ok(CommonRecipe {
            selections,
            install,
            install_timeout: checker
                .optional_duration("timeouts.install", timeouts.install.as_ref())?,
            tests_timeout: checker.optional_duration("timeouts.tests", timeouts.tests.as_ref())?,
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawCommon {
    install: Option<super::RawInstall>,
    tests: RawCommonTests,
    timeouts: Option<RawCommonTimeouts>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawCommonTests {
    #[serde(default)]
    unit: Vec<String>,
    #[serde(default)]
    kernel: Vec<String>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawCommonTimeouts {
    install: Option<String>,
    tests: Option<String>,
}

#[cfg(test)]
mod tests {
    use prgate_gate::job::Effect;

    use super::CommonRecipe;
    use crate::recipe::contract::decide_common;

    #[test]
    fn both_sides_run_bases_common_recipe_and_a_dropped_selection_narrows() {
        let parse = |text: &str| CommonRecipe::parse(text, "common.toml").expect("valid");
        let base = parse(
            "[install]\ncommand = \"pip install -e .\"\n[tests]\nunit = [\"test/unit/common\"]\nkernel = [\"test/kernels/test_guard.py\"]\n",
        );
        // The PR drops the kernel test, adds one of its own, installs its own way and waits
        // longer.
        let pr = parse(
            "[install]\ncommand = \"sh -c true\"\n[tests]\nunit = [\"test/unit/common\", \"test/unit/mine.py\"]\n[timeouts]\ntests = \"2h\"\n",
        );
        let (runs, contract) = decide_common(Some(&base), &pr);
        assert_eq!(runs, base, "base's selections, install and limits run on both sides");
        assert!(!contract.own);
        let found: Vec<(&str, &str, &str, Effect)> = contract
            .changes
            .iter()
            .map(|c| (c.key.as_str(), c.base.as_str(), c.pr.as_str(), c.effect))
            .collect();
        assert_eq!(
            found,
            [
                ("tests", "test/kernels/test_guard.py", "-", Effect::Narrowing),
                ("tests", "-", "test/unit/mine.py", Effect::Widening),
                ("install.command", "pip install -e .", "sh -c true", Effect::Changed),
                ("timeouts.tests", "-", "2h", Effect::Changed),
            ]
        );
        // The same recipe: nothing to say.
        let (runs, contract) = decide_common(Some(&base), &base);
        assert_eq!((runs, contract.is_empty()), (base.clone(), true));
        // No base recipe: the PR's own, and the contract says so.
        let (runs, contract) = decide_common(None, &pr);
        assert_eq!((runs, contract.own), (pr, true));
    }

    #[test]
    fn a_common_recipe_lists_unit_then_kernel_selections() {
        let recipe = CommonRecipe::parse(
            "[tests]\nunit = [\"test/unit/common\"]\nkernel = [\"test/kernels/test_guard.py\"]\n[timeouts]\ntests = \"5m\"\n",
            "common.toml",
        )
        .expect("the recipe parses");
        assert_eq!(recipe.selections, ["test/unit/common", "test/kernels/test_guard.py"]);
        assert_eq!(recipe.tests_timeout, Some(std::time::Duration::from_secs(300)));
        assert!(recipe.install.is_none());
    }

    #[test]
    fn errors_name_the_file_and_key() {
        let cases = [
            (
                "[tests]\n",
                "common.toml: tests: selects nothing: list the common unit or kernel tests",
            ),
            (
                "[tests]\nunit = [\"-k\"]\n",
                "common.toml: tests.unit[0] = \"-k\": starts with -, which pytest would read as an option",
            ),
            (
                "[tests]\nunit = [\"a\"]\n[install]\ncommand = \"pip install . | tee\"\n",
                "common.toml: install.command = \"pip install . | tee\": ",
            ),
        ];
        for (text, expect) in cases {
            let error = CommonRecipe::parse(text, "common.toml")
                .expect_err("the recipe is refused")
                .to_string();
            assert!(error.starts_with(expect), "{error}");
        }
        let error = CommonRecipe::parse("[tests]\nunit = [\"a\"]\nserving = []\n", "common.toml")
            .expect_err("the recipe is refused")
            .to_string();
        assert!(error.contains("unknown field `serving`"), "{error}");
    }
}
