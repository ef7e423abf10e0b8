//! The CODEOWNERS facts of `prgate plan --format json` on real repositories: every kind of
//! line change, the file deleted, moved and shadowed, invalid lines, and the facts still
//! computed from the trees when the diff is untrusted or the changed files come from a list.

use crate::support::{MANIFEST, Repo, plan_json, prgate_with_stdin, text};

/// The CODEOWNERS file of the base branch: everyone's default, then one owner per model.
const CODEOWNERS: &str = "\
# Owners of the packages.
* @org/core
/pkg/models/alpha/ @alpha-owner
/pkg/models/beta/ @beta-owner
/test/unit/beta/ @beta-owner
";

/// The standard repository with [`CODEOWNERS`] at `.github/CODEOWNERS` on main.
fn repo_with_codeowners() -> Repo {
    let repo = Repo::standard();
    repo.write(".github/CODEOWNERS", CODEOWNERS);
    repo.commit("code owners");
    repo
}

/// The `codeowners` facts of a `pr` branch from main that `edit` changed.
fn facts_after(edit: impl FnOnce(&Repo)) -> serde_json::Value {
    let repo = repo_with_codeowners();
    repo.branch("pr", "main");
    edit(&repo);
    repo.commit("pr");
    plan_json(repo.path(), &["--base", "main", "--head", "pr"])["codeowners"].clone()
}

/// Every line change as `kind base→head: owner changes (total) [new models]`, one a line.
fn line_changes(facts: &serde_json::Value) -> String {
    let number =
        |value: &serde_json::Value| value.as_u64().map_or("-".to_owned(), |n| n.to_string());
    facts["line_changes"]
        .as_array()
        .expect("line_changes")
        .iter()
        .map(|change| {
            let mut line = format!(
                "{} {}→{}: {} owner changes",
                text(&change["kind"]),
                number(&change["base_line"]),
                number(&change["head_line"]),
                change["owner_changes_total"]
            );
            let new_models = change["new_models_only"].as_array().expect("new_models_only");
            if !new_models.is_empty() {
                let names: Vec<&str> = new_models.iter().map(text).collect();
                line.push_str(&format!(", new models only: {}", names.join(" ")));
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every file change as `kind path`, one a line.
fn file_changes(facts: &serde_json::Value) -> String {
    facts["file_changes"]
        .as_array()
        .expect("file_changes")
        .iter()
        .map(|change| format!("{} {}", text(&change["kind"]), text(&change["path"])))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The owner changes of one line change as `path: before → after`, one a line.
fn owner_changes(change: &serde_json::Value) -> String {
    let owners = |list: &serde_json::Value| {
        list.as_array().expect("owners").iter().map(text).collect::<Vec<_>>().join(" ")
    };
    change["owner_changes"]
        .as_array()
        .expect("owner_changes")
        .iter()
        .map(|owner| {
            format!(
                "{}: {} → {}",
                text(&owner["path"]),
                owners(&owner["before"]),
                owners(&owner["after"])
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn an_untouched_codeowners_file_gives_no_changes() {
    let facts = facts_after(|repo| {
        repo.write("pkg/models/alpha/layer.py", "# faster\n");
    });
    assert_eq!(facts["path"], ".github/CODEOWNERS");
    assert_eq!((facts["in_base"].clone(), facts["in_head"].clone()), (true.into(), true.into()));
    assert_eq!(facts["head_path"], ".github/CODEOWNERS");
    assert_eq!(file_changes(&facts), "");
    assert_eq!(line_changes(&facts), "");
    assert_eq!(facts["invalid_lines"], serde_json::json!([]));
}

#[test]
fn a_modified_owner_line_lists_the_files_that_change_hands() {
    let facts = facts_after(|repo| {
        repo.write(
            ".github/CODEOWNERS",
            &CODEOWNERS.replace("/pkg/models/alpha/ @alpha-owner", "/pkg/models/alpha/ @mallory"),
        );
    });
    assert_eq!(line_changes(&facts), "modified 3→3: 2 owner changes");
    let change = &facts["line_changes"][0];
    assert_eq!(change["base_text"], "/pkg/models/alpha/ @alpha-owner");
    assert_eq!(change["head_text"], "/pkg/models/alpha/ @mallory");
    assert_eq!(
        owner_changes(change),
        "pkg/models/alpha/README.md: @alpha-owner → @mallory\n\
         pkg/models/alpha/layer.py: @alpha-owner → @mallory"
    );
}

#[test]
fn a_removed_line_hands_its_files_to_the_rule_before_it() {
    let facts = facts_after(|repo| {
        repo.write(".github/CODEOWNERS", &CODEOWNERS.replace("/test/unit/beta/ @beta-owner\n", ""));
    });
    assert_eq!(line_changes(&facts), "removed 5→-: 1 owner changes");
    assert_eq!(
        owner_changes(&facts["line_changes"][0]),
        "test/unit/beta/test_layer.py: @beta-owner → @org/core"
    );
}

#[test]
fn a_reordered_line_is_reordered_not_removed_and_added() {
    let facts = facts_after(|repo| {
        repo.write(
            ".github/CODEOWNERS",
            "# Owners of the packages.\n/pkg/models/alpha/ @alpha-owner\n* @org/core\n\
             /pkg/models/beta/ @beta-owner\n/test/unit/beta/ @beta-owner\n",
        );
    });
    assert_eq!(line_changes(&facts), "reordered 3→2: 2 owner changes");
    assert_eq!(
        owner_changes(&facts["line_changes"][0]),
        "pkg/models/alpha/README.md: @alpha-owner → @org/core\n\
         pkg/models/alpha/layer.py: @alpha-owner → @org/core"
    );
}

#[test]
fn an_added_catch_all_changes_the_owners_of_every_base_file() {
    let facts = facts_after(|repo| {
        repo.write(".github/CODEOWNERS", &format!("{CODEOWNERS}* @someone\n"));
    });
    // Every file of the base tree: 6 shared ones, 5 per model, and CODEOWNERS itself.
    assert_eq!(line_changes(&facts), "added -→6: 22 owner changes");
    let change = &facts["line_changes"][0];
    assert_eq!(change["owner_changes"].as_array().expect("a list").len(), 20, "20 listed");
    assert_eq!(change["owner_changes"][0]["path"], ".github/CODEOWNERS");
    assert_eq!(change["owner_changes"][0]["after"], serde_json::json!(["@someone"]));
}

#[test]
fn an_added_line_that_owns_only_a_new_model_says_so() {
    let facts = facts_after(|repo| {
        repo.write("pkg/models/gamma/layer.py", "# gamma\n")
            .write("test/unit/gamma/test_layer.py", "def test(): pass\n")
            .write(
                ".github/CODEOWNERS",
                &format!(
                    "{CODEOWNERS}/pkg/models/gamma/ @gamma-owner\n/test/unit/gamma/ @gamma-owner\n"
                ),
            );
    });
    assert_eq!(
        line_changes(&facts),
        "added -→6: 0 owner changes, new models only: gamma\n\
         added -→7: 0 owner changes, new models only: gamma"
    );

    // A line for new files of a model that is not new is not one.
    let facts = facts_after(|repo| {
        repo.write("pkg/models/alpha/extra.py", "# more alpha\n")
            .write(".github/CODEOWNERS", &format!("{CODEOWNERS}/pkg/models/alpha/extra.py @x\n"));
    });
    assert_eq!(line_changes(&facts), "added -→6: 0 owner changes");
}

#[test]
fn comment_and_blank_line_edits_are_only_that() {
    let facts = facts_after(|repo| {
        repo.write(
            ".github/CODEOWNERS",
            &CODEOWNERS
                .replace("# Owners of the packages.", "# Who owns what.\n")
                .replace("* @org/core", "* @org/core # the default"),
        );
    });
    assert_eq!(
        line_changes(&facts),
        "comment-or-blank 2→3: 0 owner changes\n\
         comment-or-blank 1→1: 0 owner changes\n\
         comment-or-blank -→2: 0 owner changes"
    );
}

#[test]
fn a_deleted_codeowners_file_is_a_file_change() {
    let facts = facts_after(|repo| {
        repo.git(&["rm", "-q", ".github/CODEOWNERS"]);
    });
    assert_eq!(file_changes(&facts), "deleted .github/CODEOWNERS");
    assert_eq!(facts["in_head"], false);
    assert_eq!(facts["head_path"], serde_json::Value::Null);
    assert_eq!(
        line_changes(&facts),
        "removed 2→-: 22 owner changes\n\
         removed 3→-: 2 owner changes\n\
         removed 4→-: 2 owner changes\n\
         removed 5→-: 1 owner changes\n\
         comment-or-blank 1→-: 0 owner changes"
    );
}

#[test]
fn a_renamed_codeowners_file_is_moved() {
    let facts = facts_after(|repo| {
        repo.git(&["mv", ".github/CODEOWNERS", "CODEOWNERS"]);
    });
    assert_eq!(file_changes(&facts), "moved CODEOWNERS");
    assert_eq!(facts["head_path"], "CODEOWNERS");
    assert_eq!(line_changes(&facts), "", "the same rules");
    let detail = text(&facts["file_changes"][0]["detail"]);
    assert!(detail.contains("renamed to CODEOWNERS"), "{detail}");
}

#[test]
fn a_new_codeowners_file_that_github_reads_first_shadows_the_configured_one() {
    let repo = Repo::standard();
    repo.write("prgate.toml", &MANIFEST.replace("\".github/CODEOWNERS\"", "\"CODEOWNERS\""))
        .write("CODEOWNERS", CODEOWNERS);
    repo.commit("code owners at the root");
    repo.branch("pr", "main").write(".github/CODEOWNERS", "* @mallory\n");
    repo.commit("pr");
    let facts = &plan_json(repo.path(), &["--base", "main", "--head", "pr"])["codeowners"];
    assert_eq!(facts["path"], "CODEOWNERS");
    assert_eq!(file_changes(facts), "shadowed .github/CODEOWNERS");
    let detail = text(&facts["file_changes"][0]["detail"]);
    assert!(detail.contains("GitHub reads before CODEOWNERS"), "{detail}");
    assert_eq!(line_changes(facts), "", "CODEOWNERS itself is unchanged");
}

#[test]
fn invalid_lines_are_listed_with_why() {
    let facts = facts_after(|repo| {
        repo.write(".github/CODEOWNERS", &format!("{CODEOWNERS}!foo @x\n[ab].py @x\n"));
    });
    assert_eq!(line_changes(&facts), "added -→6: 0 owner changes\nadded -→7: 0 owner changes");
    assert_eq!(
        facts["invalid_lines"],
        serde_json::json!([
            { "line": 6, "text": "!foo @x",
              "problem": "negation ('!') is not supported in CODEOWNERS" },
            { "line": 7, "text": "[ab].py @x",
              "problem": "character ranges ('[...]') are not supported in CODEOWNERS" }
        ])
    );
}

#[test]
fn the_facts_come_from_the_trees_whatever_the_changed_files_say() {
    let repo = repo_with_codeowners();
    repo.branch("pr", "main").write(".github/CODEOWNERS", &format!("{CODEOWNERS}* @someone\n"));
    repo.commit("pr");

    // A file list that does not mention CODEOWNERS.
    let run = prgate_with_stdin(
        repo.path(),
        &["plan", "--format", "json", "--base", "main", "--head", "pr", "--files", "-"],
        "pkg/models/alpha/layer.py\n",
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let plan: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(line_changes(&plan["codeowners"]), "added -→6: 22 owner changes");

    // Unrelated histories: the base tip against head, for the policy to judge.
    repo.git(&["checkout", "-q", "--orphan", "other"]);
    repo.write(".github/CODEOWNERS", "* @mallory\n");
    repo.commit("unrelated");
    let plan = plan_json(repo.path(), &["--base", "main", "--head", "other"]);
    assert_eq!(plan["diff"]["trusted"], false);
    let lines = line_changes(&plan["codeowners"]);
    assert!(lines.contains("modified 2→1: "), "{lines}");
}

#[test]
fn worktree_reads_the_uncommitted_codeowners_file() {
    let repo = repo_with_codeowners();
    repo.branch("topic", "main");
    repo.write(".github/CODEOWNERS", &CODEOWNERS.replace("@beta-owner", "@mallory"));
    let committed = plan_json(repo.path(), &["--base", "main"]);
    assert_eq!(line_changes(&committed["codeowners"]), "");
    let preview = plan_json(repo.path(), &["--base", "main", "--worktree"]);
    assert_eq!(
        line_changes(&preview["codeowners"]),
        "modified 4→4: 2 owner changes\nmodified 5→5: 1 owner changes"
    );
}
