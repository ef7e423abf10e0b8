//! A model the PR renamed: base's recipe as the PR's tree sees it.
//!
//! A model whose files the PR moved (`prgate plan`'s `renamed_from`) is the same model: its
//! base side runs base's recipe under the old name, in the base tree, unchanged. The PR side
//! runs by the same contract, but in the PR's tree, where the files base's recipe names may
//! have moved: every path of base's recipe that the PR side reads in its own tree (the test
//! selections, and the words of the kernel-timing and install commands) is mapped through the
//! diff's renames, a file to its new path, a folder to the folder all of its renamed files
//! moved to. A path the renames do not move is kept, so a selection the PR deleted is still
//! asked for on its side (and is missing there, which the gate says). The datasets and the
//! accuracy and speed commands are read from the base tree on both sides, so they are not
//! mapped; the server command is the PR's own.
//!
//! What it leaves to others: finding the renames (`prgate plan`), deciding the sides
//! (`super::contract`).

use std::collections::BTreeMap;

use prgate_scope::plan::Plan;

use super::Recipe;
use super::template::Template;

/// The diff's renames: old path to new path, of files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Renames {
    files: BTreeMap<String, String>,
}

impl Renames {
    /// The renames of `plan`'s changed paths.
    pub fn of(plan: &Plan) -> Renames {
        Renames::from_pairs(plan.renamed_files())
    }

    /// Renames of `(old, new)` file pairs.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Renames {
        let files = pairs.into_iter().map(|(old, new)| (old.to_owned(), new.to_owned())).collect();
        Renames { files }
    }

    /// Where `path` is in the PR's tree: a renamed file's new path; for a folder, the folder
    /// every renamed file under it moved to, when they all moved to one; `None` when the
    /// renames do not move it. A pytest node id (`path::test`) maps its path.
    pub fn path(&self, path: &str) -> Option<String> {
        if let Some((file, test)) = path.split_once("::") {
            return self.path(file).map(|file| format!("{file}::{test}"));
        }
        if let Some(new) = self.files.get(path) {
            return Some(new.clone());
        }
        let folder = path.trim_end_matches('/');
        if folder.is_empty() {
            return None;
        }
        let prefix = format!("{folder}/");
        let mut moved_to: Option<&str> = None;
        for (old, new) in self.files.range(prefix.clone()..) {
            let Some(inside) = old.strip_prefix(&prefix) else { break };
            let to = new.strip_suffix(inside)?.strip_suffix('/')?;
            if moved_to.is_some_and(|other| other != to) {
                return None;
            }
            moved_to = Some(to);
        }
        let trailing = if path.ends_with('/') { "/" } else { "" };
        moved_to.map(|to| format!("{to}{trailing}"))
    }

    /// Whether there are no renames.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

impl Recipe {
    /// This recipe as the PR's tree sees it: the paths its PR side reads in that tree mapped
    /// through `renames` (the module's header says which).
    pub fn seen_through(&self, renames: &Renames) -> Recipe {
        let mut recipe = self.clone();
        if renames.is_empty() {
            return recipe;
        }
        for selection in
            [&mut recipe.tests.unit, &mut recipe.tests.kernel, &mut recipe.tests.serving]
        {
            for entry in selection.iter_mut() {
                if let Some(new) = renames.path(entry) {
                    *entry = new;
                }
            }
        }
        for script in &mut recipe.kernel_timing {
            script.command = script.command.with_words_mapped(|word| renames.path(word));
        }
        if let Some(install) = &mut recipe.install {
            install.command = install.command.with_words_mapped(|word| renames.path(word));
        }
        recipe
    }
}

impl Template {
    /// The template with each word that is only literal text replaced by `map`'s answer, when
    /// it has one; the text as written follows where the word is written unquoted.
    pub(crate) fn with_words_mapped(&self, map: impl Fn(&str) -> Option<String>) -> Template {
        let mut mapped = self.clone();
        let mut replaced = Vec::new();
        for word in mapped.literal_words_mut() {
            if let Some(new) = map(word) {
                replaced.push((word.clone(), new.clone()));
                *word = new;
            }
        }
        for (old, new) in replaced {
            mapped.replace_unquoted_word(&old, &new);
        }
        mapped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn renames() -> Renames {
        Renames::from_pairs([
            ("test/unit/alpha/test_a.py", "test/unit/beta/test_a.py"),
            ("test/unit/alpha/sub/test_b.py", "test/unit/beta/sub/test_b.py"),
            ("test/kernels/alpha_timing.py", "test/kernels/beta_timing.py"),
            ("test/split/one.py", "test/x/one.py"),
            ("test/split/two.py", "test/y/two.py"),
        ])
    }

    #[test]
    fn files_folders_and_node_ids_follow_their_renames() {
        let renames = renames();
        let cases = [
            ("test/kernels/alpha_timing.py", Some("test/kernels/beta_timing.py")),
            ("test/unit/alpha", Some("test/unit/beta")),
            ("test/unit/alpha/", Some("test/unit/beta/")),
            ("test/unit/alpha/sub", Some("test/unit/beta/sub")),
            ("test/unit/alpha/test_a.py::test_one", Some("test/unit/beta/test_a.py::test_one")),
            // Its files went two ways: no one folder to map it to.
            ("test/split", None),
            ("test/unit/alph", None),
            ("test/other.py", None),
            ("", None),
        ];
        for (path, expected) in cases {
            assert_eq!(renames.path(path).as_deref(), expected, "{path}");
        }
    }

    #[test]
    fn a_command_word_that_names_a_renamed_file_is_mapped_in_its_argv_and_its_text() {
        use super::super::template::Placeholder;
        let template = Template::parse(
            "python3 test/kernels/alpha_timing.py --out {output} 'test/unit/alpha'",
            &[Placeholder::Output],
            &[],
        )
        .expect("a template");
        let mapped = template.with_words_mapped(|word| renames().path(word));
        let argv = mapped.expand(|_| "out.json".to_owned(), &[]);
        assert_eq!(
            argv,
            ["python3", "test/kernels/beta_timing.py", "--out", "out.json", "test/unit/beta"]
        );
        // The quoted word is mapped in the argv; the text follows where it is unquoted.
        assert_eq!(
            mapped.text(),
            "python3 test/kernels/beta_timing.py --out {output} 'test/unit/alpha'"
        );
    }
}
