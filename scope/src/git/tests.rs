//! The unit tests of `git.rs` that reach its private items (its errors, the walk's scope); the
//! plans it makes are tested in `plan/tests.rs` and by the CLI tests.

use super::{PlanRequest, WalkScope};
use crate::text::chain;

#[test]
fn a_git_error_says_its_cause_once() {
    // The cause is the source, not also in the message: `{:#}` says it once.
    let error =
        super::git_error("reading the tree of h1".to_owned(), git2::Error::from_str("boom"));
    assert_eq!(chain(&error), "reading the tree of h1: boom");
    assert!(std::error::Error::source(&error).is_some());
    let io = super::ScopeError::Io { path: "repo/x".into(), source: std::io::Error::other("gone") };
    assert_eq!(chain(&io), "reading repo/x: gone");
    assert!(std::error::Error::source(&io).is_some());
}

#[test]
fn a_pinned_run_plans_the_listed_paths_between_its_commits() {
    let paths = ["models/a.py".to_owned(), "docs/b.md".to_owned()];
    let request = PlanRequest::pinned(std::path::Path::new("repo"), ("b1", "h1"), &paths, true)
        .expect("a file list");
    assert_eq!((request.base.as_deref(), request.head.as_deref()), (Some("b1"), Some("h1")));
    assert!(!request.worktree);
    let files = request.files.expect("the listed files");
    assert!(files.truncated);
    let listed: Vec<&str> = files.changes.iter().map(|change| change.path.as_str()).collect();
    assert_eq!(listed, ["models/a.py", "docs/b.md"]);
}

#[test]
fn a_walk_enters_only_the_folders_on_the_way_to_or_inside_a_prefix() {
    let scope = WalkScope::Prefixes(vec!["sgl/models/".to_owned(), "test/unit/mk_".to_owned()]);
    let table = [
        ("sgl/", true),
        ("sgl/models/", true),
        ("sgl/models/llama/", true),
        ("sgl/models/llama/kernels/", true),
        ("sgl/common/", false),
        ("test/", true),
        ("test/unit/", true),
        ("test/unit/mk_a/", true),
        ("test/unit/other/", false),
        ("benchmarks/", false),
        ("sgl-models/", false),
    ];
    for (folder, enters) in table {
        assert_eq!(scope.enters(folder.as_bytes()), enters, "{folder}");
    }
}

#[test]
fn an_empty_prefix_and_everything_enter_every_folder() {
    for scope in [WalkScope::Prefixes(vec![String::new()]), WalkScope::Everything] {
        assert!(scope.enters(b"benchmarks/suite/"), "{scope:?}");
    }
    assert!(!WalkScope::Prefixes(Vec::new()).enters(b"models/"));
}
