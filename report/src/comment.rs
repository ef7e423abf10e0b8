//! The PR comment: the one place where the author and the reviewers read a PR test. A hidden
//! marker finds it again; a header names the pinned PR commit, the base commit, the nodes, the
//! image and the run; while a run goes, a progress table; the checklist in the guideline's
//! order; what the author must provide; per model, collapsible tables of base against PR and a
//! Mermaid chart of median TPOT against concurrency; and the plan's scope.
//!
//! The layout is the tera template `templates/comment.md.tera`, embedded in the crate. The
//! engine escapes every string the template prints as Markdown prose
//! ([`crate::escape::markdown_text`]); the fields named `*_md` (and `summary_html`) are text
//! this module built from escaped parts, printed as they are. So a field added later is
//! escaped unless someone decides otherwise.
//!
//! GitHub refuses a comment over [`COMMENT_LIMIT`] characters: [`render_comment`] first drops
//! the per-model details and the scope, then shortens the lists, then keeps only each
//! section's state, and says so with a pointer to the full report. [`render_full_report`]
//! keeps everything. Posting, finding the comment again and uploading the full report are the
//! binary's business.

use std::fmt::Write as _;

use prgate_gate::verdict::{Confidence, Item, Numbers, Section, State, Verdict};
use prgate_scope::plan::{Plan, Tier};
use serde::Serialize;

use crate::escape::{
    MarkdownPlace, html_text, markdown_code, markdown_text, markdown_text_with_code,
};

/// The hidden first line that identifies prgate's comment on a PR (with the bot's login: a
/// comment by someone else that carries it is not ours).
pub const MARKER: &str = "<!-- prgate:amd-pr-test -->";

/// The most characters GitHub takes in a comment's body.
pub const COMMENT_LIMIT: usize = 65_536;

/// What a comment shows: the verdict so far (`None` before any check has finished), the plan,
/// the facts of the run and, while it goes, its progress.
#[derive(Debug, Clone, Copy)]
pub struct CommentInput<'a> {
    pub verdict: Option<&'a Verdict>,
    pub plan: &'a Plan,
    pub header: &'a Header,
    pub progress: Option<&'a Progress>,
    /// Where the full report is, for a comment that had to leave details out.
    pub full_report: Option<&'a ReportLink>,
    /// prgate could not finish, and why (a crash, a timeout, a cancelled job): the comment
    /// says so above what was done and what was not.
    pub error: Option<&'a str>,
}

/// The facts of a run that the comment's header shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Header {
    pub pr_number: u64,
    /// The PR's title, as its author wrote it.
    pub title: Option<String>,
    /// The head commit the run pinned: every result is for this commit.
    pub pr_sha: String,
    pub base_sha: String,
    /// The GPU nodes the run used.
    pub nodes: Vec<String>,
    /// The container image (a digest or a tag).
    pub image: Option<String>,
    /// The workflow run's page.
    pub run_url: Option<String>,
    /// What the run is expected to take (GPU time, and the makespan on the nodes), in words.
    pub estimate: Option<String>,
    /// The GPU time the run measured, by model and phase, in words
    /// ([`crate::gpu_hours::words`]).
    pub gpu_time: Option<String>,
    /// What the run took over from an earlier run of the same commits, in words
    /// ([`crate::rerun::Reuse::words`]).
    pub reuse: Option<String>,
    /// The nodes prgate's health ledger had drained, which the run left out.
    pub drained: Vec<DrainedNode>,
    /// The drift guards over their budget since the reference, in words
    /// ([`crate::history::alarm_words`]; docs/history.md).
    pub drift: Vec<String>,
}

/// A node the health ledger drained (docs/node.md): its name, and why in a few words
/// (`3 strikes within 7d`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DrainedNode {
    pub name: String,
    pub reason: String,
}

/// Where a run is: every planned step and its state. The runner fills it; as JSON (for
/// `prgate report --progress`), `{"steps": [{"model": "kimi_k31", "check": "unit tests",
/// "state": "done"}]}` with states `done`, `running` and `waiting`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Progress {
    pub steps: Vec<StepProgress>,
}

/// One step of a run: a check of a model (or of the common checks, `model: None`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StepProgress {
    pub model: Option<String>,
    /// The check in words (`unit tests`, `E2E speed`, ...).
    pub check: String,
    pub state: StepState,
}

/// Whether a step has finished, is running or waits for its turn.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum StepState {
    Done,
    Running,
    Waiting,
}

/// The full report as the workflow uploads it: the file's name and, when known, its URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportLink {
    pub name: String,
    pub url: Option<String>,
}

/// The template could not be rendered: a bug in the template or in the data this crate gives
/// it, since both are built in.
#[derive(Debug, thiserror::Error)]
#[error("cannot render the template {template}")]
pub struct RenderError {
    template: &'static str,
    #[source]
    source: tera::Error,
}

/// The comment, at most [`COMMENT_LIMIT`] characters, starting with [`MARKER`].
pub fn render_comment(input: &CommentInput<'_>) -> Result<String, RenderError> {
    render_within(
        input,
        &Target {
            marker: true,
            limit: Limit::Chars(COMMENT_LIMIT),
            limit_words: "GitHub's limit of 65,536 characters for a comment",
        },
    )
}

/// Everything, with no limit and no marker: the file the workflow uploads as the full report.
pub fn render_full_report(input: &CommentInput<'_>) -> Result<String, RenderError> {
    render(input, Detail::Full, &Target { marker: false, limit: Limit::None, limit_words: "" })
}

/// Whether a comment's body is one prgate wrote: it starts with [`MARKER`]. The binary also
/// checks the comment's author.
pub fn is_prgate_comment(body: &str) -> bool {
    body.trim_start().starts_with(MARKER)
}

/// Where a rendering goes: with the marker or not, and how much it may hold.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Target {
    pub(crate) marker: bool,
    pub(crate) limit: Limit,
    /// The limit in words, for the note that says what was left out.
    pub(crate) limit_words: &'static str,
}

/// How much a rendering may hold.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Limit {
    None,
    Chars(usize),
    Bytes(usize),
}

impl Limit {
    fn fits(self, text: &str) -> bool {
        match self {
            Limit::None => true,
            Limit::Chars(max) => text.chars().count() <= max,
            Limit::Bytes(max) => text.len() <= max,
        }
    }

    /// The text cut to fit, with a last line that says so. Only reached when even the
    /// shortest rendering is too long, which the caps on every field should prevent.
    fn cut(self, text: &str) -> String {
        const CUT_NOTE: &str = "\n\n… cut here to fit the limit.\n";
        let keep = match self {
            Limit::None => return text.to_owned(),
            Limit::Chars(max) => max.saturating_sub(CUT_NOTE.chars().count()),
            Limit::Bytes(max) => max.saturating_sub(CUT_NOTE.len()),
        };
        let mut out = String::new();
        for (count, c) in text.chars().enumerate() {
            let fits = match self {
                Limit::Bytes(_) => out.len() + c.len_utf8() <= keep,
                _ => count < keep,
            };
            if !fits {
                break;
            }
            out.push(c);
        }
        out.push_str(CUT_NOTE);
        out
    }
}

/// The fullest rendering that fits the target.
pub(crate) fn render_within(
    input: &CommentInput<'_>,
    target: &Target,
) -> Result<String, RenderError> {
    let mut text = String::new();
    for detail in SHRINK_STEPS {
        text = render(input, detail, target)?;
        if target.limit.fits(&text) {
            return Ok(text);
        }
    }
    Ok(target.limit.cut(&text))
}

/// How much of the report a rendering keeps, from everything to the least that still says what
/// matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Detail {
    /// Everything.
    Full,
    /// No per-model details and no scope.
    NoDetails,
    /// As `NoDetails`, and at most `items` entries of a list and `text` characters of a text
    /// from the PR or the verdict.
    Capped { items: usize, text: usize },
    /// Each section's state, and counts.
    Minimal,
}

/// The renderings tried, fullest first.
const SHRINK_STEPS: [Detail; 7] = [
    Detail::Full,
    Detail::NoDetails,
    Detail::Capped { items: 50, text: 1_000 },
    Detail::Capped { items: 30, text: 500 },
    Detail::Capped { items: 20, text: 300 },
    Detail::Capped { items: 5, text: 120 },
    Detail::Minimal,
];

/// How long a text may be and how many entries a list may have in a minimal rendering.
const MINIMAL_TEXT: usize = 120;
const MINIMAL_ITEMS: usize = 3;

impl Detail {
    fn text_cap(self) -> Option<usize> {
        match self {
            Detail::Full | Detail::NoDetails => None,
            Detail::Capped { text, .. } => Some(text),
            Detail::Minimal => Some(MINIMAL_TEXT),
        }
    }

    fn item_cap(self) -> Option<usize> {
        match self {
            Detail::Full | Detail::NoDetails => None,
            Detail::Capped { items, .. } => Some(items),
            Detail::Minimal => Some(MINIMAL_ITEMS),
        }
    }

    /// Text from the PR or the verdict, shortened to this rendering's cap.
    fn text(self, text: &str) -> String {
        match self.text_cap() {
            Some(cap) => shorten(text, cap),
            None => text.to_owned(),
        }
    }
}

const TEMPLATE_NAME: &str = "comment.md";
const TEMPLATE: &str = include_str!("../templates/comment.md.tera");

fn render(
    input: &CommentInput<'_>,
    detail: Detail,
    target: &Target,
) -> Result<String, RenderError> {
    let error = |source| RenderError { template: TEMPLATE_NAME, source };
    let mut tera = tera::Tera::new();
    tera.add_raw_template(TEMPLATE_NAME, TEMPLATE).map_err(error)?;
    tera.autoescape_on([".md"]);
    tera.set_escape_fn(escape_for_template);
    let context = tera::Context::from_serialize(&view(input, detail, target)).map_err(error)?;
    let text = tera.render(TEMPLATE_NAME, &context).map_err(error)?;
    Ok(single_blank_lines(&text))
}

/// The text with runs of blank lines made one, so that the template can be generous with
/// them: Markdown needs a blank line between blocks and never more. No block prgate renders
/// holds two blank lines in a row.
fn single_blank_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        if line.trim().is_empty() && (out.is_empty() || out.ends_with("\n\n")) {
            continue;
        }
        out.push_str(line);
    }
    out
}

/// The engine's escaping: Markdown prose that is safe in a table cell too.
fn escape_for_template(text: &str, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    out.write_all(markdown_text(text, MarkdownPlace::TableCell).as_bytes())
}

/// What the template shows. Strings are escaped by the engine, except the `*_md` and
/// `*_html` fields, which are built here from escaped parts.
#[derive(Debug, Serialize)]
struct View {
    marker_md: Option<&'static str>,
    result_md: String,
    counts_md: String,
    pr_number: u64,
    title: Option<String>,
    header: Vec<HeaderRow>,
    note_md: Option<String>,
    error_md: Option<String>,
    progress_md: Option<String>,
    progress: Vec<ProgressRow>,
    sections: Vec<SectionView>,
    author_md: Vec<String>,
    author_more: usize,
    /// The recipes the PR changed, each as a diff against base (not in the shortest renderings).
    recipe_changes: Vec<RecipeChangeView>,
    models: Vec<ModelView>,
    scope_md: Option<String>,
    footer_md: String,
}

#[derive(Debug, Serialize)]
struct HeaderRow {
    label_md: &'static str,
    value_md: String,
}

#[derive(Debug, Serialize)]
struct ProgressRow {
    who_md: String,
    done: String,
    running: String,
    waiting: String,
}

#[derive(Debug, Serialize)]
struct SectionView {
    number: usize,
    title_md: &'static str,
    state_md: &'static str,
    /// Whether the items are listed (not in a minimal rendering).
    items_shown: bool,
    items: Vec<ItemView>,
    /// Items not shown.
    more: usize,
    /// How many items, in words: `(3 items)`.
    count_md: String,
}

#[derive(Debug, Serialize)]
struct ItemView {
    state_md: &'static str,
    who_md: String,
    check: String,
    /// The summary's first line, its backticked parts as code.
    summary_md: String,
    rule_md: Option<String>,
    /// The summary's other lines (a log's tail), as an indented fenced code block.
    log_md: Option<String>,
}

/// A recipe the PR changed: whose it is, and its diff against base as a fenced `diff` block
/// (shown literally; the runner redacted and cut it), with a note when lines were left out.
#[derive(Debug, Serialize)]
struct RecipeChangeView {
    who_html: String,
    diff_md: String,
    omitted: usize,
}

#[derive(Debug, Serialize)]
struct ModelView {
    summary_html: String,
    speed: Vec<SpeedRow>,
    chart: Option<Chart>,
    accuracy: Vec<AccuracyRow>,
    kernels: Vec<KernelRow>,
    tests: Vec<TestsRow>,
    empty: bool,
}

#[derive(Debug, Serialize)]
struct SpeedRow {
    concurrency: String,
    /// `base → PR`.
    medians: String,
    /// The change and its interval: `+2.7% [-3.0, +8.8]`.
    change: String,
    /// The pairs, and how the test ended when not at its bound: `5`, `16, undecided`,
    /// `3, open`.
    pairs: String,
    state_md: &'static str,
}

/// A Mermaid `xychart-beta` of the TPOT change per concurrency, PR against base, with its
/// interval, against the rule's lines as the verdict gives them. Every field holds only
/// digits, dots, commas, spaces, minus signs, `#`, hexadecimal colours, quotes around digits
/// and the sanitized model name.
#[derive(Debug, Serialize)]
struct Chart {
    title_md: String,
    x_md: String,
    /// The y-axis range: `-10 --> 10`.
    range_md: String,
    /// Bars drawn over each other, tallest first, each from the bottom of the plot: the
    /// interval's top, the change's mark, the interval again under it, then the chart's
    /// background up to the interval's bottom. What shows is a band from the interval's low
    /// to its high with a dark mark at the change.
    bars_md: Vec<String>,
    /// The rule's lines: the loss threshold and the gain threshold when the verdict gives
    /// them, and zero.
    lines_md: Vec<String>,
    /// The series' colours in the order they are drawn (bars, then lines), for Mermaid's
    /// `plotColorPalette`.
    palette_md: String,
    /// The chart's background, and its text and axes' colour.
    ground_md: &'static str,
    ink_md: &'static str,
    /// The loss and gain thresholds in percent, when the verdict gives them.
    loss: Option<String>,
    gain: Option<String>,
    /// Whether the PR's title claims a gain (so the gain line is judged).
    gain_required: bool,
    /// [`CHART_MIN_SPAN`] in words.
    span: String,
}

/// The chart's colours. The ground is the chart's own (white in light and dark themes alike),
/// and the interval's bottom is painted in it; every other colour has at least 3:1 contrast
/// against it (WCAG 2.1's 1.4.11 for graphics), and the change's mark 3:1 against the band.
/// `.ci/render-comments` measures them in the rendered SVG.
pub(crate) mod colours {
    /// The chart's background, and the bar that paints it over the band below the interval.
    pub(crate) const GROUND: &str = "#ffffff";
    /// Text and axes.
    pub(crate) const INK: &str = "#1f2328";
    /// The 95% interval's band.
    pub(crate) const BAND: &str = "#4a90d9";
    /// The change's mark inside the band.
    pub(crate) const MARK: &str = "#0a3069";
    /// The loss threshold's line.
    pub(crate) const LOSS: &str = "#cf222e";
    /// The gain threshold's line.
    pub(crate) const GAIN: &str = "#1a7f37";
    /// The line at no change.
    pub(crate) const ZERO: &str = "#6e7781";
}

#[derive(Debug, Serialize)]
struct AccuracyRow {
    benchmark: String,
    /// `base → PR`.
    accuracies: String,
    /// The difference and its interval: `-1.2 [-3.0, +0.6]`.
    difference: String,
    /// The questions, with a `†` when the sides did not answer the same ones (unpaired):
    /// `40`, `40†`. (The p-value is in the checklist's line.)
    questions: String,
    tolerance: String,
    state_md: &'static str,
}

#[derive(Debug, Serialize)]
struct KernelRow {
    kernel: String,
    /// `base → PR`.
    times: String,
    change: String,
    state_md: &'static str,
}

#[derive(Debug, Serialize)]
struct TestsRow {
    suite: String,
    passed: usize,
    failed: usize,
    errors: usize,
    skipped: usize,
    pre_existing: usize,
    state_md: &'static str,
}

fn view(input: &CommentInput<'_>, detail: Detail, target: &Target) -> View {
    let verdict = input.verdict;
    let full = detail == Detail::Full;
    let (author, author_more) = match verdict {
        Some(verdict) => {
            let shown = capped(&verdict.author_must_provide, detail.item_cap());
            let lines = if detail == Detail::Minimal {
                Vec::new()
            } else {
                shown.iter().map(|line| finding_md(&detail.text(line))).collect()
            };
            let more = verdict.author_must_provide.len() - lines.len();
            (lines, more)
        }
        None => (Vec::new(), 0),
    };
    View {
        marker_md: target.marker.then_some(MARKER),
        result_md: match input.error {
            Some(_) => "⚠️ AMD PR test: error".to_owned(),
            None => result_md(verdict, input.progress, detail),
        },
        error_md: input.error.map(|problem| {
            format!(
                "> [!CAUTION]\n> prgate could not finish: {}. The checks shown as done ran; the others did not, and the status is `error`. A maintainer can start the run again.",
                crate::escape::markdown_text(
                    &detail.text(&problem.lines().collect::<Vec<_>>().join(" / ")),
                    crate::escape::MarkdownPlace::Paragraph
                )
            )
        }),
        counts_md: counts_md(verdict),
        pr_number: input.header.pr_number,
        title: input.header.title.as_deref().map(|title| detail.text(title)),
        header: header_rows(input.header, detail),
        note_md: note_md(detail, target, input.full_report),
        progress_md: input.progress.map(progress_totals),
        progress: match (input.progress, detail) {
            (Some(progress), detail) if detail != Detail::Minimal => {
                progress_rows(progress, detail)
            }
            _ => Vec::new(),
        },
        sections: verdict.map(|verdict| sections(verdict, detail)).unwrap_or_default(),
        author_md: author,
        author_more,
        recipe_changes: match verdict {
            Some(verdict) if matches!(detail, Detail::Full | Detail::NoDetails) => {
                recipe_changes(verdict)
            }
            _ => Vec::new(),
        },
        models: match verdict {
            Some(verdict) if full => models(verdict, input.plan),
            _ => Vec::new(),
        },
        scope_md: full.then(|| crate::plan::markdown(input.plan)),
        footer_md: footer_md(input.header, input.full_report),
    }
}

/// The headline: the result, and for a failure or an error what failed or could not be
/// judged, so that a reviewer need not scan the sections for it.
fn result_md(verdict: Option<&Verdict>, progress: Option<&Progress>, detail: Detail) -> String {
    let Some(verdict) = verdict else {
        return "⏳ AMD PR test: running".to_owned();
    };
    let worst = verdict.sections.iter().map(|section| section.state).max();
    let word = match verdict.result {
        State::Fail => "❌ AMD PR test: fail",
        State::Error => "🛑 AMD PR test: could not judge",
        State::Pending if progress.is_some() => "⏳ AMD PR test: running",
        State::Pending => "⏳ AMD PR test: pending",
        _ if worst.is_some_and(|state| state > State::Pass) => {
            "✅ AMD PR test: pass, with warnings"
        }
        _ => "✅ AMD PR test: pass",
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
fn finding_head(summary: &str) -> Option<&str> {
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
fn counts_md(verdict: Option<&Verdict>) -> String {
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

/// A state in words, with an emoji that repeats it: meaning never rests on colour alone.
fn state_md(state: State) -> &'static str {
    match state {
        State::Pass => "✅ pass",
        State::Warn => "⚠️ warn",
        State::AuthorProvided => "📝 author-provided",
        State::Pending => "⏳ pending",
        State::Error => "🛑 **error**",
        State::Fail => "❌ **fail**",
        State::NothingToCheck => "➖ nothing to check",
        State::NotJudged => "◻️ not judged",
    }
}

fn header_rows(header: &Header, detail: Detail) -> Vec<HeaderRow> {
    let code = |text: &str| markdown_code(&detail.text(text), MarkdownPlace::TableCell);
    let nodes = capped(&header.nodes, detail.item_cap());
    let mut nodes_md: Vec<String> = nodes.iter().map(|node| code(node)).collect();
    if nodes.len() < header.nodes.len() {
        nodes_md.push(format!("and {} more", header.nodes.len() - nodes.len()));
    }
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
        let drained = capped(&header.drained, detail.item_cap());
        let mut listed: Vec<String> = drained
            .iter()
            .map(|node| {
                let reason = markdown_text(&detail.text(&node.reason), MarkdownPlace::TableCell);
                format!("{} ({reason})", code(&node.name))
            })
            .collect();
        if drained.len() < header.drained.len() {
            listed.push(format!("and {} more", header.drained.len() - drained.len()));
        }
        rows.push(HeaderRow {
            label_md: "Drained",
            value_md: format!("{}: left out of this run", listed.join(", ")),
        });
    }
    if !header.drift.is_empty() {
        let alarms = capped(&header.drift, detail.item_cap());
        let mut listed: Vec<String> = alarms
            .iter()
            .map(|words| markdown_text(&detail.text(words), MarkdownPlace::TableCell))
            .collect();
        if alarms.len() < header.drift.len() {
            listed.push(format!("and {} more", header.drift.len() - alarms.len()));
        }
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

fn note_md(detail: Detail, target: &Target, link: Option<&ReportLink>) -> Option<String> {
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

fn footer_md(header: &Header, link: Option<&ReportLink>) -> String {
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

fn progress_totals(progress: &Progress) -> String {
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
fn progress_rows(progress: &Progress, detail: Detail) -> Vec<ProgressRow> {
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

fn sections(verdict: &Verdict, detail: Detail) -> Vec<SectionView> {
    verdict
        .sections
        .iter()
        .enumerate()
        .map(|(index, section)| {
            let shown: Vec<&Item> = if detail == Detail::Minimal {
                Vec::new()
            } else {
                worst_first(&section.items, detail.item_cap())
            };
            let state = section_state(section, &shown);
            let items: Vec<ItemView> = shown.iter().map(|item| item_view(item, detail)).collect();
            SectionView {
                number: index + 1,
                title_md: section.name.title(),
                state_md: state_md(state),
                items_shown: detail != Detail::Minimal,
                more: section.items.len() - items.len(),
                count_md: match section.items.len() {
                    1 => "(1 item)".to_owned(),
                    count => format!("({count} items)"),
                },
                items,
            }
        })
        .collect()
}

/// A section's state as its heading shows it: its worst item shown (the worst kept when some
/// are left out) and never better than the gate's state for it; a section with no items is
/// "nothing to check", not a pass.
fn section_state(section: &Section, shown: &[&Item]) -> State {
    let worst = shown.iter().map(|item| item.state).max();
    match worst {
        Some(worst) => worst.max(section.state),
        None if section.items.is_empty() && section.state <= State::Pass => State::NothingToCheck,
        None => section.state,
    }
}

/// At most `cap` items, the worst kept first when some must go; shown in their own order.
fn worst_first(items: &[Item], cap: Option<usize>) -> Vec<&Item> {
    let Some(cap) = cap.filter(|cap| *cap < items.len()) else {
        return items.iter().collect();
    };
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|index| std::cmp::Reverse(items[*index].state));
    let mut kept: Vec<usize> = order.into_iter().take(cap).collect();
    kept.sort_unstable();
    kept.into_iter().map(|index| &items[index]).collect()
}

/// A text of the gate (a summary, a finding, a rule) as Markdown: its backticked parts and
/// `@` names as code spans, the rest escaped prose, and a number that rounds to zero shown
/// as `+0.0`, as in the tables.
fn finding_md(text: &str) -> String {
    markdown_text_with_code(&unsigned_zero(text), MarkdownPlace::Paragraph)
}

/// The text with every `-0.0` that is a whole number (no digit after it) made `+0.0`: the
/// gate signs before it rounds, the comment rounds first.
fn unsigned_zero(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("-0.0") {
        let after = &rest[at + 4..];
        let whole = !after.starts_with(|c: char| c.is_ascii_digit())
            && !rest[..at].ends_with(|c: char| c.is_ascii_digit() || c == '.');
        out.push_str(&rest[..at]);
        out.push_str(if whole { "+0.0" } else { "-0.0" });
        rest = after;
    }
    out.push_str(rest);
    out
}

fn item_view(item: &Item, detail: Detail) -> ItemView {
    ItemView {
        state_md: state_md(item.state),
        who_md: item
            .model
            .as_deref()
            .map(|model| {
                format!("{} ", markdown_code(&detail.text(model), MarkdownPlace::Paragraph))
            })
            .unwrap_or_default(),
        check: detail.text(&item.check),
        summary_md: finding_md(&detail.text(item.summary.lines().next().unwrap_or_default())),
        rule_md: (item.state != State::Pass).then(|| finding_md(&detail.text(&item.rule))),
        log_md: item
            .summary
            .split_once('\n')
            .map(|(_first, rest)| rest.trim_end())
            .filter(|rest| !rest.trim().is_empty())
            .map(|rest| crate::escape::markdown_code_block(&detail.text(rest), "  ")),
    }
}

/// The verdict's recipe changes, as the comment shows them.
fn recipe_changes(verdict: &Verdict) -> Vec<RecipeChangeView> {
    verdict
        .recipe_changes
        .iter()
        .map(|change| {
            let whose = match &change.model {
                Some(model) => format!("<code>{}</code>", html_text(model)),
                None => "the common checks".to_owned(),
            };
            RecipeChangeView {
                who_html: format!("{whose}: <code>{}</code>", html_text(&change.path)),
                diff_md: crate::escape::markdown_diff_block(change.diff.text.trim_end()),
                omitted: change.diff.omitted,
            }
        })
        .collect()
}

/// The models with items in the verdict: the plan's order, then any the plan does not list.
fn models(verdict: &Verdict, plan: &Plan) -> Vec<ModelView> {
    let items: Vec<&Item> = verdict.sections.iter().flat_map(|section| &section.items).collect();
    let mut names: Vec<&str> = plan
        .models
        .iter()
        .map(|model| model.name.as_str())
        .filter(|name| items.iter().any(|item| item.model.as_deref() == Some(*name)))
        .collect();
    for item in &items {
        if let Some(model) = item.model.as_deref()
            && !names.contains(&model)
        {
            names.push(model);
        }
    }
    names
        .into_iter()
        .map(|name| {
            let own: Vec<&Item> =
                items.iter().copied().filter(|item| item.model.as_deref() == Some(name)).collect();
            let tier = plan.models.iter().find(|model| model.name == name).map(|model| model.tier);
            model_view(name, tier, &own)
        })
        .collect()
}

fn model_view(name: &str, tier: Option<Tier>, items: &[&Item]) -> ModelView {
    let tier = tier.map(|tier| format!(" · {} tier", tier.as_str())).unwrap_or_default();
    let mut view = ModelView {
        summary_html: format!(
            "<code>{}</code>{tier} · {}",
            html_text(name),
            model_counts_html(items)
        ),
        speed: Vec::new(),
        chart: None,
        accuracy: Vec::new(),
        kernels: Vec::new(),
        tests: Vec::new(),
        empty: false,
    };
    for item in items {
        let state_md = state_md(item.state);
        match &item.numbers {
            Some(Numbers::Speed {
                concurrency,
                covered,
                base_ms,
                pr_ms,
                change,
                interval,
                pairs,
                confidence,
                ..
            }) => view.speed.push(SpeedRow {
                // An uncovered concurrency's state says "not judged" and the intro why; only
                // a state that does not is told.
                concurrency: if *covered || item.state == State::NotJudged {
                    concurrency.to_string()
                } else {
                    format!("{concurrency} (not covered)")
                },
                medians: format!("{} → {}", milliseconds(*base_ms), milliseconds(*pr_ms)),
                // The interval's ends in the change's unit without their own `%`: the table
                // fits an 800 px comment (`.ci/render-comments`).
                change: match (change, interval) {
                    (Some(change), Some((low, high))) => {
                        format!("{} [{}, {}]", percent(*change), points(*low), points(*high))
                    }
                    (Some(change), None) => percent(*change),
                    (None, _) => unknown(),
                },
                pairs: match confidence {
                    Confidence::High => pairs.to_string(),
                    Confidence::Low => format!("{pairs}, undecided"),
                    Confidence::Open => format!("{pairs}, open"),
                },
                state_md,
            }),
            Some(Numbers::Accuracy {
                benchmark,
                base,
                pr,
                difference,
                interval,
                questions,
                paired,
                tolerance,
                ..
            }) => view.accuracy.push(AccuracyRow {
                benchmark: benchmark.clone(),
                accuracies: format!("{:.1} → {:.1}", base * 100.0, pr * 100.0),
                difference: format!(
                    "{} [{}, {}]",
                    points(*difference),
                    points(interval.0),
                    points(interval.1)
                ),
                questions: if *paired { questions.to_string() } else { format!("{questions}†") },
                tolerance: format!("{:.1}", tolerance * 100.0),
                state_md,
            }),
            Some(Numbers::Kernel { kernel, base_us, pr_us, change }) => {
                view.kernels.push(KernelRow {
                    kernel: kernel.clone(),
                    times: format!("{base_us:.1} → {pr_us:.1}"),
                    change: percent(*change),
                    state_md,
                })
            }
            Some(Numbers::Tests { passed, failed, skipped, errors, pre_existing }) => {
                view.tests.push(TestsRow {
                    suite: item.check.clone(),
                    passed: *passed,
                    failed: *failed,
                    errors: *errors,
                    skipped: *skipped,
                    pre_existing: *pre_existing,
                    state_md,
                })
            }
            None => {}
        }
    }
    view.chart = chart(name, items);
    view.empty = view.speed.is_empty()
        && view.accuracy.is_empty()
        && view.kernels.is_empty()
        && view.tests.is_empty();
    view
}

/// A model's own items by state, worst first (`1 ❌ <b>fail</b> · 8 ✅ pass`): a model's
/// line names only its own checks, so it counts them rather than claim a state for the model
/// (a PR-wide check such as the gain may fail while every check of the model passes).
fn model_counts_html(items: &[&Item]) -> String {
    let mut states: Vec<State> = items.iter().map(|item| item.state).collect();
    states.sort_unstable_by(|a, b| b.cmp(a));
    states.dedup();
    let parts: Vec<String> = states
        .iter()
        .map(|state| {
            let count = items.iter().filter(|item| item.state == *state).count();
            format!("{count} {}", state_html(*state))
        })
        .collect();
    if parts.is_empty() { "no checks".to_owned() } else { parts.join(" · ") }
}

/// The state for the HTML of a `<summary>`, where Markdown is not parsed.
fn state_html(state: State) -> &'static str {
    match state {
        State::Fail => "❌ <b>fail</b>",
        State::Error => "🛑 <b>error</b>",
        other => state_md(other),
    }
}

/// The least the chart's y-axis spans each side of zero, in percent: a change of noise stays
/// small on it, and the rule's lines are always in view.
const CHART_MIN_SPAN: f64 = 10.0;

/// A concurrency in the chart: its change, the interval's low and high, in percent.
type Cell = (u32, f64, f64, f64);

/// The chart of the TPOT change per concurrency, when at least two concurrencies have a
/// change and its interval.
fn chart(name: &str, items: &[&Item]) -> Option<Chart> {
    let mut cells: Vec<Cell> = items
        .iter()
        .filter_map(|item| match item.numbers {
            Some(Numbers::Speed {
                concurrency,
                change: Some(change),
                interval: Some((low, high)),
                ..
            }) if change.is_finite() && low.is_finite() && high.is_finite() => {
                Some((concurrency, change * 100.0, low * 100.0, high * 100.0))
            }
            _ => None,
        })
        .collect();
    // A rule's line needs two points to show.
    if cells.len() < 2 {
        return None;
    }
    cells.sort_by_key(|cell| cell.0);
    // The lines the gate judged these cells against; a verdict written before it said them
    // has none, and the chart then draws only zero rather than guess.
    let thresholds = items.iter().find_map(|item| match item.numbers {
        Some(Numbers::Speed { thresholds: Some(thresholds), .. })
            if thresholds.max_loss.is_finite() && thresholds.min_gain.is_finite() =>
        {
            Some(thresholds)
        }
        _ => None,
    });
    let loss = thresholds.map(|t| t.max_loss * 100.0);
    let gain = thresholds.map(|t| t.min_gain * 100.0);
    // The axis holds every interval and the rule's lines; past the least span, with a margin
    // of 1% beyond the farthest.
    let lowest = cells
        .iter()
        .map(|cell| cell.2)
        .chain(gain.map(|gain| -gain))
        .fold(-CHART_MIN_SPAN, f64::min);
    let highest = cells.iter().map(|cell| cell.3).chain(loss).fold(CHART_MIN_SPAN, f64::max);
    let bottom = if lowest < -CHART_MIN_SPAN { (lowest - 1.0).floor() } else { -CHART_MIN_SPAN };
    let top = if highest > CHART_MIN_SPAN { (highest + 1.0).ceil() } else { CHART_MIN_SPAN };
    // The change's mark: 1% of the axis each side of the change.
    let mark = (top - bottom) * 0.01;
    let number = |value: f64| {
        let text = format!("{value:.2}");
        if text == "-0.00" { "0.00".to_owned() } else { text }
    };
    let series = |value: &dyn Fn(&Cell) -> f64| {
        cells.iter().map(|cell| number(value(cell))).collect::<Vec<_>>().join(", ")
    };
    let constant = |value: f64| vec![number(value); cells.len()].join(", ");
    let mut lines_md = Vec::new();
    let mut palette = vec![colours::BAND, colours::MARK, colours::BAND, colours::GROUND];
    if let (Some(loss), Some(gain)) = (loss, gain) {
        lines_md.push(constant(loss));
        lines_md.push(constant(-gain));
        palette.extend([colours::LOSS, colours::GAIN]);
    }
    lines_md.push(constant(0.0));
    palette.push(colours::ZERO);
    Some(Chart {
        title_md: format!("{}: TPOT change, PR against base", chart_label(name)),
        x_md: cells.iter().map(|cell| format!("\"{}\"", cell.0)).collect::<Vec<_>>().join(", "),
        range_md: format!("{bottom:.0} --> {top:.0}"),
        bars_md: vec![
            series(&|&(_, change, _, high)| high.max(change + mark)),
            series(&|&(_, change, _, _)| change + mark),
            series(&|&(_, change, _, _)| change - mark),
            series(&|&(_, change, low, _)| low.min(change - mark)),
        ],
        lines_md,
        palette_md: palette.join(", "),
        ground_md: colours::GROUND,
        ink_md: colours::INK,
        loss: loss.map(threshold_percent),
        gain: gain.map(threshold_percent),
        gain_required: thresholds.is_some_and(|t| t.gain_required),
        span: format!("{CHART_MIN_SPAN:.0}%"),
    })
}

/// A threshold in percent for the legend: `2%`, `2.5%`.
fn threshold_percent(value: f64) -> String {
    let text = format!("{value:.1}");
    format!("{}%", text.strip_suffix(".0").unwrap_or(&text))
}

/// A label Mermaid cannot read as syntax: letters, digits, `_`, `-`, `.` and spaces only,
/// at most 40 characters.
fn chart_label(text: &str) -> String {
    text.chars()
        .take(40)
        .map(
            |c| {
                if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ' ') {
                    c
                } else {
                    '_'
                }
            },
        )
        .collect()
}

fn milliseconds(value: Option<f64>) -> String {
    value.map_or_else(unknown, |ms| format!("{ms:.2}"))
}

fn percent(fraction: f64) -> String {
    format!("{}%", signed_tenths(fraction * 100.0))
}

fn points(fraction: f64) -> String {
    signed_tenths(fraction * 100.0)
}

/// A number with its sign and one decimal, rounded first and signed after: what rounds to
/// zero is `+0.0`, never `-0.0`.
fn signed_tenths(value: f64) -> String {
    let text = format!("{value:+.1}");
    if text == "-0.0" { "+0.0".to_owned() } else { text }
}

fn unknown() -> String {
    "—".to_owned()
}

/// The first `cap` entries of a list (all without a cap).
fn capped<T>(list: &[T], cap: Option<usize>) -> &[T] {
    match cap {
        Some(cap) if cap < list.len() => &list[..cap],
        _ => list,
    }
}

/// At most `cap` characters, the last an ellipsis when the text was longer.
pub(crate) fn shorten(text: &str, cap: usize) -> String {
    if text.chars().count() <= cap {
        return text.to_owned();
    }
    let mut short: String = text.chars().take(cap.saturating_sub(1)).collect();
    short.push('…');
    short
}

#[cfg(test)]
mod tests;
