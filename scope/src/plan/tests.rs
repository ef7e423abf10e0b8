//! Tests of the pure decision: tables of changes and the tiers they give, and invariants.

use proptest::prelude::*;

use super::*;
use crate::change::ChangeStatus;

const MANIFEST: &str = r#"
[scope]
models = ["pkg/models/{model}/**", "test/unit/{model}/**",
          "test/kernels/test_{model}_*.py", "test/e2e/{model}.toml"]
shared = ["pkg/__init__.py", "pkg/common/**", "pyproject.toml"]
ignore = ["docs/**", "**/*.md"]
"#;

const BASE_FILES: &[&str] = &[
    "pkg/__init__.py",
    "pkg/common/guard.py",
    "pkg/models/kimi_k3/layer.py",
    "pkg/models/kimi_k31/layer.py",
    "pkg/models/kimi_k31/README.md",
    "pkg/models/glm53_flash/attn.py",
    "pkg/models/old_model/x.py",
    "test/unit/kimi_k3/test_layer.py",
    "test/kernels/test_kimi_k31_k1_ring.py",
    "test/e2e/glm53_flash.toml",
    "pyproject.toml",
    "docs/index.md",
];

fn manifest() -> Manifest {
    Manifest::parse(MANIFEST, "prgate.toml").expect("the test manifest parses")
}

fn change(status: ChangeStatus, path: &str, old_path: Option<&str>) -> Change {
    Change { path: path.to_owned(), status, old_path: old_path.map(str::to_owned) }
}

/// `A path`, `M path`, `D path`, `R old -> new`: the changes of one test case.
fn parse_changes(lines: &str) -> Vec<Change> {
    lines
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .map(|line| {
            let (letter, rest) = line.split_once(' ').expect("a status letter and a path");
            match letter {
                "A" => change(ChangeStatus::Added, rest, None),
                "M" => change(ChangeStatus::Modified, rest, None),
                "D" => change(ChangeStatus::Deleted, rest, None),
                "?" => change(ChangeStatus::Unknown, rest, None),
                "R" => {
                    let (old, new) = rest.split_once(" -> ").expect("R old -> new");
                    change(ChangeStatus::Renamed, new, Some(old))
                }
                other => panic!("unknown status {other}"),
            }
        })
        .collect()
}

/// Plans `changes` (which are also the tree diff) on the base files above, and renders the
/// models, common and warnings the way a reviewer reads them.
fn check(changes: &str, untrusted: Option<&str>) -> String {
    let manifest = manifest();
    let changes = parse_changes(changes);
    let mut known = KnownModels::default();
    for path in BASE_FILES {
        known.add_base_file(&manifest, path);
    }
    for change in &changes {
        known.apply_change(&manifest, change);
    }
    let selection = select(&manifest, &known, &changes, untrusted);
    let mut out = String::new();
    for model in &selection.models {
        let marks = match (model.new, model.removed, &model.renamed_from, &model.renamed_to) {
            (_, _, Some(from), _) => format!(" (renamed from {from})"),
            (_, _, _, Some(to)) => format!(" (renamed to {to})"),
            (true, ..) => " (new)".to_owned(),
            (_, true, ..) => " (removed)".to_owned(),
            _ => String::new(),
        };
        out += &format!("{}{marks}: {}\n", model.name, model.tier.as_str());
        for reason in &model.reasons {
            out += &format!("  {}\n", render_reason(reason));
        }
    }
    out += &format!("common: {}\n", if selection.common.selected { "selected" } else { "no" });
    for reason in &selection.common.reasons {
        out += &format!("  {}\n", render_reason(reason));
    }
    for changed in &selection.changed {
        for path_match in &changed.matches {
            if let PathMatch::Ignored { pattern, path } | PathMatch::NoModel { pattern, path } =
                path_match
            {
                out += &format!("{path}: {path_match:?}\n")
                    .replace(&format!("pattern: {pattern:?}, path: {path:?}"), pattern);
            }
        }
    }
    for warning in &selection.warnings {
        out += &format!("warning: {warning}\n");
    }
    out
}

fn render_reason(reason: &Reason) -> String {
    match reason {
        Reason::ChangedPath { path, pattern } => format!("{path} ({pattern})"),
        Reason::UntrustedDiff { detail } => format!("untrusted: {detail}"),
        Reason::SharedChange => "shared change (see common)".to_owned(),
    }
}

#[test]
fn a_change_in_one_model_puts_it_on_full() {
    insta::assert_snapshot!(check("M pkg/models/kimi_k31/layer.py", None), @r"
    glm53_flash: none
    kimi_k3: none
    kimi_k31: full
      pkg/models/kimi_k31/layer.py (pkg/models/{model}/**)
    old_model: none
    common: no
    ");
}

#[test]
fn a_shared_change_puts_every_other_model_on_smoke() {
    insta::assert_snapshot!(check("M pkg/common/guard.py\nM test/e2e/glm53_flash.toml", None), @r"
    glm53_flash: full
      test/e2e/glm53_flash.toml (test/e2e/{model}.toml)
    kimi_k3: smoke
      shared change (see common)
    kimi_k31: smoke
      shared change (see common)
    old_model: smoke
      shared change (see common)
    common: selected
      pkg/common/guard.py (pkg/common/**)
    ");
}

#[test]
fn a_rename_across_models_counts_on_both_paths() {
    insta::assert_snapshot!(check("R pkg/models/kimi_k3/layer.py -> pkg/models/glm53_flash/layer.py", None), @r"
    glm53_flash: full
      pkg/models/glm53_flash/layer.py (pkg/models/{model}/**)
    kimi_k3: full
      pkg/models/kimi_k3/layer.py (pkg/models/{model}/**)
    kimi_k31: none
    old_model: none
    common: no
    ");
}

#[test]
fn new_and_removed_models_are_marked() {
    insta::assert_snapshot!(check("A pkg/models/muse_spark/a.py\nA test/e2e/muse_spark.toml\nD pkg/models/old_model/x.py", None), @r"
    glm53_flash: none
    kimi_k3: none
    kimi_k31: none
    muse_spark (new): full
      pkg/models/muse_spark/a.py (pkg/models/{model}/**)
      test/e2e/muse_spark.toml (test/e2e/{model}.toml)
    old_model (removed): full
      pkg/models/old_model/x.py (pkg/models/{model}/**)
    common: no
    ");
}

#[test]
fn a_model_whose_files_all_moved_to_a_new_name_is_renamed_not_new() {
    // old_model's one file moves to a new model: the same model under a new name.
    insta::assert_snapshot!(check("R pkg/models/old_model/x.py -> pkg/models/young_model/x.py", None), @r"
    glm53_flash: none
    kimi_k3: none
    kimi_k31: none
    old_model (renamed to young_model): full
      pkg/models/old_model/x.py (pkg/models/{model}/**)
    young_model (renamed from old_model): full
      pkg/models/young_model/x.py (pkg/models/{model}/**)
    common: no
    ");
    // kimi_k3 keeps a file on the head side: a split, so the new model is new.
    insta::assert_snapshot!(check("R pkg/models/kimi_k3/layer.py -> pkg/models/muse/layer.py", None), @r"
    glm53_flash: none
    kimi_k3: full
      pkg/models/kimi_k3/layer.py (pkg/models/{model}/**)
    kimi_k31: none
    muse (new): full
      pkg/models/muse/layer.py (pkg/models/{model}/**)
    old_model: none
    common: no
    ");
    // Two removed models move into one new name: the one with more renamed files is linked,
    // the other is removed.
    insta::assert_snapshot!(check("R pkg/models/kimi_k3/layer.py -> pkg/models/muse/layer.py
        R test/unit/kimi_k3/test_layer.py -> test/unit/muse/test_layer.py
        R pkg/models/old_model/x.py -> pkg/models/muse/x.py", None), @r"
    glm53_flash: none
    kimi_k3 (renamed to muse): full
      pkg/models/kimi_k3/layer.py (pkg/models/{model}/**)
      test/unit/kimi_k3/test_layer.py (test/unit/{model}/**)
    kimi_k31: none
    muse (renamed from kimi_k3): full
      pkg/models/muse/layer.py (pkg/models/{model}/**)
      pkg/models/muse/x.py (pkg/models/{model}/**)
      test/unit/muse/test_layer.py (test/unit/{model}/**)
    old_model (removed): full
      pkg/models/old_model/x.py (pkg/models/{model}/**)
    common: no
    ");
}

#[test]
fn partial_segment_patterns_pick_the_longest_model_and_unknown_names_select_nothing() {
    insta::assert_snapshot!(check("M test/kernels/test_kimi_k31_k1_ring.py\nA test/kernels/test_guard_dispatch.py", None), @r"
    glm53_flash: none
    kimi_k3: none
    kimi_k31: full
      test/kernels/test_kimi_k31_k1_ring.py (test/kernels/test_{model}_*.py)
    old_model: none
    common: no
    test/kernels/test_guard_dispatch.py: NoModel { test/kernels/test_{model}_*.py }
    ");
}

#[test]
fn ignored_paths_select_nothing_even_under_a_model() {
    insta::assert_snapshot!(check("M docs/index.md\nM pkg/models/kimi_k31/README.md", None), @r"
    glm53_flash: none
    kimi_k3: none
    kimi_k31: none
    old_model: none
    common: no
    docs/index.md: Ignored { docs/** }
    pkg/models/kimi_k31/README.md: Ignored { **/*.md }
    ");
}

#[test]
fn an_untrusted_diff_runs_everything_and_says_why() {
    insta::assert_snapshot!(check("M pkg/models/kimi_k3/layer.py", Some("no merge-base")), @r"
    glm53_flash: full
      untrusted: no merge-base
    kimi_k3: full
      untrusted: no merge-base
      pkg/models/kimi_k3/layer.py (pkg/models/{model}/**)
    kimi_k31: full
      untrusted: no merge-base
    old_model: full
      untrusted: no merge-base
    common: selected
      untrusted: no merge-base
    ");
}

#[test]
fn names_that_cannot_be_models_are_reported_not_planned() {
    insta::assert_snapshot!(check("A pkg/models/bad name/x.py\n? pkg/models/only_listed/y.py", None), @r"
    glm53_flash: none
    kimi_k3: none
    kimi_k31: none
    old_model: none
    only_listed: full
      pkg/models/only_listed/y.py (pkg/models/{model}/**)
    common: no
    pkg/models/bad name/x.py: NoModel { pkg/models/{model}/** }
    warning: 'bad name' (from pkg/models/bad name/x.py) is not a valid model name (letters, digits, _, - and .): not a model
    warning: model 'only_listed' is named by the changed path pkg/models/only_listed/y.py but is in neither the base nor the head tree
    ");
}

/// Paths drawn from segments that hit every kind of pattern, with model names that are
/// prefixes of each other.
fn arbitrary_path() -> impl Strategy<Value = String> {
    // `kimi_k31_k1` extends a known name and is in no tree: a change can name it, and it must
    // not take files of the partial-segment patterns away from `kimi_k31`.
    let model = prop::sample::select(vec![
        "kimi_k3",
        "kimi_k31",
        "kimi_k31_k1",
        "glm53_flash",
        "new_one",
        "a b",
    ]);
    let file = prop::sample::select(vec!["x.py", "README.md", "__init__.py"]);
    prop_oneof![
        (model.clone(), file.clone()).prop_map(|(m, f)| format!("pkg/models/{m}/{f}")),
        (model.clone(), file.clone()).prop_map(|(m, f)| format!("test/unit/{m}/{f}")),
        model.clone().prop_map(|m| format!("test/kernels/test_{m}_k1.py")),
        model.prop_map(|m| format!("test/e2e/{m}.toml")),
        file.prop_map(|f| format!("pkg/common/{f}")),
        prop::sample::select(vec![
            "pkg/__init__.py",
            "pyproject.toml",
            "docs/a.md",
            "README.md",
            "setup.cfg"
        ])
        .prop_map(str::to_owned),
    ]
}

fn arbitrary_change() -> impl Strategy<Value = Change> {
    let status = prop::sample::select(vec![
        ChangeStatus::Added,
        ChangeStatus::Modified,
        ChangeStatus::Deleted,
        ChangeStatus::Renamed,
        ChangeStatus::Unknown,
    ]);
    (status, arbitrary_path(), arbitrary_path()).prop_map(|(status, path, old)| Change {
        old_path: (status == ChangeStatus::Renamed).then_some(old),
        path,
        status,
    })
}

fn known_models(manifest: &Manifest) -> KnownModels {
    let mut known = KnownModels::default();
    for path in BASE_FILES {
        known.add_base_file(manifest, path);
    }
    known
}

fn tiers(selection: &Selection) -> BTreeMap<String, Tier> {
    selection.models.iter().map(|model| (model.name.clone(), model.tier)).collect()
}

proptest! {
    #[test]
    fn renames_link_a_removed_model_and_a_model_not_new_both_ways(
        changes in prop::collection::vec(arbitrary_change(), 0..10),
    ) {
        let manifest = manifest();
        let mut known = known_models(&manifest);
        for change in &changes {
            known.apply_change(&manifest, change);
        }
        let selection = select(&manifest, &known, &changes, None);
        let find = |name: &str| selection.models.iter().find(|model| model.name == name);
        for model in &selection.models {
            if let Some(from) = &model.renamed_from {
                prop_assert!(!model.new && !model.removed, "{} renamed from {from}", model.name);
                let old = find(from);
                prop_assert!(old.is_some_and(|old| old.removed && old.renamed_to.as_ref() == Some(&model.name)), "{from} -> {}", model.name);
            }
            if let Some(to) = &model.renamed_to {
                prop_assert!(model.removed, "{} renamed to {to} but not removed", model.name);
                prop_assert!(find(to).is_some_and(|new| new.renamed_from.as_ref() == Some(&model.name)));
            }
        }
    }

    #[test]
    fn adding_a_changed_path_never_lowers_a_tier(
        changes in prop::collection::vec(arbitrary_change(), 0..8),
        extra in arbitrary_change(),
    ) {
        let manifest = manifest();
        let known = known_models(&manifest);
        let before = select(&manifest, &known, &changes, None);
        let mut more = changes.clone();
        more.push(extra);
        let after = select(&manifest, &known, &more, None);
        let after_tiers = tiers(&after);
        for (name, tier) in tiers(&before) {
            prop_assert!(after_tiers.get(&name).is_some_and(|after| *after >= tier), "{name} fell from {tier:?}");
        }
        prop_assert!(after.common.selected || !before.common.selected);
    }

    #[test]
    fn the_plan_does_not_depend_on_the_order_of_the_changes(
        changes in prop::collection::vec(arbitrary_change(), 0..10),
        seed in any::<u64>(),
    ) {
        let manifest = manifest();
        let known = known_models(&manifest);
        let mut shuffled = changes.clone();
        // A deterministic shuffle from the seed.
        let mut state = seed;
        for index in (1..shuffled.len()).rev() {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            shuffled.swap(index, (state >> 33) as usize % (index + 1));
        }
        prop_assert_eq!(select(&manifest, &known, &changes, None), select(&manifest, &known, &shuffled, None));
    }

    #[test]
    fn every_selection_has_a_reason_and_every_reason_matches_its_pattern(
        changes in prop::collection::vec(arbitrary_change(), 0..10),
    ) {
        let manifest = manifest();
        let known = known_models(&manifest);
        let selection = select(&manifest, &known, &changes, None);
        // Partial-segment patterns name only the models of the trees.
        let names: Vec<&str> = known.presence().map(|(name, _, _)| name).collect();
        for model in &selection.models {
            prop_assert_eq!(model.tier == Tier::None, model.reasons.is_empty(), "{}", model.name);
            for reason in &model.reasons {
                match (model.tier, reason) {
                    (Tier::Full, Reason::ChangedPath { path, pattern }) => {
                        let matches = manifest.models().iter().find(|p| p.text() == pattern)
                            .is_some_and(|p| p.bind(names.iter().copied()).model(path).as_deref() == Some(model.name.as_str()));
                        prop_assert!(matches, "{}: {} does not match {}", model.name, path, pattern);
                    }
                    (Tier::Smoke, Reason::SharedChange) => prop_assert!(selection.common.selected),
                    (tier, reason) => prop_assert!(false, "{}: {tier:?} with {reason:?}", model.name),
                }
            }
        }
        prop_assert_eq!(selection.common.selected, !selection.common.reasons.is_empty());
        for reason in &selection.common.reasons {
            let Reason::ChangedPath { path, pattern } = reason else {
                prop_assert!(false, "only path reasons for common when the diff is trusted");
                continue;
            };
            prop_assert!(manifest.shared().iter().any(|p| p.text() == pattern && p.is_match(path)),
                "common: {} does not match {}", path, pattern);
        }
    }
}
