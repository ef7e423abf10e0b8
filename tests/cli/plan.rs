//! `prgate plan` on real repositories: every kind of change, every source of changed files,
//! untrusted diffs, and every kind of error.

mod estimate;

use crate::support::{
    MANIFEST, Repo, changed, git_in, plan_json, prgate, prgate_with_stdin, text, tiers,
};

/// Builds the standard repository, checks out a `pr` branch from main, lets `edit` change it,
/// commits, and returns the plan of `pr` against main.
fn plan_after(edit: impl FnOnce(&Repo)) -> serde_json::Value {
    let repo = Repo::standard();
    repo.branch("pr", "main");
    edit(&repo);
    repo.commit("pr");
    plan_json(repo.path(), &["--base", "main", "--head", "pr"])
}

#[test]
fn a_change_in_one_model_puts_that_model_on_full() {
    let plan = plan_after(|repo| {
        repo.write("pkg/models/alpha/layer.py", "# faster\n");
    });
    assert_eq!(tiers(&plan), "alpha full\nbeta none\nbeta_x none");
    assert_eq!(changed(&plan), "modified pkg/models/alpha/layer.py: model alpha");
    assert_eq!(plan["common"]["selected"], false);
    assert_eq!(plan["diff"]["trusted"], true);
    assert_eq!(plan["models"][0]["reasons"][0]["pattern"], "pkg/models/{model}/**");
}

#[test]
fn a_rename_across_models_counts_on_both_paths() {
    let plan = plan_after(|repo| {
        repo.git(&["mv", "pkg/models/alpha/layer.py", "pkg/models/beta/alpha_layer.py"]);
    });
    assert_eq!(tiers(&plan), "alpha full\nbeta full\nbeta_x none");
    assert_eq!(
        changed(&plan),
        "renamed pkg/models/beta/alpha_layer.py <- pkg/models/alpha/layer.py: model alpha, model beta"
    );
}

#[test]
fn a_deletion_counts_and_deleting_every_file_removes_the_model() {
    let plan = plan_after(|repo| {
        repo.git(&["rm", "-q", "test/kernels/test_beta_k1.py"]);
        repo.git(&["rm", "-q", "-r", "pkg/models/alpha", "test/unit/alpha"]);
        repo.git(&["rm", "-q", "test/kernels/test_alpha_k1.py", "test/e2e/alpha.toml"]);
    });
    assert_eq!(tiers(&plan), "alpha full removed\nbeta full\nbeta_x none");
}

#[test]
fn a_new_model_is_marked_new_and_runs_full() {
    let plan = plan_after(|repo| {
        repo.write("pkg/models/gamma/layer.py", "# gamma\n")
            .write("test/e2e/gamma.toml", "[server]\n");
    });
    assert_eq!(tiers(&plan), "alpha none\nbeta none\nbeta_x none\ngamma full new");
    assert_eq!(
        changed(&plan),
        "added pkg/models/gamma/layer.py: model gamma\nadded test/e2e/gamma.toml: model gamma"
    );
}

#[test]
fn partial_segment_patterns_take_the_longest_model_that_fits() {
    let plan = plan_after(|repo| {
        repo.write("test/kernels/test_beta_x_k1.py", "# changed\n");
    });
    assert_eq!(tiers(&plan), "alpha none\nbeta none\nbeta_x full");
}

#[test]
fn a_shared_change_puts_every_other_model_on_smoke_and_selects_common() {
    let plan = plan_after(|repo| {
        repo.write("pkg/common/guard.py", "def guard(): return 1\n")
            .write("pkg/models/beta/layer.py", "# b\n");
    });
    assert_eq!(tiers(&plan), "alpha smoke\nbeta full\nbeta_x smoke");
    assert_eq!(plan["common"]["selected"], true);
    assert_eq!(plan["common"]["reasons"][0]["path"], "pkg/common/guard.py");
    assert_eq!(plan["common"]["reasons"][0]["pattern"], "pkg/common/**");
    assert_eq!(plan["models"][0]["reasons"], serde_json::json!([{"kind": "shared-change"}]));
}

#[test]
fn a_docs_only_change_selects_nothing() {
    let plan = plan_after(|repo| {
        repo.write("docs/index.md", "# more docs\n").write("scripts/release.sh", "echo v2\n");
    });
    assert_eq!(tiers(&plan), "alpha none\nbeta none\nbeta_x none");
    assert_eq!(changed(&plan), "modified docs/index.md: ignored\nmodified scripts/release.sh: ");
    assert_eq!(plan["common"]["selected"], false);
}

#[test]
fn the_diff_is_three_dot_so_changes_on_base_are_not_blamed_on_the_pr() {
    let repo = Repo::standard();
    repo.branch("pr", "main").write("pkg/models/alpha/layer.py", "# pr\n");
    repo.commit("pr");
    repo.git(&["checkout", "-q", "main"]);
    repo.write("pkg/models/beta/layer.py", "# moved on\n").write("pkg/common/guard.py", "# base\n");
    repo.commit("main moves on");
    let plan = plan_json(repo.path(), &["--head", "pr"]);
    assert_eq!(tiers(&plan), "alpha full\nbeta none\nbeta_x none");
    assert_eq!(plan["base"]["ref"], "main");
    assert_ne!(plan["merge_base"], plan["base"]["sha"]);
}

#[test]
fn judging_files_that_moved_on_base_since_the_pr_branched_fail_the_base_moved_rule() {
    let repo = Repo::standard();
    repo.branch("pr", "main").write("pkg/models/alpha/layer.py", "# pr\n");
    repo.commit("pr");
    repo.git(&["checkout", "-q", "main"]);
    let base_moved = |plan: &serde_json::Value| {
        let rules = plan["rules"].as_array().cloned().unwrap_or_default();
        rules.into_iter().find(|rule| rule["name"] == "base-moved")
    };
    // Main moves on in code and in the recipe of a model the PR does not run: nothing that
    // judges the PR.
    repo.write("pkg/models/beta/layer.py", "# moved on\n").write("test/e2e/beta.toml", "# b\n");
    repo.commit("main moves on");
    let plan = plan_json(repo.path(), &["--base", "main", "--head", "pr"]);
    assert_eq!(base_moved(&plan), None, "{plan:#}");
    // Main changes the recipe of the model the PR runs, and the manifest: a PR that branched
    // before would be judged by the old ones.
    repo.write("test/e2e/alpha.toml", "[server]\n# stricter\n");
    repo.write("prgate.toml", &format!("{MANIFEST}\n# stricter\n"));
    repo.commit("main tightens alpha");
    let plan = plan_json(repo.path(), &["--base", "main", "--head", "pr"]);
    let rule = base_moved(&plan).expect("the base-moved rule");
    assert_eq!(rule["verdict"], "fail", "{rule:#}");
    let message = rule["findings"][0]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("prgate.toml, test/e2e/alpha.toml changed on the base branch since this PR branched from it (merge-base "),
        "{message}"
    );
    assert!(
        message.ends_with("update the branch (merge or rebase the base into it) and run again")
    );
    // Updated: main merged into the PR, the merge-base is main's tip, nothing moved.
    repo.git(&["checkout", "-q", "pr"]);
    repo.git(&["merge", "-q", "--no-edit", "main"]);
    let plan = plan_json(repo.path(), &["--base", "main", "--head", "pr"]);
    assert_eq!(base_moved(&plan), None, "{plan:#}");
}

#[test]
fn the_manifest_comes_from_the_base_side_not_the_pr() {
    let plan = plan_after(|repo| {
        // The PR tries to stop its own change from selecting anything.
        repo.write("prgate.toml", &MANIFEST.replace("ignore = [\"docs/**\"]", "ignore = [\"**\"]"));
        repo.write("pkg/models/alpha/layer.py", "# sneaky\n");
    });
    assert_eq!(tiers(&plan), "alpha full\nbeta none\nbeta_x none");
    assert_eq!(plan["manifest"]["commit"], plan["merge_base"]);
}

#[test]
fn worktree_adds_uncommitted_and_untracked_changes() {
    let repo = Repo::standard();
    repo.branch("topic", "main").write("pkg/models/alpha/layer.py", "# committed\n");
    repo.commit("topic");
    repo.write("pkg/models/beta/layer.py", "# uncommitted\n")
        .write("pkg/models/delta/new.py", "# untracked\n");
    repo.git(&["rm", "-q", "--cached", "test/e2e/beta_x.toml"]);

    let committed = plan_json(repo.path(), &[]);
    assert_eq!(tiers(&committed), "alpha full\nbeta none\nbeta_x none");
    assert_eq!(committed["head"]["worktree"], false);

    let preview = plan_json(repo.path(), &["--worktree"]);
    assert_eq!(tiers(&preview), "alpha full\nbeta full\nbeta_x full\ndelta full new");
    assert_eq!(preview["head"]["worktree"], true);
    assert_eq!(preview["diff"]["source"], "worktree");
}

#[test]
fn files_reads_a_list_instead_of_git() {
    let repo = Repo::standard();
    repo.branch("pr", "main");
    repo.commit("empty pr");
    let list = repo.path().join("files.txt");
    std::fs::write(&list, "pkg/models/beta/layer.py\ndocs/index.md\n").expect("write the list");

    let plan = plan_json(repo.path(), &["--head", "pr", "--files", list.to_str().expect("UTF-8")]);
    assert_eq!(tiers(&plan), "alpha none\nbeta full\nbeta_x none");
    assert_eq!(plan["diff"]["source"], "file-list");
    assert_eq!(
        changed(&plan),
        "unknown docs/index.md: ignored\nunknown pkg/models/beta/layer.py: model beta"
    );

    let piped = prgate_with_stdin(
        repo.path(),
        &["plan", "--format", "json", "--head", "pr", "--files", "-"],
        "R100\tpkg/models/alpha/a.py\tpkg/models/beta_x/a.py\n",
    );
    assert_eq!(piped.code, 0, "{}", piped.stderr);
    let plan: serde_json::Value = serde_json::from_str(&piped.stdout).expect("JSON");
    assert_eq!(tiers(&plan), "alpha full\nbeta none\nbeta_x full");
}

#[test]
fn a_truncated_file_list_falls_back_to_git() {
    let repo = Repo::standard();
    repo.branch("pr", "main")
        .write("pkg/models/alpha/layer.py", "# pr\n")
        .write("pkg/models/beta/layer.py", "# pr\n");
    repo.commit("pr");
    let plan = prgate_with_stdin(
        repo.path(),
        &["plan", "--format", "json", "--head", "pr", "--files", "-", "--files-truncated"],
        "pkg/models/alpha/layer.py\n",
    );
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    let plan: serde_json::Value = serde_json::from_str(&plan.stdout).expect("JSON");
    assert_eq!(tiers(&plan), "alpha full\nbeta full\nbeta_x none");
    assert_eq!(plan["diff"]["source"], "git");
    assert_eq!(plan["diff"]["trusted"], true);
    let warnings = plan["diff"]["warnings"].to_string();
    assert!(warnings.contains("truncated") && warnings.contains("read from git"), "{warnings}");
}

/// A clone of `pr` alone, one commit deep, that also fetched main one commit deep: git has
/// no merge-base for them.
fn shallow_clone(repo: &Repo) -> tempfile::TempDir {
    let clone = tempfile::tempdir().expect("a temporary directory");
    let url = format!("file://{}", repo.path().display());
    git_in(clone.path(), &["clone", "-q", "--depth", "1", "--branch", "pr", &url, "."]);
    git_in(clone.path(), &["fetch", "-q", "--depth", "1", "origin", "main:main"]);
    clone
}

#[test]
fn a_shallow_clone_without_a_merge_base_runs_everything_and_says_why() {
    let repo = Repo::standard();
    repo.branch("pr", "main").write("pkg/models/alpha/layer.py", "# pr\n");
    repo.commit("pr");
    repo.git(&["checkout", "-q", "main"]);
    repo.write("pkg/models/beta/layer.py", "# main moved\n");
    repo.commit("main moves on");
    let clone = shallow_clone(&repo);

    let plan = plan_json(clone.path(), &["--base", "main", "--head", "pr"]);
    assert_eq!(tiers(&plan), "alpha full\nbeta full\nbeta_x full");
    assert_eq!(plan["diff"]["trusted"], false);
    assert_eq!(plan["merge_base"], serde_json::Value::Null);
    assert_eq!(plan["common"]["selected"], true);
    assert_eq!(plan["changed"], serde_json::json!([]), "never a diff against the raw base");
    let why = text(&plan["models"][1]["reasons"][0]["detail"]);
    assert!(why.contains("no merge-base") && why.contains("shallow"), "{why}");

    let human = prgate(clone.path(), &["plan", "--base", "main", "--head", "pr"]);
    assert_eq!(human.code, 0, "{}", human.stderr);
    assert!(human.stdout.contains("THE DIFF CANNOT BE TRUSTED"), "{}", human.stdout);
}

#[test]
fn unrelated_histories_run_everything() {
    let repo = Repo::standard();
    repo.git(&["checkout", "-q", "--orphan", "other"]);
    repo.write("pkg/models/omega/layer.py", "# omega\n");
    repo.commit("unrelated");
    let plan = plan_json(repo.path(), &["--base", "main", "--head", "other"]);
    assert_eq!(plan["diff"]["trusted"], false);
    assert_eq!(
        tiers(&plan),
        "alpha full\nbeta full\nbeta_x full\nomega full",
        "no model is new without a merge-base"
    );
    let warnings = plan["diff"]["warnings"].to_string();
    assert!(warnings.contains("unrelated"), "{warnings}");
}

#[test]
fn the_default_base_is_the_remote_default_branch() {
    let upstream = Repo::new();
    upstream.write("prgate.toml", MANIFEST).write("pkg/models/alpha/a.py", "# a\n");
    upstream.commit("base");
    upstream.git(&["branch", "-m", "main", "trunk"]);
    let clone = tempfile::tempdir().expect("a temporary directory");
    let url = format!("file://{}", upstream.path().display());
    git_in(clone.path(), &["clone", "-q", &url, "."]);
    git_in(clone.path(), &["checkout", "-q", "-b", "topic"]);
    std::fs::write(clone.path().join("pkg/models/alpha/a.py"), "# topic\n").expect("write");
    git_in(clone.path(), &["commit", "-q", "-am", "topic"]);

    let plan = plan_json(clone.path(), &[]);
    assert_eq!(plan["base"]["ref"], "origin/trunk");
    assert_eq!(tiers(&plan), "alpha full");
}

/// Runs `prgate plan` in a repository whose main has `manifest` (or none) and asserts it fails
/// with exit code 2; returns stderr.
fn plan_error(manifest: Option<&str>) -> String {
    let repo = Repo::new();
    repo.write("pkg/models/alpha/a.py", "# a\n");
    if let Some(manifest) = manifest {
        repo.write("prgate.toml", manifest);
    }
    repo.commit("base");
    repo.branch("pr", "main").write("prgate.toml", MANIFEST);
    repo.commit("the PR adds or fixes the manifest");
    let run = prgate(repo.path(), &["plan", "--base", "main", "--head", "pr"]);
    assert_eq!(run.code, 2, "stdout: {}", run.stdout);
    assert!(run.stdout.is_empty(), "nothing on stdout on error: {}", run.stdout);
    run.stderr
}

#[test]
fn manifest_errors_name_the_file_the_key_and_the_value() {
    let stderr = plan_error(None);
    assert!(stderr.starts_with("error: prgate.toml is missing at merge-base "), "{stderr}");
    assert!(
        stderr.contains(
            "hint: prgate reads the manifest from the base side; the one this change adds"
        ),
        "{stderr}"
    );
    let kinds = [
        ("[scope\n", "TOML parse error"),
        ("[scope]\nmodels = []\n", "scope.models: is empty"),
        (
            "[scope]\nmodels = [\"t/test_{model}.py\"]\n",
            "no pattern has {model} as a whole path segment",
        ),
        (
            "[scope]\nmodels = [\"pkg/models/{model}/**\"]\nshared = [\"common/\"]\n",
            "scope.shared[0] = \"common/\": a pattern ending in '/' matches no file",
        ),
        ("[scope]\nmodels = [\"pkg/**/{model}/**\"]\n", "{model} right after '**' is ambiguous"),
        (
            "[scope]\nmodels = [\"pkg/models/{model}/**\"]\nignore = [\"[[:alpha:]]\"]\n",
            "POSIX character classes",
        ),
        (
            "[scope]\nmodels = [\"pkg/models/{model}/**\"]\nreadme = \"README.md\"\n",
            "scope.readme = \"README.md\"",
        ),
        (
            "[scope]\nmodels = [\"pkg/models/{model}/**\"]\n[gate.title]\nunknown-type = \"block\"\n",
            "gate.title.unknown-type: unknown variant `block`",
        ),
    ];
    for (manifest, expected) in kinds {
        let stderr = plan_error(Some(manifest));
        assert!(stderr.contains(expected), "{manifest}: {stderr}");
    }

    let stderr =
        plan_error(Some("[scope]\nmodels = [\"pkg/models/{model}/**\", \"test/{model\"]\n"));
    assert!(stderr.contains("prgate.toml at merge-base"), "{stderr}");
    assert!(stderr.contains("scope.models[1] = \"test/{model\""), "{stderr}");

    let stderr =
        plan_error(Some("[scope]\nmodels = [\"pkg/models/{model}/**\"]\nshard = [\"x\"]\n"));
    assert!(stderr.contains("unknown field `shard`"), "{stderr}");

    let stderr = plan_error(Some("[scope]\nmodels = [\"tests/**\"]\n"));
    assert!(
        stderr.contains("scope.models[0] = \"tests/**\": a models pattern needs {model}"),
        "{stderr}"
    );
}

#[test]
fn bad_refs_paths_and_file_lists_are_errors_that_name_them() {
    let repo = Repo::standard();
    let cases: [(&[&str], &str); 5] = [
        (
            &["plan", "--base", "no-such-branch"],
            "error: --base 'no-such-branch': no such commit in ",
        ),
        (&["plan", "--head", "v9.9"], "error: --head 'v9.9': no such commit in "),
        (&["plan", "--files", "missing.txt"], "error: reading the file list missing.txt: "),
        (&["plan", "--repo", "/"], "error: /: not inside a git repository"),
        (&["plan", "--files", "-", "--worktree"], "cannot be used with"),
    ];
    for (args, expected) in cases {
        let run = prgate(repo.path(), args);
        assert_eq!(run.code, 2, "{args:?}");
        assert!(run.stderr.contains(expected), "{args:?}: {}", run.stderr);
    }
    let no_main = Repo::new();
    no_main.write("prgate.toml", MANIFEST);
    no_main.commit("base");
    no_main.git(&["branch", "-m", "main", "develop"]);
    let run = prgate(no_main.path(), &["plan"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("hint: main is the default base; name another with --base"),
        "{}",
        run.stderr
    );

    let bad_list =
        prgate_with_stdin(repo.path(), &["plan", "--files", "-"], "ok.py\n/etc/passwd\n");
    assert_eq!(bad_list.code, 2);
    assert_eq!(
        bad_list.stderr,
        "error: the file list standard input: line 2: paths are relative to the repository root: \"/etc/passwd\"\n"
    );
}

#[test]
fn the_plan_is_deterministic_and_its_outputs_read_well() {
    let repo = Repo::standard();
    repo.branch("pr", "main");
    repo.write("pkg/models/alpha/layer.py", "# faster\n")
        .write("pkg/common/guard.py", "# shared\n");
    repo.git(&["mv", "test/unit/beta/test_layer.py", "test/unit/beta/test_renamed.py"]);
    repo.write("docs/index.md", "# docs 2\n").write("test/kernels/test_unknown_k1.py", "# ?\n");
    repo.commit("pr");
    let args = ["plan", "--base", "main", "--head", "pr"];
    let human = prgate(repo.path(), &args);
    assert_eq!(human.code, 0, "{}", human.stderr);
    assert_eq!(human.stdout, prgate(repo.path(), &args).stdout, "same input, same bytes");
    insta::assert_snapshot!("plan_human", human.stdout);
    let markdown =
        prgate(repo.path(), &["plan", "--base", "main", "--head", "pr", "--format", "markdown"]);
    insta::assert_snapshot!("plan_markdown", markdown.stdout);
    let json = prgate(repo.path(), &["plan", "--base", "main", "--head", "pr", "--format", "json"]);
    insta::assert_snapshot!("plan_json", json.stdout);
}

#[test]
fn hostile_paths_are_shown_escaped() {
    let plan_of = |format: &str| {
        let repo = Repo::standard();
        repo.branch("pr", "main");
        repo.write("pkg/models/alpha/evil\u{1b}[2J`|@admin<b>.py", "# x\n");
        repo.commit("pr");
        let run =
            prgate(repo.path(), &["plan", "--base", "main", "--head", "pr", "--format", format]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        run.stdout
    };
    let human = plan_of("human");
    assert!(!human.contains('\u{1b}'), "no raw escape on a terminal");
    assert!(human.contains("evil\\u{1b}[2J`|@admin<b>.py"), "{human}");
    let markdown = plan_of("markdown");
    // As code that breaks after each `/`, every character Markdown could act on a reference.
    assert!(
        markdown.contains(
            "<code>pkg/<wbr>models/<wbr>alpha/<wbr>evil&#92;u{1b}&#91;2J&#96;&#124;<wbr>&#64;admin&#60;b&#62;.py</code>"
        ),
        "{markdown}"
    );
    let json = plan_of("json");
    assert!(json.contains("evil\\u001b[2J`|@admin<b>.py"), "JSON keeps the exact path: {json}");
}

#[test]
fn the_help_points_to_the_manifest_reference() {
    let run = prgate(std::path::Path::new("."), &["plan", "--help"]);
    assert_eq!(run.code, 0);
    assert!(run.stdout.contains("docs/manifest.md"), "{}", run.stdout);
    assert!(run.stdout.contains("--worktree") && run.stdout.contains("--files"), "{}", run.stdout);
}

#[test]
fn an_edited_rename_is_found_by_similarity() {
    let body: String = (0..40).map(|n| format!("line {n} of a long enough file\n")).collect();
    let repo = Repo::standard();
    repo.write("pkg/models/alpha/big.py", &body);
    repo.commit("a file worth renaming");
    repo.branch("pr", "main");
    repo.git(&["mv", "pkg/models/alpha/big.py", "pkg/models/beta/big.py"]);
    repo.write("pkg/models/beta/big.py", &format!("{body}one more line\n"));
    repo.git(&["mv", "pkg/models/alpha/layer.py", "pkg/models/alpha/layer2.py"]);
    repo.commit("pr");
    let plan = plan_json(repo.path(), &["--base", "main", "--head", "pr"]);
    assert_eq!(
        changed(&plan),
        "renamed pkg/models/alpha/layer2.py <- pkg/models/alpha/layer.py: model alpha, model alpha\n\
         renamed pkg/models/beta/big.py <- pkg/models/alpha/big.py: model alpha, model beta"
    );
    assert_eq!(plan["diff"]["warnings"], serde_json::json!([]));
}

#[test]
fn past_the_pair_limit_edited_renames_are_listed_as_deleted_and_added() {
    let repo = Repo::standard();
    for n in 0..100 {
        repo.write(&format!("pkg/models/alpha/old_{n}.py"), &format!("# old file {n}\n"));
    }
    repo.commit("many files");
    repo.branch("pr", "main");
    repo.git(&["rm", "-q", "-r", "pkg/models/alpha"]);
    for n in 0..101 {
        repo.write(&format!("pkg/models/beta/new_{n}.py"), &format!("# new file {n}\n"));
    }
    // An exact rename is still found past the limit.
    repo.write("pkg/models/beta_x/moved.py", "# old file 7\n");
    repo.commit("pr");
    let plan = plan_json(repo.path(), &["--base", "main", "--head", "pr"]);
    assert_eq!(tiers(&plan), "alpha full\nbeta full\nbeta_x full");
    let warnings = plan["diff"]["warnings"].to_string();
    assert!(warnings.contains("101 added × 101 deleted files"), "{warnings}");
    let changed = changed(&plan);
    assert!(
        changed.contains("renamed pkg/models/beta_x/moved.py <- pkg/models/alpha/old_7.py"),
        "{changed}"
    );
    assert!(changed.contains("deleted pkg/models/alpha/layer.py: model alpha"), "{changed}");
}

#[test]
fn a_path_that_is_not_utf8_is_planned_and_reported() {
    use std::os::unix::ffi::OsStrExt as _;
    let repo = Repo::standard();
    repo.branch("pr", "main");
    let name = std::ffi::OsStr::from_bytes(b"pkg/models/alpha/caf\xe9.py");
    std::fs::write(repo.path().join(name), "# latin-1 name\n")
        .expect("write a file with a non-UTF-8 name");
    repo.commit("pr");
    let plan = plan_json(repo.path(), &["--base", "main", "--head", "pr"]);
    assert_eq!(tiers(&plan), "alpha full\nbeta none\nbeta_x none");
    assert_eq!(changed(&plan), "added pkg/models/alpha/caf\u{fffd}.py: model alpha");
    let warnings = plan["diff"]["warnings"].to_string();
    assert!(warnings.contains("is not UTF-8"), "{warnings}");
}

#[test]
fn git_name_status_output_can_be_piped_in_with_its_quoted_paths() {
    let repo = Repo::standard();
    repo.branch("pr", "main").write("pkg/models/alpha/f\u{ef}le.py", "# non-ASCII name\n");
    repo.git(&["mv", "pkg/models/beta/layer.py", "pkg/models/beta/l\u{e4}yer.py"]);
    repo.commit("pr");
    let listing = repo.git(&["diff", "--name-status", "main...pr"]);
    assert!(listing.contains("\"pkg/models/alpha/f\\303\\257le.py\""), "git quotes it: {listing}");
    let run = prgate_with_stdin(
        repo.path(),
        &["plan", "--format", "json", "--head", "pr", "--files", "-"],
        &listing,
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let plan: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(tiers(&plan), "alpha full\nbeta full\nbeta_x none");
    assert_eq!(
        changed(&plan),
        "added pkg/models/alpha/f\u{ef}le.py: model alpha\nrenamed pkg/models/beta/l\u{e4}yer.py <- pkg/models/beta/layer.py: model beta, model beta"
    );
    assert_eq!(plan["diff"]["warnings"], serde_json::json!([]));
}

#[test]
fn a_file_list_without_a_merge_base_is_used_but_cannot_say_what_is_new() {
    let repo = Repo::standard();
    repo.branch("pr", "main").write("pkg/models/alpha/layer.py", "# pr\n");
    repo.commit("pr");
    repo.git(&["checkout", "-q", "main"]);
    repo.write("pkg/models/delta/layer.py", "# main added a model\n");
    repo.commit("main moves on");
    let clone = shallow_clone(&repo);
    let run = prgate_with_stdin(
        clone.path(),
        &["plan", "--format", "json", "--base", "main", "--head", "pr", "--files", "-"],
        "pkg/models/alpha/layer.py\nnot/in/any/tree.py\n",
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let plan: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(plan["diff"]["trusted"], true, "the list is complete");
    assert_eq!(
        tiers(&plan),
        "alpha full\nbeta none\nbeta_x none\ndelta none",
        "delta is not blamed on the PR"
    );
    let warnings = format!("{} {}", plan["diff"]["warnings"], plan["warnings"]);
    assert!(
        warnings.contains("cannot tell which models this change adds or removes"),
        "{warnings}"
    );
    assert!(
        warnings.contains(
            "1 listed path(s) are in neither the base nor the head tree: not/in/any/tree.py"
        ),
        "{warnings}"
    );
}

#[test]
fn worktree_previews_only_the_checked_out_commit_and_sees_conflicts() {
    let repo = Repo::standard();
    repo.branch("topic", "main").write("pkg/models/beta/layer.py", "# topic\n");
    repo.commit("topic");
    repo.git(&["checkout", "-q", "main"]);
    let run = prgate(repo.path(), &["plan", "--head", "topic", "--worktree"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("--worktree previews the checked-out commit, and --head 'topic' is not it"),
        "{}",
        run.stderr
    );

    // A cherry-pick that conflicts leaves the file unmerged in the index.
    repo.branch("other", "main").write("pkg/models/beta/layer.py", "# other\n");
    repo.commit("other");
    let output = std::process::Command::new("git")
        .args(["cherry-pick", "topic"])
        .current_dir(repo.path())
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@x.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@x.invalid")
        .output()
        .expect("git runs");
    assert!(!output.status.success(), "the cherry-pick conflicts");
    let plan = plan_json(repo.path(), &["--base", "main", "--worktree"]);
    assert!(changed(&plan).contains("pkg/models/beta/layer.py: model beta"), "{}", changed(&plan));
    assert_eq!(tiers(&plan), "alpha none\nbeta full\nbeta_x none");
}

#[test]
fn errors_say_what_is_wrong_with_the_repository() {
    let empty = Repo::new();
    let cases: [(&std::path::Path, &[&str], &str); 3] = [
        (empty.path(), &["plan"], ": the repository has no commits yet"),
        (
            empty.path(),
            &["plan", "--repo", "/no/such/dir"],
            "error: /no/such/dir: no such directory",
        ),
        (empty.path(), &["plan", "--repo", "/"], "error: /: not inside a git repository"),
    ];
    for (dir, args, expected) in cases {
        let run = prgate(dir, args);
        assert_eq!(run.code, 2, "{args:?}");
        assert!(run.stderr.contains(expected), "{args:?}: {}", run.stderr);
    }
    let no_manifest = Repo::new();
    no_manifest.write("a.txt", "a\n");
    no_manifest.commit("base");
    let run = prgate(no_manifest.path(), &["plan"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("hint: add a prgate.toml to the base branch"), "{}", run.stderr);
    // A manifest that is a symbolic link is no manifest: a link's target is not a file's
    // content, and is never followed.
    let linked = Repo::new();
    linked.write("real.toml", "");
    std::os::unix::fs::symlink("real.toml", linked.path().join("prgate.toml")).expect("a link");
    linked.commit("base");
    let run = prgate(linked.path(), &["plan"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("hint: add a prgate.toml to the base branch"), "{}", run.stderr);
}

/// More exact renames than git's and libgit2's rename limit are still renames, found by
/// object id, and no warning calls them edited files (issue 25).
#[test]
fn more_than_a_thousand_exact_renames_are_all_renames() {
    let repo = Repo::standard();
    for n in 0..1_500 {
        repo.write(&format!("pkg/models/alpha/moved/k_{n:04}.py"), &format!("k = {n}\n"));
    }
    repo.commit("1,500 kernels");
    repo.branch("pr", "main");
    repo.git(&["mv", "pkg/models/alpha/moved", "pkg/models/alpha/kernels"]);
    repo.commit("pr");
    let plan = plan_json(repo.path(), &["--base", "main", "--head", "pr"]);
    let changes = plan["changed"].as_array().expect("a list of changes");
    let renamed = changes.iter().filter(|change| change["status"] == "renamed").count();
    assert_eq!(renamed, 1_500, "{:#}", plan["diff"]);
    assert_eq!(changes.len(), 1_500);
    assert_eq!(plan["diff"]["warnings"], serde_json::json!([]), "{:#}", plan["diff"]);
}
