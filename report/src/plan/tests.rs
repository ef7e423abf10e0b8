//! Rendering plans that the end-to-end tests cannot easily produce: an untrusted diff with
//! many reasons, and hostile text in every field.

use prgate_scope::ChangeStatus;
use prgate_scope::plan::{
    ChangedPath, CommonPlan, DiffInfo, DiffSource, Head, ManifestSource, ModelPlan, PathMatch,
    Plan, Reason, Revision, SCHEMA_VERSION, Tier,
};

use super::{human, markdown, summary};

const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

fn untrusted_plan() -> Plan {
    let detail = "main and pr have no merge-base: this is a shallow clone (fetch more history: \
                  git fetch --unshallow); every model runs the full tier";
    let untrusted = Reason::UntrustedDiff { detail: detail.to_owned() };
    let paths: Vec<String> = (1..=7).map(|n| format!("m/big/file_{n}.py")).collect();
    let mut big_reasons = vec![untrusted.clone()];
    big_reasons.extend(
        paths
            .iter()
            .map(|path| Reason::ChangedPath { path: path.clone(), pattern: "m/{model}/**".into() }),
    );
    Plan {
        schema_version: SCHEMA_VERSION,
        base: Revision { reference: "main".into(), sha: SHA.into() },
        head: Head { reference: "pr".into(), sha: SHA.into(), worktree: false },
        merge_base: None,
        manifest: ManifestSource { path: "prgate.toml".into(), commit: SHA.into() },
        diff: DiffInfo {
            source: DiffSource::FileList,
            trusted: false,
            warnings: vec![detail.into()],
        },
        changed: paths
            .iter()
            .map(|path| ChangedPath {
                path: path.clone(),
                status: ChangeStatus::Unknown,
                old_path: None,
                matches: vec![PathMatch::Model {
                    model: "big".into(),
                    pattern: "m/{model}/**".into(),
                    path: path.clone(),
                }],
            })
            .collect(),
        models: vec![
            ModelPlan {
                name: "big".into(),
                tier: Tier::Full,
                new: false,
                removed: false,
                renamed_from: None,
                renamed_to: None,
                readme: Some(true),
                reasons: big_reasons,
            },
            ModelPlan {
                name: "small".into(),
                tier: Tier::Full,
                new: true,
                removed: false,
                renamed_from: None,
                renamed_to: None,
                readme: None,
                reasons: vec![untrusted.clone()],
            },
        ],
        common: CommonPlan { selected: true, reasons: vec![untrusted] },
        codeowners: Default::default(),
        warnings: vec![
            "model 'small' is named by the changed path m/small/@x|y but is in neither tree".into(),
        ],
    }
}

#[test]
fn an_untrusted_plan_says_so_first_and_caps_the_reasons_it_shows() {
    let plan = untrusted_plan();
    insta::assert_snapshot!("untrusted_human", human(&plan));
    insta::assert_snapshot!("untrusted_markdown", markdown(&plan));
    assert_eq!(
        summary(&plan),
        "2 full, 0 smoke, 0 none (1 new); common checks run; diff not trusted"
    );
}
