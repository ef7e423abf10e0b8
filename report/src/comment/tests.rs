//! The comment on representative verdicts from the real gate (snapshots), its size limit, and
//! text from a hostile PR. Every rendering is checked for what GitHub would act on: raw HTML,
//! a second marker or its end, mentions, math, and tables whose rows lost or gained a cell.

use prgate_gate::evidence::{Check, Evidence, NotRunReason, Outcome, Side};
use prgate_gate::verdict::{SpeedThresholds, Verdict};
use prgate_scope::codeowners::{CodeownersFacts, CodeownersLineChange, LineChangeKind};
use prgate_scope::plan::{Plan, Tier};

use super::*;
use crate::fixture::{
    accuracy, header, judged, model, not_run, passing, plan, record, replace_speed, standard_plan,
    tests,
};
use prgate_gate::verdict::{Confidence, Item, Numbers};

fn link() -> ReportLink {
    ReportLink {
        name: "prgate-report.md".into(),
        url: Some("https://github.com/org/models/actions/runs/123456/artifacts/789".into()),
    }
}

/// The comment for a verdict (or none yet), checked for inert text and the limit.
fn check(
    plan: &Plan,
    verdict: Option<&Verdict>,
    header: &Header,
    progress: Option<&Progress>,
) -> String {
    let link = link();
    let input =
        CommentInput { verdict, plan, header, progress, full_report: Some(&link), error: None };
    let comment = render_comment(&input).expect("the comment renders");
    assert!(comment.chars().count() <= COMMENT_LIMIT, "{} characters", comment.chars().count());
    assert_inert(&comment);
    comment
}

fn with(mut evidence: Vec<Evidence>, change: impl FnOnce(&mut Vec<Evidence>)) -> Vec<Evidence> {
    change(&mut evidence);
    evidence
}

fn codeowners_edit() -> CodeownersFacts {
    CodeownersFacts {
        path: ".github/CODEOWNERS".into(),
        in_base: true,
        in_head: true,
        head_path: Some(".github/CODEOWNERS".into()),
        file_changes: vec![],
        line_changes: vec![CodeownersLineChange {
            kind: LineChangeKind::Modified,
            base_line: Some(3),
            head_line: Some(3),
            base_text: Some("/models/kimi_k31/ @org/kimi-team".into()),
            head_text: Some("/models/kimi_k31/ @mallory".into()),
            owner_changes: vec![],
            owner_changes_total: 0,
            new_models_only: vec![],
        }],
        invalid_lines: vec![],
    }
}

#[test]
fn representative_verdicts() {
    let standard = standard_plan();
    let mut codeowners = standard_plan();
    codeowners.codeowners = codeowners_edit();
    let no_readme = plan(
        vec![model("kimi_k31", Tier::Full, Some(false)), model("glm5", Tier::Smoke, None)],
        true,
    );
    let cases: Vec<(&str, &Plan, Vec<Evidence>, &str)> = vec![
        ("all_pass", &standard, passing(), "[Fix] [MI355X] kimi_k31: a fix"),
        (
            "tpot_failure",
            &standard,
            with(passing(), |e| {
                replace_speed(
                    e,
                    "kimi_k31",
                    64,
                    20.1,
                    &[0.06, 0.061, 0.059, 0.06, 0.06, 0.061, 0.059, 0.06],
                )
            }),
            "[Fix] [MI355X] kimi_k31: a fix",
        ),
        ("perf_without_gain", &standard, passing(), "[Perf] [MI355X] kimi_k31: faster decode"),
        (
            // Sixteen pairs that alternate +7% and -3%: CV 2.9%, a change of +1.9%, still
            // undecided at the cap. Not a pass: the run is an error, and the comment says
            // what would decide the cell.
            "speed_undecided",
            &standard,
            with(passing(), |e| {
                let noisy: Vec<f64> =
                    (0..16).map(|i| if i % 2 == 0 { 0.07 } else { -0.03 }).collect();
                replace_speed(e, "kimi_k31", 64, 20.1, &noisy);
            }),
            "[Fix] [MI355X] kimi_k31: a fix",
        ),
        ("codeowners_failure", &codeowners, passing(), "[Fix] [MI355X] kimi_k31: a fix"),
        (
            "coverage_gaps",
            &no_readme,
            with(passing(), |e| {
                e.push(not_run(
                    Some("kimi_k31"),
                    Check::Accuracy,
                    NotRunReason::GatedDataset,
                    "",
                    Some("gpqa-diamond"),
                ));
                e.retain(|r| {
                    !(r.model.as_deref() == Some("glm5") && r.check == Check::ServingTests)
                });
                e.push(not_run(
                    Some("glm5"),
                    Check::ServingTests,
                    NotRunReason::HardwareAbsent,
                    "needs 8 GPUs, the node has 4",
                    None,
                ));
            }),
            "[Fix] [MI355X] kimi_k31: a fix without every benchmark",
        ),
        (
            "could_not_judge",
            &standard,
            with(passing(), |e| {
                e.retain(|r| !(r.model.as_deref() == Some("glm5") && r.check == Check::UnitTests));
                for side in [Side::Base, Side::Pr] {
                    let mut record = not_run(
                        Some("glm5"),
                        Check::UnitTests,
                        NotRunReason::Harness,
                        "pytest cannot start here: `python3 -m pytest --version` exit status: 1\nlast lines of logs/glm5.unit-tests.pr/pytest-version.log:\n/usr/bin/python3: No module named pytest",
                        None,
                    );
                    record.side = side;
                    e.push(record);
                }
            }),
            "[Fix] [MI355X] kimi_k31: a fix",
        ),
    ];
    for (name, plan, evidence, title) in cases {
        let verdict = judged(plan, &evidence, Some(title));
        insta::assert_snapshot!(name, check(plan, Some(&verdict), &header(title), None));
    }
}

fn step(model: Option<&str>, check: &str, state: StepState) -> StepProgress {
    StepProgress { model: model.map(str::to_owned), check: check.into(), state }
}

#[test]
fn a_run_in_progress_shows_what_is_done_running_and_waiting() {
    let plan = standard_plan();
    let title = "[Fix] [MI355X] kimi_k31: a fix";
    let mut steps = Vec::new();
    for model in ["kimi_k31", "glm5"] {
        for check in ["unit tests", "kernel tests", "serving tests", "monokernel routing"] {
            steps.push(step(Some(model), check, StepState::Done));
        }
    }
    steps.push(step(Some("glm5"), "E2E speed", StepState::Done));
    steps.push(step(Some("kimi_k31"), "E2E speed", StepState::Running));
    steps.push(step(Some("kimi_k31"), "accuracy", StepState::Waiting));
    steps.push(step(Some("kimi_k31"), "kernel timing", StepState::Waiting));
    steps.push(step(None, "common tests", StepState::Done));
    let progress = Progress { steps };
    let evidence = with(passing(), |e| {
        e.retain(|r| {
            !(r.model.as_deref() == Some("kimi_k31")
                && matches!(r.check, Check::Speed | Check::Accuracy | Check::KernelTiming))
        })
    });
    let verdict = judged(&plan, &evidence, Some(title));
    insta::assert_snapshot!(
        "in_progress",
        check(&plan, Some(&verdict), &header(title), Some(&progress))
    );

    let waiting = Progress {
        steps: progress
            .steps
            .iter()
            .map(|s| StepProgress { state: StepState::Waiting, ..s.clone() })
            .collect(),
    };
    insta::assert_snapshot!("nothing_finished", check(&plan, None, &header(title), Some(&waiting)));
}

/// Many full-tier models, each with failing tests of long names and several speed cells.
fn huge_verdict() -> (Plan, Verdict) {
    let names: Vec<String> = (0..120).map(|n| format!("model_{n:03}")).collect();
    let plan = plan(names.iter().map(|name| model(name, Tier::Full, Some(true))).collect(), true);
    let mut evidence = vec![
        tests(None, Check::CommonTests, Side::Base, &[]),
        tests(None, Check::CommonTests, Side::Pr, &[]),
    ];
    let long_names: Vec<String> =
        (0..12).map(|n| format!("test_{n}_{}", "very_long_parametrized_case_".repeat(6))).collect();
    let failing: Vec<&str> = long_names.iter().map(String::as_str).collect();
    for name in &names {
        for check in [Check::UnitTests, Check::KernelTests, Check::ServingTests] {
            evidence.push(tests(Some(name), check, Side::Base, &[]));
            evidence.push(tests(Some(name), check, Side::Pr, &failing));
        }
        evidence.push(record(
            Some(name),
            Check::Routing,
            Side::Pr,
            Outcome::Routing { routed: true, line: Some("monokernel: routed".into()) },
        ));
        let answers: Vec<bool> = (0..100).map(|i| i % 4 != 0).collect();
        evidence.push(accuracy(name, Side::Base, "gsm8k", &answers));
        evidence.push(accuracy(name, Side::Pr, "gsm8k", &answers));
        evidence.push(crate::fixture::kernels(name, Side::Base, "moe_ring", 100.0));
        evidence.push(crate::fixture::kernels(name, Side::Pr, "moe_ring", 100.0));
        for concurrency in [1, 4, 16, 64, 128] {
            evidence.extend(crate::fixture::speed(
                name,
                concurrency,
                true,
                10.0 + f64::from(concurrency) / 10.0,
                &[0.001, -0.002, 0.0],
            ));
        }
    }
    let verdict = judged(&plan, &evidence, Some("[Fix] [MI355X] common: a shared fix"));
    (plan, verdict)
}

#[test]
fn a_huge_verdict_shrinks_to_the_limit_and_keeps_the_marker_and_the_checklist() {
    let (plan, verdict) = huge_verdict();
    let header = header("[Fix] [MI355X] common: a shared fix");
    let link = link();
    let input = CommentInput {
        verdict: Some(&verdict),
        plan: &plan,
        header: &header,
        progress: None,
        full_report: Some(&link),
        error: None,
    };
    let full = render_full_report(&input).expect("the full report renders");
    assert!(full.chars().count() > COMMENT_LIMIT, "the fixture must be over the limit");
    assert!(!full.contains(MARKER));

    let comment = check(&plan, Some(&verdict), &header, None);
    assert!(comment.starts_with(MARKER));
    assert!(is_prgate_comment(&comment));
    for section in
        ["Rules", "Scope", "Accuracy", "Kernel microbenchmark", "E2E performance", "Tests", "Doc"]
    {
        assert!(comment.contains(&format!(". {section}**: ")), "section {section} is missing");
    }
    assert!(comment.contains("> [!NOTE]\n> To stay within GitHub's limit of 65,536 characters"));
    assert!(comment.contains(
        "[`prgate-report.md`](https://github.com/org/models/actions/runs/123456/artifacts/789)"
    ));
    assert!(!comment.contains("<details><summary><code>model_"), "per-model details go first");
    assert!(comment.contains("❌ **fail** · `model_000` unit-tests"), "failures are kept");
    assert!(comment.chars().count() <= COMMENT_LIMIT);
    insta::assert_snapshot!("huge", comment);
    // Without a full report (none written, no link), the note points to none, and says how to
    // have one.
    let unlinked = render_comment(&CommentInput { full_report: None, ..input }).expect("renders");
    assert!(!unlinked.contains("prgate-report.md"), "a pointer to a report never written");
    assert!(
        unlinked.contains(
            "This run wrote no full report to link: `prgate publish --report-out FILE` writes one."
        ),
        "{unlinked}"
    );

    // The last resort, for a limit that even the shortest rendering passes: a cut that says so.
    let size = |limit: Limit, text: &str| match limit {
        Limit::Bytes(_) => text.len(),
        _ => text.chars().count(),
    };
    for limit in [Limit::Chars(500), Limit::Bytes(500)] {
        let target = Target { marker: true, limit, limit_words: "a tiny limit" };
        let cut = render_within(&input, &target).expect("renders");
        assert!(cut.starts_with(MARKER) && cut.ends_with("… cut here to fit the limit.\n"));
        assert!((490..=500).contains(&size(limit, &cut)), "{limit:?}: {}", size(limit, &cut));
    }
}

#[test]
fn no_text_is_long_enough_to_pass_the_limit() {
    let plan = standard_plan();
    let title = format!("[Fix] {}", "@everyone <b>x</b> ".repeat(20_000));
    let evidence = with(passing(), |e| {
        e.retain(|r| {
            !(r.model.as_deref() == Some("glm5")
                && r.check == Check::UnitTests
                && r.side == Side::Pr)
        });
        let name = "x".repeat(200_000);
        e.push(tests(Some("glm5"), Check::UnitTests, Side::Pr, &[name.as_str()]));
    });
    let verdict = judged(&plan, &evidence, Some(&title));
    let mut header = header(&title);
    header.nodes = (0..10_000).map(|n| format!("node-{n}")).collect();
    let comment = check(&plan, Some(&verdict), &header, None);
    assert!(comment.contains("**1. Rules**"), "{comment}");
}

#[test]
fn text_from_a_hostile_pr_is_inert() {
    let hostile = "x\"] --> y <img src=x onerror=alert(1)> @admin </details> | `a` ``` $\\color{red}{X}$ <!-- \n| x |";
    let title = format!("[Fix] [MI355X] kimi_k31: {hostile}");
    let plan = standard_plan();
    let evidence = with(passing(), |e| {
        e.retain(|r| {
            !(r.model.as_deref() == Some("kimi_k31")
                && r.check == Check::UnitTests
                && r.side == Side::Pr)
        });
        e.push(tests(
            Some("kimi_k31"),
            Check::UnitTests,
            Side::Pr,
            &[
                "test_<script>alert(1)</script>",
                "test_@octocat[-->]",
                "test_`|`\n| injected | row |",
            ],
        ));
        e.retain(|r| r.check != Check::KernelTiming);
        e.push(crate::fixture::kernels("kimi_k31", Side::Base, hostile, 100.0));
        e.push(crate::fixture::kernels("kimi_k31", Side::Pr, hostile, 120.0));
    });
    let verdict = judged(&plan, &evidence, Some(&title));
    let mut header = header(&title);
    header.nodes = vec![format!("node {hostile}")];
    header.image = Some(hostile.to_owned());
    header.run_url = Some("https://example.com/run?q=a b)(<x>|".into());
    header.pr_sha = hostile.to_owned();
    let comment = check(&plan, Some(&verdict), &header, None);
    // Code spans show text literally: GitHub neither parses HTML nor mentions anyone there.
    let prose = outside_code(&comment).join("\n");
    for raw in ["@admin", "@octocat", "<img", "<script", "</details> \\|", "$\\color"] {
        assert!(!prose.contains(raw), "{raw} is raw outside code");
    }
    assert!(prose.contains("@&#8203;admin &lt;/details&gt; \\| \\`a\\`"));
    assert!(comment.contains("(https://example.com/run?q=a%20b%29%28%3Cx%3E%7C)"));
    insta::assert_snapshot!("hostile", comment);

    // A model's name reaches a Mermaid chart: only letters, digits, `_`, `-`, `.` and spaces
    // are left of it there.
    assert_eq!(chart_label("kimi\"]\n%%{init: {}}%%"), "kimi______init_ _____");
}

#[test]
fn the_full_report_keeps_everything_and_has_no_marker() {
    let plan = standard_plan();
    let title = "[Fix] [MI355X] kimi_k31: a fix";
    let verdict = judged(&plan, &passing(), Some(title));
    let header = header(title);
    let input = CommentInput {
        verdict: Some(&verdict),
        plan: &plan,
        header: &header,
        progress: None,
        full_report: None,
        error: None,
    };
    let full = render_full_report(&input).expect("renders");
    let comment = render_comment(&input).expect("renders");
    assert_eq!(comment, format!("{MARKER}\n{full}"));
    assert!(!is_prgate_comment(&full));
    assert!(is_prgate_comment(&format!("\n{comment}")));
}

/// What GitHub parses as Markdown and HTML: the text without fenced code blocks and code
/// spans (whose content is shown literally).
fn outside_code(markdown: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut in_fence = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if !in_fence {
            lines.push(without_code_spans(line));
        }
    }
    assert!(!in_fence, "a fenced block is not closed");
    lines
}

/// A line with its code spans replaced by `CODE`, following CommonMark: a backslash escapes
/// the next punctuation, a run of backticks opens a span that the next run of the same
/// length closes.
fn without_code_spans(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let run_at = |at: usize| chars[at..].iter().take_while(|c| **c == '`').count();
    let mut out = String::new();
    let mut at = 0;
    while at < chars.len() {
        match chars[at] {
            '\\' if chars.get(at + 1).is_some_and(char::is_ascii_punctuation) => {
                out.push('\\');
                out.push(chars[at + 1]);
                at += 2;
            }
            '`' => {
                let run = run_at(at);
                let mut close = None;
                let mut next = at + run;
                while next < chars.len() {
                    if chars[next] == '`' {
                        let other = run_at(next);
                        if other == run {
                            close = Some(next);
                            break;
                        }
                        next += other;
                    } else {
                        next += 1;
                    }
                }
                match close {
                    Some(close) => {
                        out.push_str("CODE");
                        at = close + run;
                    }
                    None => {
                        out.push_str(&"`".repeat(run));
                        at += run;
                    }
                }
            }
            c => {
                out.push(c);
                at += 1;
            }
        }
    }
    out
}

/// The comment starts with the marker, which nothing else opens or closes; outside code there
/// is no HTML but prgate's own tags, no mention and no math; every table row has its table's
/// cells.
fn assert_inert(comment: &str) {
    assert!(comment.starts_with(&format!("{MARKER}\n")), "the marker comes first");
    let lines = outside_code(comment);
    let prose = lines.join("\n");
    assert_eq!(prose.matches("<!--").count(), 1, "only the marker opens a comment");
    assert_eq!(prose.find("-->"), Some(MARKER.len() - 3), "only the marker closes one");
    assert_eq!(prose.matches("-->").count(), 1, "only the marker closes a comment");
    const TAGS: [&str; 13] = [
        MARKER,
        "<details>",
        "</details>",
        "<summary>",
        "</summary>",
        "<code>",
        "</code>",
        "<b>",
        "</b>",
        "<sub>",
        "</sub>",
        "<br>",
        "<wbr>",
    ];
    for (at, _) in prose.match_indices('<') {
        let rest: String = prose[at..].chars().take(40).collect();
        assert!(TAGS.iter().any(|tag| rest.starts_with(tag)), "raw HTML: {rest}");
    }
    for (at, _) in prose.match_indices('@') {
        let next = prose[at + 1..].chars().next();
        assert!(
            !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
            "a mention: {}",
            &prose[at..]
        );
    }
    for (at, _) in prose.match_indices('$') {
        assert!(prose[..at].ends_with('\\'), "math: {}", &prose[at..]);
    }
    let cells = |line: &str| {
        let chars: Vec<char> = line.chars().collect();
        (0..chars.len()).filter(|i| chars[*i] == '|' && (*i == 0 || chars[i - 1] != '\\')).count()
    };
    let mut table: Option<usize> = None;
    for line in &lines {
        if line.starts_with('|') {
            let count = cells(line);
            let expected = *table.get_or_insert(count);
            assert_eq!(count, expected, "a row with other cells than its table: {line}");
        } else {
            table = None;
        }
    }
}

#[test]
fn a_run_that_could_not_finish_says_why_and_what_ran() {
    let plan = standard_plan();
    let title = "[Fix] [MI355X] kimi_k31: a fix";
    let progress = Progress {
        steps: vec![
            step(Some("kimi_k31"), "unit tests", StepState::Done),
            step(Some("kimi_k31"), "E2E speed", StepState::Running),
            step(Some("kimi_k31"), "accuracy", StepState::Waiting),
        ],
    };
    // The reason may quote a log line from the PR's code: it is shown as inert text.
    let problem = "the run was stopped by SIGTERM\n<img src=x onerror=alert(1)> @admin <!-- x -->";
    let link = link();
    let header = header(title);
    let input = CommentInput {
        verdict: None,
        plan: &plan,
        header: &header,
        progress: Some(&progress),
        full_report: Some(&link),
        error: Some(problem),
    };
    let comment = render_comment(&input).expect("the comment renders");
    assert_inert(&comment);
    assert!(comment.contains("## ⚠️ AMD PR test: error"), "{comment}");
    assert!(comment.contains("> [!CAUTION]\n> prgate could not finish: the run was stopped"));
    insta::assert_snapshot!("could_not_finish", comment);
}

/// The checklist of a comment: each section's heading mark and the marks of its items.
fn checklist(comment: &str) -> Vec<(String, Vec<String>)> {
    let mark = |text: &str| text.split(" · ").next().unwrap_or_default().to_owned();
    let mut sections: Vec<(String, Vec<String>)> = Vec::new();
    let body = comment.split("### Checklist").nth(1).expect("a checklist");
    let body = body.split("\n### ").next().unwrap_or(body);
    for line in body.lines() {
        if line.starts_with("**") {
            let state = line.split_once("**: ").map(|(_, state)| state).unwrap_or_default();
            sections.push((state.to_owned(), Vec::new()));
        } else if let Some(item) = line.strip_prefix("- ")
            && let Some((_, items)) = sections.last_mut()
            && !item.starts_with('…')
        {
            items.push(mark(item));
        }
    }
    sections
}

#[test]
fn a_finding_in_the_headline_is_its_subject() {
    let cases = [
        (
            "`.github/CODEOWNERS` line 5 modified: `/k/ @a` became `/k/ @b`. It changes owners.",
            Some("`.github/CODEOWNERS` line 5 modified"),
        ),
        // A colon inside code or brackets is not the head's end.
        (
            "the title is not `[Type] [Hardware] scope: summary`: no type",
            Some("the title is not `[Type] [Hardware] scope: summary`"),
        ),
        ("[Speedup] is not a known type (known: Perf, Feat)", None),
        ("no colon here. Another: sentence", None),
        (": nothing before", None),
    ];
    for (summary, head) in cases {
        assert_eq!(finding_head(summary), head, "{summary}");
    }
}

#[test]
fn the_headline_names_the_failure_and_each_heading_is_its_worst_item() {
    let plan = standard_plan();
    let title = "[Fix] [MI355X] kimi_k31: a fix";
    let evidence = with(passing(), |e| {
        replace_speed(
            e,
            "kimi_k31",
            64,
            20.1,
            &[0.06, 0.061, 0.059, 0.06, 0.06, 0.061, 0.059, 0.06],
        )
    });
    let comment = check(&plan, Some(&judged(&plan, &evidence, Some(title))), &header(title), None);
    assert!(
        comment.contains("## ❌ AMD PR test: fail — `kimi_k31` TPOT +6.0% at c=64\n"),
        "{comment}"
    );
    let order = [
        "◻️ not judged",
        "✅ pass",
        "⚠️ warn",
        "📝 author-provided",
        "⏳ pending",
        "🛑 **error**",
        "❌ **fail**",
    ];
    let rank = |mark: &str| order.iter().position(|known| *known == mark).expect(mark);
    let sections = checklist(&comment);
    assert_eq!(sections.len(), 7, "{comment}");
    for (heading, items) in &sections {
        match items.iter().map(|item| rank(item)).max() {
            Some(worst) => assert_eq!(heading, order[worst], "{comment}"),
            None => assert_eq!(heading, "➖ nothing to check", "{comment}"),
        }
    }
    // An uncovered concurrency is shown, never as a pass.
    assert!(comment.contains("- ◻️ not judged · `kimi_k31` speed: TPOT +0.0%"), "{comment}");
    assert!(!comment.contains("-0.0"), "{comment}");
    // The counts are the items shown: the judged ones after the checks, those shown but not
    // judged apart.
    let shown: usize = sections.iter().map(|(_, items)| items.len()).sum();
    let line = comment.lines().find(|line| line.contains("checks judged")).expect("counts");
    let (_, counts) = line.split_once(": ").expect("counts after the checks");
    let counted: usize = counts
        .split(" · ")
        .map(|part| part.trim_start_matches("also shown: "))
        .map(|part| part.split(' ').next().and_then(|n| n.parse::<usize>().ok()).expect(part))
        .sum();
    assert_eq!(counted, shown, "{comment}");
    assert!(line.ends_with(" · also shown: 1 ◻️ not judged"), "{line}");
}

/// A speed item with a change and its interval, as the gate writes it.
fn speed_item(concurrency: u32, change: f64, interval: (f64, f64)) -> Item {
    Item {
        model: Some("kimi_k31".into()),
        check: "speed".into(),
        state: State::Pass,
        rule: "a median-TPOT loss over 3% at a covered concurrency fails".into(),
        summary: String::new(),
        numbers: Some(Numbers::Speed {
            concurrency,
            covered: true,
            base_ms: Some(20.0),
            pr_ms: Some(20.0),
            change: Some(change),
            interval: Some(interval),
            pairs: 3,
            confidence: Confidence::High,
            test: None,
            thresholds: Some(SpeedThresholds {
                max_loss: 0.03,
                min_gain: 0.05,
                gain_required: false,
            }),
            undecided: None,
        }),
    }
}

#[test]
fn the_chart_shows_the_change_against_the_rule_on_an_axis_noise_cannot_fill() {
    // Noise: the axis keeps its least span, the change a band around its mark.
    let noise = [speed_item(64, 0.0001, (-0.001, 0.0012)), speed_item(1, -0.0002, (-0.002, 0.001))];
    let quiet = super::chart("kimi_k31", &noise.iter().collect::<Vec<_>>()).expect("a chart");
    assert_eq!(quiet.range_md, "-10 --> 10");
    // Concurrencies in order; the rule's lines from the items' thresholds (3% here), the
    // gain's 5%, each with its colour after the bars'.
    assert_eq!(quiet.x_md, "\"1\", \"64\"");
    assert_eq!(quiet.lines_md, ["3.00, 3.00", "-5.00, -5.00", "0.00, 0.00"]);
    assert_eq!(quiet.palette_md, "#4a90d9, #0a3069, #4a90d9, #ffffff, #cf222e, #1a7f37, #6e7781");
    assert_eq!((quiet.loss.as_deref(), quiet.gain.as_deref()), (Some("3%"), Some("5%")));
    // Bars tallest first: the interval's top, the mark's top and bottom, the interval's bottom
    // (each at least the mark's 0.2% from the change).
    assert_eq!(quiet.bars_md, ["0.18, 0.21", "0.18, 0.21", "-0.22, -0.19", "-0.22, -0.19"]);
    // A 25% loss widens the axis to hold its interval.
    let loss = [speed_item(1, 0.25, (0.2, 0.3)), speed_item(4, 0.01, (0.0, 0.02))];
    let wide = super::chart("kimi_k31", &loss.iter().collect::<Vec<_>>()).expect("a chart");
    assert_eq!(wide.range_md, "-10 --> 31");
    assert_eq!(wide.bars_md[0], "30.00, 2.00");
    assert_eq!(wide.bars_md[3], "20.00, 0.00");
    // One concurrency: a rule's line needs two points, the table says it all.
    assert!(super::chart("kimi_k31", &[&loss[0]]).is_none());
    // A line beyond the least span widens the axis to hold it.
    let mut strict = noise.clone();
    for item in &mut strict {
        if let Some(Numbers::Speed { thresholds: Some(thresholds), .. }) = &mut item.numbers {
            thresholds.min_gain = 0.125;
        }
    }
    let far = super::chart("kimi_k31", &strict.iter().collect::<Vec<_>>()).expect("a chart");
    assert_eq!((far.range_md.as_str(), far.gain.as_deref()), ("-14 --> 10", Some("12.5%")));
    // A verdict that does not carry the thresholds: only zero is drawn, and its colour is the
    // zero line's, not the loss line's.
    let mut old = noise.clone();
    for item in &mut old {
        if let Some(Numbers::Speed { thresholds, .. }) = &mut item.numbers {
            *thresholds = None;
        }
    }
    let bare = super::chart("kimi_k31", &old.iter().collect::<Vec<_>>()).expect("a chart");
    assert_eq!(bare.lines_md, ["0.00, 0.00"]);
    assert_eq!(bare.palette_md, "#4a90d9, #0a3069, #4a90d9, #ffffff, #6e7781");
    assert_eq!((bare.loss, bare.gain), (None, None));
}

#[test]
fn the_chart_draws_the_lines_the_repository_configured() {
    // A repository that allows a 3% loss and asks a [Perf] PR for an 8% gain: the gate's
    // verdict carries both, and the chart draws them, not the defaults' 2% and 5%.
    let overrides: toml::Table =
        toml::from_str("[speed]\nmax-loss = 0.03\n[gain]\nmin-gain = 0.08\n").expect("TOML");
    let config = prgate_gate::GateConfig::with_overrides(Some(&overrides), "prgate.toml")
        .expect("the settings are valid");
    let plan = standard_plan();
    let title = "[Perf] [MI355X] kimi_k31: faster decode";
    let verdict = crate::fixture::judged_with(&plan, &passing(), Some(title), &config);
    let comment = check(&plan, Some(&verdict), &header(title), None);
    let chart = comment
        .split("xychart-beta")
        .nth(1)
        .expect("a chart")
        .split("```")
        .next()
        .expect("its end");
    let lines: Vec<&str> =
        chart.lines().filter(|line| line.trim_start().starts_with("line [")).collect();
    assert_eq!(
        lines,
        [
            "    line [3.00, 3.00, 3.00, 3.00]",
            "    line [-8.00, -8.00, -8.00, -8.00]",
            "    line [0.00, 0.00, 0.00, 0.00]"
        ],
        "{chart}"
    );
    assert!(comment.contains("🟥 the red line at +3%"), "{comment}");
    assert!(
        comment.contains("🟩 the green line at −8%: this PR's title claims a gain"),
        "{comment}"
    );
}

/// The WCAG 2.1 contrast ratio of two `#rrggbb` colours.
fn contrast(a: &str, b: &str) -> f64 {
    let luminance = |hex: &str| {
        let channel = |at: usize| {
            let value = f64::from(u8::from_str_radix(&hex[at..at + 2], 16).expect("hex")) / 255.0;
            if value <= 0.040_45 { value / 12.92 } else { ((value + 0.055) / 1.055).powf(2.4) }
        };
        0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5)
    };
    let (la, lb) = (luminance(a), luminance(b));
    (la.max(lb) + 0.05) / (la.min(lb) + 0.05)
}

#[test]
fn the_chart_colours_have_the_contrast_graphics_need() {
    use super::colours::*;
    // WCAG 2.1 1.4.11: a graphic's parts need 3:1 against what they sit on; text 4.5:1.
    for (name, colour) in
        [("band", BAND), ("mark", MARK), ("loss", LOSS), ("gain", GAIN), ("zero", ZERO)]
    {
        assert!(
            contrast(colour, GROUND) >= 3.0,
            "{name} {colour}: {:.2}",
            contrast(colour, GROUND)
        );
    }
    assert!(contrast(MARK, BAND) >= 3.0, "the mark in its band: {:.2}", contrast(MARK, BAND));
    assert!(contrast(INK, GROUND) >= 4.5, "text: {:.2}", contrast(INK, GROUND));
    // The computation itself: black on white is 21:1, a colour on itself 1:1.
    assert!((contrast("#000000", "#ffffff") - 21.0).abs() < 1e-9);
    assert!((contrast(BAND, BAND) - 1.0).abs() < 1e-9);
}

#[test]
fn a_changed_recipe_is_shown_as_its_diff_and_is_inert() {
    use prgate_gate::job::RecipeDiff;
    use prgate_gate::verdict::RecipeChange;
    let plan = standard_plan();
    let mut verdict = judged(&plan, &passing(), Some("[Fix] kimi_k31: a recipe"));
    let unchanged = check(&plan, Some(&verdict), &header("t"), None);
    assert!(!unchanged.contains("Recipes changed against base"), "{unchanged}");
    let hostile = "+extra-args = \"``` </details> <img src=x> @admin\"";
    verdict.recipe_changes = vec![RecipeChange {
        model: Some("kimi_k31<b>".into()),
        path: "test/e2e/kimi_k31.toml".into(),
        diff: RecipeDiff {
            text: format!("@@ -3 +3 @@\n-tp = 8\n+tp = 4\n{hostile}\n"),
            omitted: 7,
        },
    }];
    let comment = check(&plan, Some(&verdict), &header("t"), None);
    let at = comment.find("### Recipes changed against base").expect("the section");
    let section = &comment[at..];
    assert!(section.contains(
        "<details><summary><code>kimi_k31&lt;b&gt;</code>: <code>test/e2e/kimi_k31.toml</code></summary>"
    ), "{section}");
    // The fence is longer than any run of backticks in the diff, so nothing leaves the block.
    assert!(
        section.contains("\n````diff\n@@ -3 +3 @@\n-tp = 8\n+tp = 4\n+extra-args"),
        "{section}"
    );
    assert!(section.contains("… and 7 more lines of the diff, not shown here."), "{section}");
    let prose = outside_code(&comment).join("\n");
    for raw in ["@admin", "<img", "tp = 4"] {
        assert!(!prose.contains(raw), "{raw} is outside the code block");
    }
    // The full report shows it too; the shortest renderings drop it.
    let link = link();
    let header = header("t");
    let input = CommentInput {
        verdict: Some(&verdict),
        plan: &plan,
        header: &header,
        progress: None,
        full_report: Some(&link),
        error: None,
    };
    assert!(render_full_report(&input).expect("renders").contains("+tp = 4"));
}

#[test]
fn a_drained_node_is_one_header_row() {
    let plan = standard_plan();
    let verdict = judged(&plan, &passing(), Some("[Fix] x"));
    let mut header = header("[Fix] x");
    header.drained = vec![crate::comment::DrainedNode {
        name: "mi355x-2".into(),
        reason: "3 strikes within 7d".into(),
    }];
    let comment = check(&plan, Some(&verdict), &header, None);
    let row: Vec<&str> = comment.lines().filter(|line| line.contains("Drained")).collect();
    assert_eq!(
        row,
        ["| Drained | `mi355x-2` (3 strikes within 7d): left out of this run |"],
        "{comment}"
    );
    header.drained.clear();
    let comment = check(&plan, Some(&verdict), &header, None);
    assert!(!comment.contains("Drained"), "{comment}");
}

#[test]
fn the_headers_image_is_every_image_the_evidence_names_once_in_order() {
    let ran_in = |image: Option<&str>| {
        let mut record = tests(Some("kimi_k31"), Check::UnitTests, Side::Pr, &[]);
        record.provenance.image_digest = image.map(str::to_owned);
        record
    };
    for (images, expected) in [
        (vec![], None),
        (vec![None], None),
        (vec![Some("rocm@sha256:1"), None, Some("rocm@sha256:1")], Some("rocm@sha256:1")),
        (vec![Some("b:2"), Some("a:1"), Some("b:2")], Some("b:2, a:1")),
    ] {
        let evidence: Vec<Evidence> = images.into_iter().map(ran_in).collect();
        assert_eq!(Header::image_of(&evidence).as_deref(), expected);
    }
}

#[test]
fn the_headers_commits_are_the_plans_head_and_base_side() {
    let mut plan = standard_plan();
    let header = Header::of(&plan, 7, Some("[Fix] x: y".to_owned()));
    assert_eq!((header.pr_number, header.title.as_deref()), (7, Some("[Fix] x: y")));
    assert_eq!(header.pr_sha, plan.head.sha);
    assert_eq!(header.base_sha, plan.base_side_commit());
    assert!(header.nodes.is_empty() && header.image.is_none() && header.run_url.is_none());
    // Without a merge-base, the base side is the base.
    plan.merge_base = None;
    assert_eq!(Header::of(&plan, 7, None).base_sha, plan.base.sha);
}
