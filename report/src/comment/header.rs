//! The comment's head and foot: the headline (the result and the items that decided it), the
//! counts, the header rows (commits, nodes, image, run), the progress table while a run goes,
//! the note when the comment was shortened, and the footer with its links. Every string is
//! built from escaped parts; the layout is the template's.

use std::fmt::Write as _;

use prgate_gate::verdict::{Headline, Item, Numbers, State, Verdict};

use crate::escape::{MarkdownPlace, markdown_code, markdown_text};

use super::{
    Detail, Header, HeaderRow, Progress, ProgressRow, ReportLink, StepState, Target, capped,
    finding_md, percent, points, shorten, state_md,
};

/// The headline: the result, and for a failure or an error what failed or could not be
/// judged, so that a reviewer need not scan the sections for it.
pub(super) fn result_md(
    verdict: Option<&Verdict>,
    progress: Option<&Progress>,
    detail: Detail,
) -> String {
    let Some(verdict) = verdict else {
        return "⏳ AMD PR test: running".to_owned();
    };
    let word = match verdict.headline() {
        Headline::Fail => "❌ AMD PR test: fail",
        Headline::CannotJudge => "🛑 AMD PR test: could not judge",
        Headline::Pending if progress.is_some() => "⏳ AMD PR test: running",
        Headline::Pending => "⏳ AMD PR test: pending",
        Headline::PassWithWarnings => "✅ AMD PR test: pass, with warnings",
        Headline::Pass => "✅ AMD PR test: pass",
    };
    let named = match verdict.result {
        State::Fail | State::Error => verdict.result,
        _ => return word.to_owned(),
    };
    let items: Vec<&Item> = verdict
        .sections
        .iter()
        .flat_map(|section| &section.items)
        .filter(|item| item.state == named)
        .collect();
    // The same check on both sides (a harness that cannot start) is named once.
    let mut phrases: Vec<String> = Vec::new();
    for item in items {
        let phrase = item_phrase_md(item, detail);
        if !phrases.contains(&phrase) {
            phrases.push(phrase);
        }
    }
    const NAMED: usize = 2;
    let mut text = capped(&phrases, Some(NAMED)).join(", ");
    if phrases.len() > NAMED {
        let _ = write!(text, " and {} more", phrases.len() - NAMED);
    }
    if text.is_empty() { word.to_owned() } else { format!("{word} — {text}") }
}

/// The longest summary the headline repeats.
const HEADLINE_SUMMARY: usize = 60;

/// An item in a few words, for the headline: the model, the check and the number that
/// decided it (`` `glm53_flash` TPOT +24.7% at c=1 ``).
fn item_phrase_md(item: &Item, detail: Detail) -> String {
    let model = item
        .model
        .as_deref()
        .map(|model| format!("{} ", markdown_code(&detail.text(model), MarkdownPlace::Paragraph)))
        .unwrap_or_default();
    let prose = |text: &str| markdown_text(&detail.text(text), MarkdownPlace::Paragraph);
    let what = match &item.numbers {
        Some(Numbers::Speed { concurrency, change: Some(change), .. }) => {
            format!("TPOT {} at c={concurrency}", percent(*change))
        }
        Some(Numbers::Accuracy { benchmark, difference, .. }) => {
            format!("accuracy {} {} points", prose(benchmark), points(*difference))
        }
        Some(Numbers::Kernel { kernel, change, .. }) => {
            format!("{} {}", prose(kernel), percent(*change))
        }
        Some(Numbers::Tests { failed, errors, .. }) if failed + errors > 0 => {
            let mut counts = Vec::new();
            if *failed > 0 {
                counts.push(format!("{failed} failed"));
            }
            if *errors > 0 {
                counts.push(format!("{errors} errors"));
            }
            format!("{}: {}", prose(&item.check), counts.join(", "))
        }
        // A short summary says it all (`gain: no covered concurrency shows a 5% gain`), or
        // its head before the details does (`accuracy (tiny-math): crashed — question…`); a
        // long one is left to the checklist.
        // A finding written as sentences names its subject before a colon (`` `CODEOWNERS`
        // line 5 modified: ... ``): that head says what failed.
        _ => {
            let summary = item.summary.lines().next().unwrap_or_default();
            let short = |text: &str| text.chars().count() <= HEADLINE_SUMMARY;
            match summary.split_once(" — ") {
                Some((head, _)) if short(head) => finding_md(&detail.text(head)),
                None if short(summary) => {
                    format!("{}: {}", prose(&item.check), finding_md(&detail.text(summary)))
                }
                _ => match finding_head(summary)
                    .filter(|head| short(head) && summary.contains(". "))
                {
                    Some(head) => {
                        format!("{}: {}", prose(&item.check), finding_md(&detail.text(head)))
                    }
                    None => prose(&item.check),
                },
            }
        }
    };
    format!("{model}{what}")
}

/// A finding's first sentence up to its first `: ` outside code and brackets (`` `CODEOWNERS`
/// line 5 modified ``), when that sentence has one.
pub(super) fn finding_head(summary: &str) -> Option<&str> {
    let sentence = summary.split(". ").next().unwrap_or(summary);
    let mut in_code = false;
    let mut depth = 0usize;
    for (at, c) in sentence.char_indices() {
        match c {
            '`' => in_code = !in_code,
            '(' | '[' if !in_code => depth += 1,
            ')' | ']' if !in_code => depth = depth.saturating_sub(1),
            ':' if !in_code && depth == 0 && sentence[at + 1..].starts_with(' ') => {
                return Some(&sentence[..at]).filter(|head| !head.trim().is_empty());
            }
            _ => {}
        }
    }
    None
}

/// How many checklist items are in each state, worst first; the items shown but not judged (an
/// uncovered concurrency) after them, apart: they are not among the checks counted.
pub(super) fn counts_md(verdict: Option<&Verdict>) -> String {
    let Some(verdict) = verdict else {
        return "No check has finished yet.".to_owned();
    };
    let states = [
        State::Fail,
        State::Error,
        State::Pending,
        State::AuthorProvided,
        State::Warn,
        State::Pass,
    ];
    let count = |state: State| {
        verdict
            .sections
            .iter()
            .flat_map(|section| &section.items)
            .filter(|item| item.state == state)
            .count()
    };
    let parts: Vec<String> = states
        .iter()
        .filter_map(|state| {
            let count = count(*state);
            (count > 0).then(|| format!("{count} {}", state_md(*state)))
        })
        .collect();
    let not_judged = count(State::NotJudged);
    if parts.is_empty() && not_judged == 0 {
        return "No checklist items.".to_owned();
    }
    let checks = verdict.checks;
    let mut line = format!("{} of {} checks judged", checks.judged, checks.expected);
    if !parts.is_empty() {
        line.push_str(": ");
        line.push_str(&parts.join(" · "));
    }
    if not_judged > 0 {
        line.push_str(&format!(" · also shown: {not_judged} {}", state_md(State::NotJudged)));
    }
    line
}

pub(super) fn header_rows(header: &Header, detail: Detail) -> Vec<HeaderRow> {
    let code = |text: &str| markdown_code(&detail.text(text), MarkdownPlace::TableCell);
    let nodes_md = capped_list(&header.nodes, detail, |node| code(node));
    let dash = || "—".to_owned();
    let mut rows = vec![
        HeaderRow { label_md: "PR commit (pinned)", value_md: sha_md(&header.pr_sha, CELL_TEXT) },
        HeaderRow { label_md: "Base commit", value_md: sha_md(&header.base_sha, CELL_TEXT) },
        HeaderRow {
            label_md: "Node(s)",
            value_md: if nodes_md.is_empty() { dash() } else { nodes_md.join(", ") },
        },
        HeaderRow { label_md: "Image", value_md: header.image.as_deref().map_or_else(dash, code) },
        HeaderRow {
            label_md: "Run",
            value_md: header
                .run_url
                .as_deref()
                .and_then(link_target)
                .map_or_else(dash, |url| format!("[workflow run]({url})")),
        },
    ];
    if !header.drained.is_empty() {
        let listed = capped_list(&header.drained, detail, |node| {
            let reason = markdown_text(&detail.text(&node.reason), MarkdownPlace::TableCell);
            format!("{} ({reason})", code(&node.name))
        });
        rows.push(HeaderRow {
            label_md: "Drained",
            value_md: format!("{}: left out of this run", listed.join(", ")),
        });
    }
    if !header.drift.is_empty() {
        let listed = capped_list(&header.drift, detail, |words| {
            markdown_text(&detail.text(words), MarkdownPlace::TableCell)
        });
        rows.push(HeaderRow {
            label_md: "Drift",
            value_md: format!("❌ over the budget since the reference: {}", listed.join("; ")),
        });
    }
    if let Some(estimate) = &header.estimate {
        rows.push(HeaderRow {
            label_md: "Estimate",
            value_md: markdown_text(&detail.text(estimate), MarkdownPlace::TableCell),
        });
    }
    for (label_md, words) in [("GPU time", &header.gpu_time), ("Re-run", &header.reuse)] {
        if let Some(words) = words {
            rows.push(HeaderRow {
                label_md,
                value_md: markdown_text(&detail.text(words), MarkdownPlace::TableCell),
            });
        }
    }
    rows
}

/// The list's first items as `show` words them, at most the detail's item cap of them, then
/// `and N more` for the rest.
fn capped_list<T>(list: &[T], detail: Detail, show: impl Fn(&T) -> String) -> Vec<String> {
    let shown = capped(list, detail.item_cap());
    let mut words: Vec<String> = shown.iter().map(show).collect();
    if shown.len() < list.len() {
        words.push(format!("and {} more", list.len() - shown.len()));
    }
    words
}

/// How long a commit that is not a hash may be when shown, and where it stands.
const CELL_TEXT: (usize, MarkdownPlace) = (100, MarkdownPlace::TableCell);

const PARAGRAPH_TEXT: (usize, MarkdownPlace) = (100, MarkdownPlace::Paragraph);

/// A commit: bare when it is a hash (GitHub links it), else as code.
fn sha_md(sha: &str, (cap, place): (usize, MarkdownPlace)) -> String {
    let is_sha = (7..=64).contains(&sha.len()) && sha.bytes().all(|b| b.is_ascii_hexdigit());
    if is_sha {
        sha.to_owned()
    } else if sha.is_empty() {
        "—".to_owned()
    } else {
        markdown_code(&shorten(sha, cap), place)
    }
}

/// A URL fit for a Markdown link: `http(s)` only, and every character that could end the
/// link, the table cell or the line percent-encoded.
pub(crate) fn link_target(url: &str) -> Option<String> {
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        return None;
    }
    let mut out = String::with_capacity(url.len());
    for c in url.chars() {
        if c.is_ascii_alphanumeric() || "-._~:/?#@!$&*+,;=%".contains(c) {
            out.push(c);
        } else {
            let mut buffer = [0; 4];
            for byte in c.encode_utf8(&mut buffer).bytes() {
                let _ = write!(out, "%{byte:02X}");
            }
        }
    }
    Some(out)
}

fn report_link_md(link: &ReportLink) -> String {
    let name = markdown_code(&shorten(&link.name, 200), MarkdownPlace::Paragraph);
    match link.url.as_deref().and_then(link_target) {
        Some(url) => format!("[{name}]({url})"),
        None => format!("{name}, uploaded with the run"),
    }
}

pub(super) fn note_md(
    detail: Detail,
    target: &Target,
    link: Option<&ReportLink>,
) -> Option<String> {
    let what = match detail {
        Detail::Full => return None,
        Detail::NoDetails => "the per-model details and the scope are left out".to_owned(),
        Detail::Capped { items, .. } => format!(
            "the per-model details and the scope are left out, lists show at most {items} entries and long texts are shortened"
        ),
        Detail::Minimal => "only each section's state is shown".to_owned(),
    };
    let mut note = format!("> [!NOTE]\n> To stay within {}, {what}.", target.limit_words);
    match link {
        Some(link) => {
            let _ = write!(note, " The full report: {}.", report_link_md(link));
        }
        None => note.push_str(
            " This run wrote no full report to link: `prgate publish --report-out FILE` writes one.",
        ),
    }
    Some(note)
}

pub(super) fn footer_md(header: &Header, link: Option<&ReportLink>) -> String {
    let mut footer = format!(
        "<sub>Results are for the pinned commit {}: a later push needs a new run.",
        sha_md(&header.pr_sha, PARAGRAPH_TEXT)
    );
    if let Some(link) = link {
        let _ = write!(footer, " Full report: {}.", report_link_md(link));
    }
    footer.push_str("</sub>");
    footer
}

pub(super) fn progress_totals(progress: &Progress) -> String {
    let count = |state: StepState| progress.steps.iter().filter(|step| step.state == state).count();
    format!(
        "{} of {} steps done, {} running, {} waiting.",
        count(StepState::Done),
        progress.steps.len(),
        count(StepState::Running),
        count(StepState::Waiting)
    )
}

/// One row per model (and the common checks), in the order the steps first name them.
pub(super) fn progress_rows(progress: &Progress, detail: Detail) -> Vec<ProgressRow> {
    let mut owners: Vec<Option<&str>> = Vec::new();
    for step in &progress.steps {
        if !owners.contains(&step.model.as_deref()) {
            owners.push(step.model.as_deref());
        }
    }
    let shown = capped(&owners, detail.item_cap());
    shown
        .iter()
        .map(|owner| {
            let cell = |state: StepState| {
                let checks: Vec<&str> = progress
                    .steps
                    .iter()
                    .filter(|step| step.model.as_deref() == *owner && step.state == state)
                    .map(|step| step.check.as_str())
                    .collect();
                if checks.is_empty() {
                    return "—".to_owned();
                }
                let names = capped(&checks, detail.item_cap());
                let mut text =
                    names.iter().map(|check| detail.text(check)).collect::<Vec<_>>().join(", ");
                if names.len() < checks.len() {
                    let _ = write!(text, " and {} more", checks.len() - names.len());
                }
                text
            };
            ProgressRow {
                who_md: owner.map_or_else(
                    || "common checks".to_owned(),
                    |model| markdown_code(&detail.text(model), MarkdownPlace::TableCell),
                ),
                done: cell(StepState::Done),
                running: cell(StepState::Running),
                waiting: cell(StepState::Waiting),
            }
        })
        .collect()
}
