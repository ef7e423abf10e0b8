//! A plan's estimate with its recipes read from head's tree, and base's from the base-side
//! commit (base decides what is measured): `prgate_schedule`'s estimate (re-exported here,
//! `prgate_runner::estimate::PlanEstimate` as before), fed with each recipe's text the way the
//! runner will read it: the commit, or the working tree of a `--worktree` plan, at the runner's
//! default recipe paths ([`RecipePaths::DEFAULT`]).
//!
//! Only the reading is here (git, the working tree); what a recipe costs and the schedule are
//! the schedule crate's, which takes text and opens nothing.

use std::path::{Path, PathBuf};

pub use prgate_schedule::estimate::*;
use prgate_scope::Plan;
use prgate_scope::text::chain;

use crate::job::RecipePaths;
use crate::schedule::{History, Node};

/// Why head's tree could not be read at all; git's cause is the `source` (shown with the chain).
#[derive(Debug, thiserror::Error)]
pub enum EstimateError {
    #[error("opening the repository around {}", path.display())]
    Repository { path: PathBuf, source: git2::Error },
    #[error("{}: the repository has no working tree to read the recipes from", path.display())]
    NoWorkingTree { path: PathBuf },
}

/// Each running job's estimate (from its recipe in head's tree and `history`) and the schedule
/// onto `nodes` ([`estimate_from_recipes`]).
pub fn estimate_plan(
    repo: &Path,
    plan: &Plan,
    nodes: &[Node],
    history: &History,
) -> Result<PlanEstimate, EstimateError> {
    let head = HeadTree::open(repo, plan)?;
    let recipes = RecipePaths::DEFAULT;
    let head_recipe = |model: Option<&str>| match model {
        None => head.read(recipes.common),
        Some(name) => head.read(&recipes.model_recipe(name)),
    };
    // What base's side has, as the job plan reads it: the plan's base-side commit.
    let base_recipe = |model: Option<&str>| {
        let path = model.map_or(recipes.common.to_owned(), |name| recipes.model_recipe(name));
        prgate_scope::base_side::read_text_at(repo, plan.base_side_commit(), &path).ok().flatten()
    };
    Ok(estimate_from_recipes(plan, nodes, history, head_recipe, base_recipe))
}

/// Head's tree, where the runner reads the recipes: the commit, or the working tree with
/// `--worktree`.
struct HeadTree {
    repository: PathBuf,
    commit: String,
    workdir: Option<PathBuf>,
}

impl HeadTree {
    fn open(repo: &Path, plan: &Plan) -> Result<HeadTree, EstimateError> {
        let workdir = if plan.head.worktree {
            let repository = git2::Repository::discover(repo)
                .map_err(|source| EstimateError::Repository { path: repo.to_path_buf(), source })?;
            let workdir = repository
                .workdir()
                .ok_or_else(|| EstimateError::NoWorkingTree { path: repo.to_path_buf() })?;
            Some(workdir.to_path_buf())
        } else {
            None
        };
        Ok(HeadTree { repository: repo.to_path_buf(), commit: plan.head.sha.clone(), workdir })
    }

    /// The text at `path`: a regular file (a symbolic link is missing, and never followed).
    fn read(&self, path: &str) -> RecipeText {
        let missing = || RecipeText::Missing { path: path.to_owned() };
        match &self.workdir {
            Some(workdir) => match prgate_scope::git::worktree_text(workdir, path) {
                Ok(Some(text)) => {
                    RecipeText::Found { text, name: format!("{path} in the working tree") }
                }
                Ok(None) => missing(),
                Err(error) => RecipeText::Unreadable { message: chain(&error) },
            },
            None => {
                let short = prgate_scope::git::short_sha(&self.commit);
                match prgate_scope::base_side::read_text_at(&self.repository, &self.commit, path) {
                    Ok(Some(text)) => {
                        RecipeText::Found { text, name: format!("{path} at {short}") }
                    }
                    Ok(None) => missing(),
                    Err(error) => RecipeText::Unreadable { message: chain(&error) },
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recipe_that_cannot_be_read_says_why() {
        // The cause is the scope error's source: the message is its whole chain.
        let tree = tempfile::tempdir().expect("a folder");
        std::fs::write(tree.path().join("test"), "a file where a folder should be").expect("write");
        let head = HeadTree {
            repository: tree.path().to_path_buf(),
            commit: "0".repeat(40),
            workdir: Some(tree.path().to_path_buf()),
        };
        let RecipeText::Unreadable { message } = head.read("test/e2e/m.toml") else {
            panic!("an unreadable recipe");
        };
        let path = tree.path().join("test/e2e/m.toml");
        let cause = std::fs::symlink_metadata(&path).expect_err("no folder to read in");
        assert_eq!(message, format!("reading {}: {cause}", path.display()));
    }
}
