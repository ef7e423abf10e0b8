//! `prgate demo`: the built-in sample, start to end.

use crate::support::{plan_json, prgate, tiers};

#[test]
fn the_demo_plans_every_sample_pr() {
    let run = prgate(std::path::Path::new("."), &["demo"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    insta::assert_snapshot!("demo", run.stdout);
}

#[test]
fn the_demo_can_keep_its_sample_repository() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("sample");
    let run = prgate(dir.path(), &["demo", "--out", out.to_str().expect("UTF-8")]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("The sample repository is in"), "{}", run.stdout);
    let plan = plan_json(&out, &["--head", "pr/101-common-residency"]);
    assert_eq!(
        tiers(&plan),
        "deepseek_v41 smoke\nglm53_flash smoke\nkimi_k3 smoke\nkimi_k31 smoke\nqwen38_flash_next smoke"
    );
    let again = prgate(dir.path(), &["demo", "--out", out.to_str().expect("UTF-8")]);
    assert_eq!(again.code, 2);
    assert!(again.stderr.contains("the directory is not empty"), "{}", again.stderr);
}
