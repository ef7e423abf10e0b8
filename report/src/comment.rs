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
//!
//! This module holds the inputs, the shrinking and the template's view; the view's parts are
//! built in `header` (headline, header rows, progress, note, footer), `sections` (the
//! checklist) and `models` (per-model tables and the chart).

use prgate_gate::evidence::Evidence;
use prgate_gate::verdict::{State, Verdict};
use prgate_scope::plan::Plan;
use serde::Serialize;

use crate::escape::{MarkdownPlace, markdown_text, markdown_text_with_code};

mod header;
mod models;
mod sections;

#[cfg(test)]
use header::finding_head;
pub(crate) use header::link_target;
use header::{
    counts_md, footer_md, header_rows, note_md, progress_rows, progress_totals, result_md,
};
use models::models;
#[cfg(test)]
use models::{chart, chart_label};
use sections::{recipe_changes, sections};

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

impl Header {
    /// The header of PR `pr_number`, titled `title`, for a run of `plan`: the commits are the
    /// plan's (its head, the PR's commit the run pinned, and its base side: the merge-base,
    /// else the base); every other fact unknown until the caller gives it.
    pub fn of(plan: &Plan, pr_number: u64, title: Option<String>) -> Header {
        Header {
            pr_number,
            title,
            pr_sha: plan.head.sha.clone(),
            base_sha: plan.base_side_commit().to_owned(),
            ..Header::default()
        }
    }

    /// The header's image, from a run's `evidence`: the images its records name (a digest, or
    /// a tag when the node profile pins none), in order, each once; `None` when no record
    /// names one (a run whose node's image is known says that one instead).
    pub fn image_of(evidence: &[Evidence]) -> Option<String> {
        let mut images: Vec<&str> = Vec::new();
        for image in evidence.iter().filter_map(|record| record.provenance.image_digest.as_deref())
        {
            if !images.contains(&image) {
                images.push(image);
            }
        }
        (!images.is_empty()).then(|| images.join(", "))
    }
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
    /// `models::CHART_MIN_SPAN` in words.
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
/// The ellipsis counts against the cap (a rendering's cap is the comment's size budget), which
/// `prgate_scope::text::clip`'s does not.
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
