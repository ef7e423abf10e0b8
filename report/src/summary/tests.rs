//! The job summary and the annotations of a failing run, and annotations of hostile text.

use prgate_gate::evidence::{Check, Side};

use super::*;
use crate::comment::render_full_report;
use crate::fixture::{header, judged, passing, replace_speed, standard_plan, tests};

#[test]
fn a_failing_run_annotates_every_item_that_did_not_pass() {
    let plan = standard_plan();
    let title = "[Fix] [MI355X] kimi_k31: a fix";
    let mut evidence = passing();
    replace_speed(
        &mut evidence,
        "kimi_k31",
        64,
        20.1,
        &[0.06, 0.061, 0.059, 0.06, 0.06, 0.061, 0.059, 0.06],
    );
    evidence.retain(|r| {
        !(r.check == Check::UnitTests && r.side == Side::Pr && r.model.as_deref() == Some("glm5"))
    });
    evidence.push(tests(
        Some("glm5"),
        Check::UnitTests,
        Side::Pr,
        &["test_100%\r\n::error::forged"],
    ));
    evidence.retain(|r| r.check != Check::KernelTiming);
    let verdict = judged(&plan, &evidence, Some(title));
    let commands: Vec<String> = annotations(&verdict).iter().map(Annotation::command).collect();
    insta::assert_snapshot!("annotations", commands.join("\n"));
    for command in &commands {
        assert_eq!(command.lines().count(), 1, "{command}");
    }

    let header = header(title);
    let input = crate::comment::CommentInput {
        verdict: Some(&verdict),
        plan: &plan,
        header: &header,
        progress: None,
        full_report: None,
        error: None,
    };
    let summary = job_summary(&input).expect("renders");
    assert_eq!(summary, render_full_report(&input).expect("renders"));
    assert!(summary.len() <= JOB_SUMMARY_LIMIT);
}

#[test]
fn annotations_stop_at_ten_of_a_level() {
    let plan = standard_plan();
    let mut evidence = passing();
    evidence.retain(|r| r.check == Check::Routing);
    let verdict = judged(&plan, &evidence, None);
    let levels: Vec<(AnnotationLevel, String)> = annotations(&verdict)
        .into_iter()
        .map(|annotation| (annotation.level, annotation.message))
        .collect();
    let notices: Vec<&String> = levels
        .iter()
        .filter(|(level, _)| *level == AnnotationLevel::Notice)
        .map(|(_, m)| m)
        .collect();
    assert_eq!(notices.len(), ANNOTATIONS_PER_LEVEL);
    assert_eq!(notices.last().map(|m| m.as_str()), Some("and 2 more: see the job summary"));
}

#[test]
fn a_summary_fits_while_the_whole_file_stays_within_githubs_limit() {
    let summary = "x".repeat(10);
    for (existing, fits) in [
        (0, true),
        (JOB_SUMMARY_LIMIT - 10, true),
        (JOB_SUMMARY_LIMIT - 9, false),
        (JOB_SUMMARY_LIMIT, false),
        (usize::MAX, false),
    ] {
        assert_eq!(fits_job_summary(existing, &summary), fits, "{existing}");
    }
}
