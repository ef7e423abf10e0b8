//! Tests of CODEOWNERS parsing, GitHub's matching rules, and the facts of an edit: tables of
//! inputs and what they give, and the parse → print → parse round-trip.

use proptest::prelude::*;

use super::*;
use crate::manifest::Manifest;
use crate::plan::{ModelPlan, Tier};

/// Shows how every line of `text` parses, one a line.
fn parsed(text: &str) -> String {
    Codeowners::parse(text)
        .lines()
        .iter()
        .map(|line| match line {
            Line::Blank => "blank".to_owned(),
            Line::Comment(text) => format!("comment {text}"),
            Line::Rule(rule) => {
                let mut shown =
                    format!("rule {} -> [{}]", rule.pattern().text(), rule.owners().join(" "));
                if let Some(comment) = rule.comment() {
                    shown.push_str(&format!(" {comment}"));
                }
                shown
            }
            Line::Invalid { text, problem } => format!("invalid {text}: {problem}"),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn check_parse(cases: &[(&str, &str)]) {
    for (input, expected) in cases {
        assert_eq!(parsed(input), *expected, "input {input:?}");
    }
}

/// Checks who owns each path under `file`: the owners joined by spaces, `(none)` when the
/// deciding rule has no owners, `-` when no rule matches.
fn check_owners(file: &str, cases: &[(&str, &str)]) {
    let codeowners = Codeowners::parse(file);
    for (path, expected) in cases {
        let owners = match codeowners.owners_of(path) {
            None => "-".to_owned(),
            Some([]) => "(none)".to_owned(),
            Some(owners) => owners.join(" "),
        };
        assert_eq!(owners, *expected, "{path} under\n{file}");
    }
}

#[test]
fn lines_are_comments_blanks_rules_or_invalid() {
    check_parse(&[
        ("# This is a comment.", "comment # This is a comment."),
        ("   ", "blank"),
        ("", ""),
        ("*       @global-owner1 @global-owner2", "rule * -> [@global-owner1 @global-owner2]"),
        (
            "*.js    @js-owner #This is an inline comment.",
            "rule *.js -> [@js-owner] #This is an inline comment.",
        ),
        ("*.go docs@example.com", "rule *.go -> [docs@example.com]"),
        ("*.txt @octo-org/octocats", "rule *.txt -> [@octo-org/octocats]"),
        ("/apps/github", "rule /apps/github -> []"),
        ("/apps/github # nobody", "rule /apps/github -> [] # nobody"),
        ("a#b @x", "rule a#b -> [@x]"),
        ("\\#notes.md @x", "rule \\#notes.md -> [@x]"),
        ("docs/my\\ file.md\t@x\r", "rule docs/my\\ file.md -> [@x]"),
        ("  *.rs @x  ", "rule *.rs -> [@x]"),
        ("# one\n\n*.rs @x", "comment # one\nblank\nrule *.rs -> [@x]"),
    ]);
}

#[test]
fn what_github_does_not_support_is_an_invalid_line() {
    check_parse(&[
        ("!foo @x", "invalid !foo @x: negation ('!') is not supported in CODEOWNERS"),
        (
            "[ab].py @x",
            "invalid [ab].py @x: character ranges ('[...]') are not supported in CODEOWNERS",
        ),
        (
            "src/test_[0-9].py @x",
            "invalid src/test_[0-9].py @x: character ranges ('[...]') are not supported in \
             CODEOWNERS",
        ),
        (
            "*.py octocat",
            "invalid *.py octocat: 'octocat' is not an owner: owners are @user, @org/team or an \
             email address",
        ),
        (
            "*.py @x @org/team/sub",
            "invalid *.py @x @org/team/sub: '@org/team/sub' is not an owner: owners are @user, \
             @org/team or an email address",
        ),
        (
            "*.py @",
            "invalid *.py @: '@' is not an owner: owners are @user, @org/team or an email address",
        ),
        (
            "*.py a@b",
            "invalid *.py a@b: 'a@b' is not an owner: owners are @user, @org/team or an email \
             address",
        ),
        ("/ @x", "invalid / @x: the pattern '/' matches nothing; '*' matches every file"),
        ("a\\", "invalid a\\: bad pattern: dangling '\\'"),
        ("\\!foo @x", "rule \\!foo -> [@x]"),
        ("\\[ab].py @x", "rule \\[ab].py -> [@x]"),
    ]);
}

#[test]
fn a_pattern_longer_than_a_path_is_an_invalid_line_not_a_panic() {
    assert_eq!(MAX_PATTERN_BYTES, 4096);
    let longest = "a".repeat(MAX_PATTERN_BYTES);
    check_parse(&[(&format!("{longest} @x"), &format!("rule {longest} -> [@x]"))]);
    for length in [MAX_PATTERN_BYTES + 1, 1_000_000] {
        let codeowners =
            Codeowners::parse(&format!("{} @x\n*.py @y\n", "a*".repeat(length / 2 + 1)));
        let invalid = codeowners.invalid_lines();
        assert_eq!(invalid.len(), 1, "{length}");
        assert_eq!(
            invalid[0].problem,
            format!(
                "the pattern is {} bytes, more than the 4096 a pattern may have",
                2 * (length / 2 + 1)
            )
        );
        assert_eq!(codeowners.owners_of("x.py"), Some(&["@y".to_owned()][..]));
    }
}

/// Every example of GitHub's "Example of a CODEOWNERS file", each on its own so that a later
/// example does not hide an earlier one.
#[test]
fn githubs_examples_match_as_github_documents() {
    check_owners(
        "*       @global-owner1 @global-owner2",
        &[
            ("README.md", "@global-owner1 @global-owner2"),
            ("a/b/c.rs", "@global-owner1 @global-owner2"),
        ],
    );
    check_owners(
        "*       @global-owner1 @global-owner2\n*.js    @js-owner #This is an inline comment.",
        &[
            ("app.js", "@js-owner"),
            ("src/web/app.js", "@js-owner"),
            ("app.jsx", "@global-owner1 @global-owner2"),
        ],
    );
    check_owners(
        "*.go docs@example.com",
        &[("main.go", "docs@example.com"), ("cmd/x/main.go", "docs@example.com")],
    );
    check_owners(
        "*.txt @octo-org/octocats",
        &[("a/notes.txt", "@octo-org/octocats"), ("a.md", "-")],
    );
    check_owners(
        "/build/logs/ @doctocat",
        &[
            ("build/logs/a.log", "@doctocat"),
            ("build/logs/2024/01/a.log", "@doctocat"),
            ("build/logs", "-"),
            ("src/build/logs/a.log", "-"),
            ("build/logsx/a.log", "-"),
        ],
    );
    check_owners(
        "docs/*  docs@example.com",
        &[
            ("docs/getting-started.md", "docs@example.com"),
            ("docs/build-app/troubleshooting.md", "-"),
            ("src/docs/a.md", "-"),
        ],
    );
    check_owners(
        "apps/ @octocat",
        &[
            ("apps/a.rb", "@octocat"),
            ("apps/x/y.rb", "@octocat"),
            ("deeply/nested/apps/a.rb", "@octocat"),
            ("apps", "-"),
            ("myapps/a.rb", "-"),
        ],
    );
    check_owners(
        "/docs/ @doctocat",
        &[("docs/a.md", "@doctocat"), ("docs/x/y.md", "@doctocat"), ("src/docs/a.md", "-")],
    );
    check_owners(
        "/scripts/ @doctocat @octocat",
        &[("scripts/a.sh", "@doctocat @octocat"), ("scripts/ci/b.sh", "@doctocat @octocat")],
    );
    check_owners(
        "**/logs @octocat",
        &[
            ("build/logs/a.log", "@octocat"),
            ("scripts/logs/a.log", "@octocat"),
            ("deeply/nested/logs/x/a.log", "@octocat"),
            ("logs/a.log", "@octocat"),
            ("logs", "@octocat"),
            ("build/logsx", "-"),
        ],
    );
    check_owners(
        "/apps/ @octocat\n/apps/github",
        &[("apps/a.rb", "@octocat"), ("apps/github/x.rb", "(none)"), ("apps/github", "(none)")],
    );
    check_owners(
        "/apps/ @octocat\n/apps/github @doctocat",
        &[
            ("apps/a.rb", "@octocat"),
            ("apps/github/x.rb", "@doctocat"),
            ("apps/githubx", "@octocat"),
        ],
    );
}

#[test]
fn the_last_matching_rule_wins_and_globs_follow_gitignore() {
    check_owners("* @a\n*.js @b", &[("x.js", "@b"), ("x.py", "@a")]);
    check_owners("*.js @b\n* @a", &[("x.js", "@a")]);
    check_owners("*.js @b\n!x.js @c\n[x].js @d", &[("x.js", "@b")]);
    check_owners(
        "src/*.rs @a\nsrc/**/mod.rs @b\n/*.toml @c\n?.md @d",
        &[
            ("src/lib.rs", "@a"),
            ("src/deep/lib.rs", "-"),
            ("src/mod.rs", "@b"),
            ("src/x/y/mod.rs", "@b"),
            ("Cargo.toml", "@c"),
            ("sub/Cargo.toml", "-"),
            ("a.md", "@d"),
            ("x/b.md", "@d"),
            ("ab.md", "-"),
        ],
    );
    check_owners(
        "\\#notes.md @a\ndocs/my\\ file.md @b\n{a,b}.txt @c\nfoo**bar @d\nweb/ @e",
        &[
            ("#notes.md", "@a"),
            ("docs/my file.md", "@b"),
            ("{a,b}.txt", "@c"),
            ("a.txt", "-"),
            ("fooXbar", "@d"),
            ("web/x/y.html", "@e"),
            ("web", "-"),
        ],
    );
    check_owners("Docs/ @a", &[("docs/x.md", "-"), ("Docs/x.md", "@a")]);
    check_owners("", &[("a", "-")]);
}

#[test]
fn printing_writes_rules_with_single_spaces_and_keeps_the_rest() {
    let text = "# owners\n\n*.js    @a   @b #inline\n!bad @x\n  /apps/github\t\n";
    assert_eq!(
        Codeowners::parse(text).to_string(),
        "# owners\n\n*.js @a @b #inline\n!bad @x\n/apps/github\n"
    );
}

/// One line of a CODEOWNERS file built from parts that exercise the parser.
fn arbitrary_line() -> impl Strategy<Value = String> {
    let pattern = prop::collection::vec(
        prop::sample::select(vec![
            "a", "b.py", "*", "**", "/", "?", "\\#", "\\ ", "#", "!", "[x]", "\\[", "{", "}", ",",
            "\\", ".", "docs", "@",
        ]),
        0..6,
    )
    .prop_map(|parts| parts.concat());
    let owner = prop::sample::select(vec![
        "@user",
        "@org/team",
        "me@example.com",
        "bad",
        "@a/b/c",
        "@",
        "#c",
        "x@y",
        "@x_y-z",
    ]);
    let space = prop::sample::select(vec![" ", "  ", "\t", " \t "]);
    (
        space.clone(),
        pattern,
        prop::collection::vec((space.clone(), owner), 0..4),
        prop::option::of("#[ a-z#]{0,8}"),
        space,
    )
        .prop_map(|(lead, pattern, owners, comment, trail)| {
            let mut line = format!("{lead}{pattern}");
            for (space, owner) in owners {
                line.push_str(space);
                line.push_str(owner);
            }
            if let Some(comment) = comment {
                line.push(' ');
                line.push_str(&comment);
            }
            line.push_str(trail);
            line
        })
}

proptest! {
    #[test]
    fn parse_print_parse_gives_the_same_lines(lines in prop::collection::vec(arbitrary_line(), 0..12)) {
        let text = lines.join("\n");
        let first = Codeowners::parse(&text);
        let printed = first.to_string();
        let second = Codeowners::parse(&printed);
        prop_assert_eq!(first.lines(), second.lines(), "printed:\n{}", printed);
        prop_assert_eq!(printed, second.to_string());
    }
}

const MANIFEST: &str = r#"
[scope]
models = ["pkg/models/{model}/**", "test/unit/{model}/**"]
codeowners = "CODEOWNERS"
"#;

/// The base tree of the facts tests.
const BASE_FILES: &[&str] = &[
    "README.md",
    "pkg/common/guard.py",
    "pkg/models/alpha/layer.py",
    "pkg/models/alpha/README.md",
    "pkg/models/beta/layer.py",
    "test/unit/alpha/test_layer.py",
];

/// The files the tests' head adds: a new model, gamma, and a file of alpha.
const HEAD_ONLY_FILES: &[&str] =
    &["pkg/models/gamma/layer.py", "test/unit/gamma/test_layer.py", "pkg/models/alpha/new.py"];

fn models() -> Vec<ModelPlan> {
    let model = |name: &str, new: bool| ModelPlan {
        name: name.to_owned(),
        tier: Tier::Full,
        new,
        removed: false,
        renamed_from: None,
        renamed_to: None,
        readme: None,
        reasons: Vec::new(),
    };
    vec![model("alpha", false), model("beta", false), model("gamma", true)]
}

/// The facts of going from the `base` files to the `head` files (location → text), rendered
/// one fact a line.
fn facts(base: &[(&str, &str)], head: &[(&str, &str)], renamed_to: Option<&str>) -> String {
    let texts = CodeownersTexts {
        path: "CODEOWNERS".to_owned(),
        base: base.iter().map(|(path, text)| ((*path).to_owned(), (*text).to_owned())).collect(),
        head: head.iter().map(|(path, text)| ((*path).to_owned(), (*text).to_owned())).collect(),
        renamed_to: renamed_to.map(str::to_owned),
    };
    let manifest = Manifest::parse(MANIFEST, "prgate.toml").expect("the test manifest parses");
    let mut builder = FactsBuilder::new(&texts);
    for path in BASE_FILES {
        builder.add_base_file(path);
    }
    let facts =
        builder.finish(HEAD_ONLY_FILES.iter().copied(), &NewModels::new(&manifest, &models()));
    render(&facts)
}

fn render(facts: &CodeownersFacts) -> String {
    let mut out = vec![format!(
        "{} base={} head={} compared-with={}",
        facts.path,
        facts.in_base,
        facts.in_head,
        facts.head_path.as_deref().unwrap_or("-")
    )];
    for change in &facts.file_changes {
        out.push(format!("file {:?} {}: {}", change.kind, change.path, change.detail));
    }
    for change in &facts.line_changes {
        let side = |line: Option<usize>, text: &Option<String>| match (line, text) {
            (Some(line), Some(text)) => format!("{line}:{text}"),
            _ => "-".to_owned(),
        };
        let mut shown = format!(
            "line {:?} {} => {}",
            change.kind,
            side(change.base_line, &change.base_text),
            side(change.head_line, &change.head_text)
        );
        if change.owner_changes_total > 0 {
            let listed: Vec<String> = change
                .owner_changes
                .iter()
                .map(|owner| {
                    format!(
                        "{} [{}]->[{}]",
                        owner.path,
                        owner.before.join(" "),
                        owner.after.join(" ")
                    )
                })
                .collect();
            shown.push_str(&format!(
                " | {} owner changes: {}",
                change.owner_changes_total,
                listed.join(", ")
            ));
        }
        if !change.new_models_only.is_empty() {
            shown.push_str(&format!(" | new models only: {}", change.new_models_only.join(" ")));
        }
        out.push(shown);
    }
    for invalid in &facts.invalid_lines {
        out.push(format!("invalid {}:{}: {}", invalid.line, invalid.text, invalid.problem));
    }
    out.join("\n")
}

const BASE: &str =
    "# owners\n* @core\n/pkg/models/alpha/ @alpha-team\n/pkg/models/beta/ @beta-team\n";

#[test]
fn line_changes_say_what_changed_and_whose_files_move() {
    let cases: &[(&str, &str, &str)] = &[
        ("nothing changed", BASE, "CODEOWNERS base=true head=true compared-with=CODEOWNERS"),
        (
            "an owner line modified",
            "# owners\n* @core\n/pkg/models/alpha/ @mallory\n/pkg/models/beta/ @beta-team\n",
            "CODEOWNERS base=true head=true compared-with=CODEOWNERS\n\
             line Modified 3:/pkg/models/alpha/ @alpha-team => 3:/pkg/models/alpha/ @mallory | 2 owner changes: pkg/models/alpha/README.md [@alpha-team]->[@mallory], pkg/models/alpha/layer.py [@alpha-team]->[@mallory]",
        ),
        (
            "a line removed",
            "# owners\n* @core\n/pkg/models/beta/ @beta-team\n",
            "CODEOWNERS base=true head=true compared-with=CODEOWNERS\n\
             line Removed 3:/pkg/models/alpha/ @alpha-team => - | 2 owner changes: pkg/models/alpha/README.md [@alpha-team]->[@core], pkg/models/alpha/layer.py [@alpha-team]->[@core]",
        ),
        (
            "a line reordered",
            "# owners\n/pkg/models/alpha/ @alpha-team\n* @core\n/pkg/models/beta/ @beta-team\n",
            "CODEOWNERS base=true head=true compared-with=CODEOWNERS\n\
             line Reordered 3:/pkg/models/alpha/ @alpha-team => 2:/pkg/models/alpha/ @alpha-team | 2 owner changes: pkg/models/alpha/README.md [@alpha-team]->[@core], pkg/models/alpha/layer.py [@alpha-team]->[@core]",
        ),
        (
            "a catch-all appended",
            "# owners\n* @core\n/pkg/models/alpha/ @alpha-team\n/pkg/models/beta/ @beta-team\n* @someone\n",
            "CODEOWNERS base=true head=true compared-with=CODEOWNERS\n\
             line Added - => 5:* @someone | 6 owner changes: README.md [@core]->[@someone], pkg/common/guard.py [@core]->[@someone], pkg/models/alpha/README.md [@alpha-team]->[@someone], pkg/models/alpha/layer.py [@alpha-team]->[@someone], pkg/models/beta/layer.py [@beta-team]->[@someone], test/unit/alpha/test_layer.py [@core]->[@someone]",
        ),
        (
            "a line for a new model",
            "# owners\n* @core\n/pkg/models/alpha/ @alpha-team\n/pkg/models/beta/ @beta-team\n/pkg/models/gamma/ @gamma-team\n/test/unit/gamma/ @gamma-team\n",
            "CODEOWNERS base=true head=true compared-with=CODEOWNERS\n\
             line Added - => 5:/pkg/models/gamma/ @gamma-team | new models only: gamma\n\
             line Added - => 6:/test/unit/gamma/ @gamma-team | new models only: gamma",
        ),
        (
            "a line for new files of an old model",
            &format!("{BASE}/pkg/models/alpha/new.py @newcomer\n"),
            "CODEOWNERS base=true head=true compared-with=CODEOWNERS\n\
             line Added - => 5:/pkg/models/alpha/new.py @newcomer",
        ),
        (
            "a line that matches nothing",
            &format!("{BASE}/nowhere/ @x\n"),
            "CODEOWNERS base=true head=true compared-with=CODEOWNERS\n\
             line Added - => 5:/nowhere/ @x",
        ),
        (
            "an owner added to a line",
            "# owners\n* @core\n/pkg/models/alpha/ @alpha-team @mallory\n/pkg/models/beta/ @beta-team\n",
            "CODEOWNERS base=true head=true compared-with=CODEOWNERS\n\
             line Modified 3:/pkg/models/alpha/ @alpha-team => 3:/pkg/models/alpha/ @alpha-team @mallory | 2 owner changes: pkg/models/alpha/README.md [@alpha-team]->[@alpha-team @mallory], pkg/models/alpha/layer.py [@alpha-team]->[@alpha-team @mallory]",
        ),
        (
            "a line made invalid",
            "# owners\n* @core\n/pkg/models/alpha/ alpha-team\n/pkg/models/beta/ @beta-team\n",
            "CODEOWNERS base=true head=true compared-with=CODEOWNERS\n\
             line Modified 3:/pkg/models/alpha/ @alpha-team => 3:/pkg/models/alpha/ alpha-team | 2 owner changes: pkg/models/alpha/README.md [@alpha-team]->[@core], pkg/models/alpha/layer.py [@alpha-team]->[@core]\n\
             invalid 3:/pkg/models/alpha/ alpha-team: 'alpha-team' is not an owner: owners are @user, @org/team or an email address",
        ),
        (
            "spacing changed in a rule line",
            "# owners\n* @core\n/pkg/models/alpha/ @alpha-team\n/pkg/models/beta/   @beta-team\n",
            "CODEOWNERS base=true head=true compared-with=CODEOWNERS\n\
             line CommentOrBlank 4:/pkg/models/beta/ @beta-team => 4:/pkg/models/beta/   @beta-team",
        ),
        (
            "comments and blank lines",
            "# the owners\n\n* @core # everyone\n/pkg/models/alpha/ @alpha-team\n/pkg/models/beta/ @beta-team\n",
            "CODEOWNERS base=true head=true compared-with=CODEOWNERS\n\
             line CommentOrBlank 2:* @core => 3:* @core # everyone\n\
             line CommentOrBlank 1:# owners => 1:# the owners\n\
             line CommentOrBlank - => 2:",
        ),
        (
            "an invalid line",
            &format!("{BASE}!foo @x\n[ab].py @x\n"),
            "CODEOWNERS base=true head=true compared-with=CODEOWNERS\n\
             line Added - => 5:!foo @x\n\
             line Added - => 6:[ab].py @x\n\
             invalid 5:!foo @x: negation ('!') is not supported in CODEOWNERS\n\
             invalid 6:[ab].py @x: character ranges ('[...]') are not supported in CODEOWNERS",
        ),
    ];
    for (name, head, expected) in cases {
        let got = facts(&[("CODEOWNERS", BASE)], &[("CODEOWNERS", head)], None);
        assert_eq!(got, *expected, "{name}");
    }
}

/// CODEOWNERS files by location.
type Texts = &'static [(&'static str, &'static str)];

#[test]
fn file_changes_say_where_the_file_went() {
    let cases: &[(&str, Texts, Texts, Option<&str>, &str)] = &[
        (
            "deleted",
            &[("CODEOWNERS", "* @core\n")],
            &[],
            None,
            "CODEOWNERS base=true head=false compared-with=-\n\
             file Deleted CODEOWNERS: CODEOWNERS is deleted\n\
             line Removed 1:* @core => - | 6 owner changes: README.md [@core]->[], pkg/common/guard.py [@core]->[], pkg/models/alpha/README.md [@core]->[], pkg/models/alpha/layer.py [@core]->[], pkg/models/beta/layer.py [@core]->[], test/unit/alpha/test_layer.py [@core]->[]",
        ),
        (
            "moved with the same rules",
            &[("CODEOWNERS", "* @core\n")],
            &[("docs/CODEOWNERS", "# moved\n* @core\n")],
            None,
            "CODEOWNERS base=true head=false compared-with=docs/CODEOWNERS\n\
             file Moved docs/CODEOWNERS: CODEOWNERS is deleted and docs/CODEOWNERS, with the same rules, added\n\
             line CommentOrBlank - => 1:# moved",
        ),
        (
            "moved by a rename, and edited",
            &[("CODEOWNERS", "* @core\n")],
            &[(".github/CODEOWNERS", "* @core\n*.md @docs\n")],
            Some(".github/CODEOWNERS"),
            "CODEOWNERS base=true head=false compared-with=.github/CODEOWNERS\n\
             file Moved .github/CODEOWNERS: CODEOWNERS is renamed to .github/CODEOWNERS\n\
             line Added - => 2:*.md @docs | 2 owner changes: README.md [@core]->[@docs], pkg/models/alpha/README.md [@core]->[@docs]",
        ),
        (
            "shadowed",
            &[("CODEOWNERS", "* @core\n")],
            &[("CODEOWNERS", "* @core\n"), (".github/CODEOWNERS", "* @mallory\n")],
            None,
            "CODEOWNERS base=true head=true compared-with=CODEOWNERS\n\
             file Shadowed .github/CODEOWNERS: head adds .github/CODEOWNERS, which GitHub reads before CODEOWNERS",
        ),
        (
            "a lower-precedence file is not a shadow",
            &[("CODEOWNERS", "* @core\n")],
            &[("CODEOWNERS", "* @core\n"), ("docs/CODEOWNERS", "* @mallory\n")],
            None,
            "CODEOWNERS base=true head=true compared-with=CODEOWNERS",
        ),
        (
            "added",
            &[],
            &[("CODEOWNERS", "/pkg/models/gamma/ @gamma-team\n")],
            None,
            "CODEOWNERS base=false head=true compared-with=CODEOWNERS\n\
             file Added CODEOWNERS: base has no CODEOWNERS; head adds CODEOWNERS\n\
             line Added - => 1:/pkg/models/gamma/ @gamma-team | new models only: gamma",
        ),
        (
            "added elsewhere, before the configured location",
            &[],
            &[(".github/CODEOWNERS", "* @x\n")],
            None,
            "CODEOWNERS base=false head=false compared-with=.github/CODEOWNERS\n\
             file Added .github/CODEOWNERS: base has no CODEOWNERS; head adds .github/CODEOWNERS\n\
             file Shadowed .github/CODEOWNERS: head adds .github/CODEOWNERS, which GitHub reads before CODEOWNERS\n\
             line Added - => 1:* @x | 6 owner changes: README.md []->[@x], pkg/common/guard.py []->[@x], pkg/models/alpha/README.md []->[@x], pkg/models/alpha/layer.py []->[@x], pkg/models/beta/layer.py []->[@x], test/unit/alpha/test_layer.py []->[@x]",
        ),
        ("none anywhere", &[], &[], None, "CODEOWNERS base=false head=false compared-with=-"),
    ];
    for (name, base, head, renamed_to, expected) in cases {
        assert_eq!(facts(base, head, *renamed_to), *expected, "{name}");
    }
}

#[test]
fn owner_changes_list_twenty_files_and_count_all() {
    let texts = CodeownersTexts {
        path: "CODEOWNERS".to_owned(),
        base: [("CODEOWNERS".to_owned(), "* @a\n".to_owned())].into(),
        head: [("CODEOWNERS".to_owned(), "* @b\n".to_owned())].into(),
        renamed_to: None,
    };
    let mut builder = FactsBuilder::new(&texts);
    for n in (0..50).rev() {
        builder.add_base_file(&format!("f{n:02}.py"));
    }
    let manifest = Manifest::parse(MANIFEST, "prgate.toml").expect("the test manifest parses");
    let facts = builder.finish([], &NewModels::new(&manifest, &[]));
    let change = &facts.line_changes[0];
    assert_eq!(change.kind, LineChangeKind::Modified);
    assert_eq!(change.owner_changes_total, 50);
    assert_eq!(change.owner_changes.len(), LISTED_OWNER_CHANGES);
    assert_eq!(change.owner_changes[0].path, "f30.py", "the first 20 seen, sorted");
}

#[test]
fn the_facts_round_trip_through_json_and_old_plans_have_none() {
    let texts = CodeownersTexts {
        path: "CODEOWNERS".to_owned(),
        base: [("CODEOWNERS".to_owned(), "* @a\n".to_owned())].into(),
        head: [("CODEOWNERS".to_owned(), "* @b\n!x @c\n".to_owned())].into(),
        renamed_to: None,
    };
    let facts = FactsBuilder::new(&texts)
        .finish([], &NewModels::new(&Manifest::parse(MANIFEST, "m").expect("parses"), &[]));
    let json = serde_json::to_string(&facts).expect("serializes");
    assert!(json.contains(r#""kind":"modified""#) && json.contains(r#""kind":"added""#), "{json}");
    let back: CodeownersFacts = serde_json::from_str(&json).expect("deserializes");
    assert_eq!(back, facts);
    let with_more: CodeownersFacts = serde_json::from_str(
        r#"{"path":"CODEOWNERS","in_base":true,"in_head":true,"file_changes":[],"line_changes":[],"invalid_lines":[],"later":1}"#,
    )
    .expect("fields added later are ignored");
    assert_eq!(with_more.head_path, None);
    assert_eq!(
        serde_json::to_value(FileChangeKind::Shadowed).expect("serializes"),
        serde_json::json!("shadowed")
    );
    assert_eq!(
        serde_json::to_value(LineChangeKind::CommentOrBlank).expect("serializes"),
        serde_json::json!("comment-or-blank")
    );
}
