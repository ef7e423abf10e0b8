//! The drift guard for people: the history page (static HTML, one file plus assets), the
//! alarm the next PR's comment shows, and the scheduled check's report.
//!
//! The page (`index.html`) holds the summary of every guard and, per model and cell, a chart of
//! the chain since the reference — each merged PR a point with its interval and a link, the
//! budget line, the anchor runs — with the same points as a table beneath it. The charts are
//! drawn by Chart.js ([`CHART_JS_VERSION`], vendored in `report/assets/` with its licence and
//! checked against [`CHART_JS_SHA256`]) from the data embedded in the page; `assets/history.js`
//! builds them and `assets/history.css` lays the page out for 800 px, a phone, light and dark.
//! Every string that came from a PR (a title) is escaped as HTML in the page
//! ([`crate::escape::html_text`]), and the embedded data is JSON with `<`, `>` and `&` written as
//! `\u003c`, `\u003e`, `\u0026`, which the page's script only ever puts into text nodes. Writing
//! the files is the binary's business.

use std::fmt::Write as _;

use prgate_gate::drift::{Cell, Chain, Guard, GuardState, History, Measurement, Point, Source};
use serde::Serialize;

use crate::escape::{MarkdownPlace, html_text, markdown_text};

/// The Chart.js release the page draws with (npm `chart.js`, MIT).
pub const CHART_JS_VERSION: &str = "4.5.1";
/// The SHA-256 of its `dist/chart.umd.min.js`, as the npm tarball
/// (`sha512-GIjfiT9dbmHRiYi6Nl2yFCq7kkwdkp1W/lp2J99rX0yo9tgJGn3lKQATztIjb5tVtevcBtIdICNWqlq5+E8/Pw==`)
/// holds it: a test checks the vendored copy, `.ci/render-history` checks it against npm's.
pub const CHART_JS_SHA256: &str =
    "48444a82d4edcb5bec0f1965faacdde18d9c17db3063d042abada2f705c9f54a";
const CHART_JS: &str = include_str!("../assets/chart.js-4.5.1/chart.umd.min.js");
const CHART_JS_LICENSE: &str = include_str!("../assets/chart.js-4.5.1/LICENSE.md");
const PAGE_JS: &str = include_str!("../assets/history.js");
const PAGE_CSS: &str = include_str!("../assets/history.css");
const TEMPLATE_NAME: &str = "history.html";
const TEMPLATE: &str = include_str!("../templates/history.html.tera");

/// What the page shows besides the history and its guards.
#[derive(Debug, Clone, Copy)]
pub struct PageInput<'a> {
    pub history: &'a History,
    pub guards: &'a [Guard],
    /// The repository, `owner/name`, named in the heading.
    pub repository: Option<&'a str>,
    /// When the page was made, RFC 3339.
    pub generated_at: &'a str,
    /// The guard's settings in words (`TPOT +3%, accuracy 1 tolerance, alpha 5%`).
    pub settings: &'a str,
}

/// One file of the page: its path below the page's folder and its contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageFile {
    pub path: &'static str,
    pub contents: String,
}

/// The template could not be rendered: a bug in the template or in the data this module gives
/// it, since both are built in.
#[derive(Debug, thiserror::Error)]
#[error("cannot render the history page")]
pub struct PageError(#[source] tera::Error);

/// The page's files: `index.html` and its assets.
pub fn render_page(input: &PageInput<'_>) -> Result<Vec<PageFile>, PageError> {
    let mut tera = tera::Tera::new();
    tera.add_raw_template(TEMPLATE_NAME, TEMPLATE).map_err(PageError)?;
    tera.autoescape_on([".html"]);
    tera.set_escape_fn(|text, out| out.write_all(html_text(text).as_bytes()));
    let view = view(input);
    let context = tera::Context::from_serialize(&view).map_err(PageError)?;
    let html = tera.render(TEMPLATE_NAME, &context).map_err(PageError)?;
    let file = |path, contents: &str| PageFile { path, contents: contents.to_owned() };
    Ok(vec![
        PageFile { path: "index.html", contents: html },
        file("assets/chart.umd.min.js", CHART_JS),
        file("assets/chart.js-LICENSE.md", CHART_JS_LICENSE),
        file("assets/history.js", PAGE_JS),
        file("assets/history.css", PAGE_CSS),
    ])
}

/// A tripped guard in a few words, for the PR comment's header and the check:
/// `kimi_k31 c=1: TPOT +7.7% [+6.5%, +8.9%] since v1.2 (1a2b3c4d5e6f), over the +3% budget;
/// most from #201 +1.5%, #205 +1.5%, #209 +1.5%`. Plain text: the caller escapes it.
pub fn alarm_words(guard: &Guard, history: &History) -> String {
    let since = reference_words(history, "the start of the ledger");
    let mut words = format!(
        "{} since {since}, over the {} budget",
        guard_words(guard),
        shown(&guard.cell, guard.budget)
    );
    if !guard.top.is_empty() {
        let top: Vec<String> = guard
            .top
            .iter()
            .map(|contribution| {
                format!(
                    "{} {}",
                    source_words(&contribution.source),
                    shown(&guard.cell, contribution.shown)
                )
            })
            .collect();
        let _ = write!(words, "; most from {}", top.join(", "));
    }
    words
}

/// The scheduled check's report as Markdown (the job summary): the reference, each guard's
/// state, the tripped ones first with their contributors, and what the ledger misses.
pub fn check_markdown(history: &History, guards: &[Guard], page: Option<&str>) -> String {
    let mut out = String::from("## Drift since the reference\n\n");
    let reference = reference_words(history, "none yet");
    let _ = writeln!(
        out,
        "Reference: {} · {} merged PR(s) since · {} anchor check(s)\n",
        markdown_text(&reference, MarkdownPlace::Paragraph),
        history.merged,
        history.anchors.len()
    );
    let tripped: Vec<&Guard> = guards.iter().filter(|g| g.state == GuardState::Tripped).collect();
    if tripped.is_empty() {
        out.push_str("✅ No guard is tripped.\n\n");
    } else {
        let _ = writeln!(out, "❌ **{} guard(s) tripped:**\n", tripped.len());
        for guard in &tripped {
            let _ = writeln!(
                out,
                "- {}",
                markdown_text(&alarm_words(guard, history), MarkdownPlace::Paragraph)
            );
        }
        out.push('\n');
    }
    if !guards.is_empty() {
        out.push_str(
            "| Cell | State | Chained | Budget | PRs |\n| --- | --- | --- | --- | --- |\n",
        );
        for guard in guards {
            let _ = writeln!(
                out,
                "| {} | {} | {} {} | {} | {} |",
                markdown_text(&guard.cell.describe(), MarkdownPlace::TableCell),
                state_words(guard.state),
                shown(&guard.cell, guard.change),
                interval_words(&guard.cell, guard.interval),
                shown(&guard.cell, guard.budget),
                guard.links
            );
        }
        out.push('\n');
    }
    if !history.unmeasured.is_empty() {
        let prs: Vec<String> = history.unmeasured.iter().map(|pr| format!("#{pr}")).collect();
        let _ = writeln!(
            out,
            "⚠️ Merged with nothing measured: {}. The chain misses what they changed; the anchor run measures it.\n",
            prs.join(", ")
        );
    }
    if let Some(page) = page {
        let _ =
            writeln!(out, "The history page: {}\n", markdown_text(page, MarkdownPlace::Paragraph));
    }
    out
}

/// The same for a terminal: one line a guard.
pub fn check_human(history: &History, guards: &[Guard]) -> String {
    let reference = reference_words(history, "none yet");
    let mut out = format!(
        "reference {}; {} merged PR(s) since, {} anchor check(s)\n",
        crate::escape::terminal(&reference),
        history.merged,
        history.anchors.len()
    );
    for guard in guards {
        let words = match guard.state {
            GuardState::Tripped => alarm_words(guard, history),
            _ => format!("{} (budget {})", guard_words(guard), shown(&guard.cell, guard.budget)),
        };
        let _ =
            writeln!(out, "{:<8} {}", state_words(guard.state), crate::escape::terminal(&words));
    }
    if !history.unmeasured.is_empty() {
        let prs: Vec<String> = history.unmeasured.iter().map(|pr| format!("#{pr}")).collect();
        let _ = writeln!(out, "merged with nothing measured: {}", prs.join(", "));
    }
    out
}

/// A measurement on its cell's scale with its two-sided `1 - 2 alpha` interval:
/// `+6.9% [+5.5%, +8.3%]` for speed, `-0.5 pp [-1.2, +0.2] pp` for accuracy.
pub fn measurement_words(cell: &Cell, measurement: &Measurement, alpha: f64) -> String {
    format!(
        "{} {}",
        shown(cell, cell.shown(measurement.estimate)),
        interval_words(cell, shown_interval(cell, measurement, alpha))
    )
}

/// A guard's cell and its chained change: `kimi_k31 c=1: TPOT +7.7% [+6.5%, +8.9%]`.
fn guard_words(guard: &Guard) -> String {
    format!(
        "{}: {} {} {}",
        guard.cell.describe(),
        measure_word(&guard.cell),
        shown(&guard.cell, guard.change),
        interval_words(&guard.cell, guard.interval)
    )
}

fn state_words(state: GuardState) -> &'static str {
    match state {
        GuardState::Within => "within",
        GuardState::Open => "open",
        GuardState::Tripped => "TRIPPED",
    }
}

/// A state as the page's style names it.
fn state_class(state: GuardState) -> &'static str {
    match state {
        GuardState::Within => "within",
        GuardState::Open => "open",
        GuardState::Tripped => "tripped",
    }
}

fn measure_word(cell: &Cell) -> &'static str {
    match cell {
        Cell::Speed { .. } => "TPOT",
        Cell::Accuracy { .. } => "accuracy",
    }
}

/// A value on the cell's shown scale: speed `+1.5%`, accuracy `-0.5 pp`.
fn shown(cell: &Cell, value: f64) -> String {
    match cell {
        Cell::Speed { .. } => format!("{:+.1}%", value * 100.0),
        Cell::Accuracy { .. } => format!("{:+.1} pp", value * 100.0),
    }
}

fn interval_words(cell: &Cell, (low, high): (f64, f64)) -> String {
    match cell {
        Cell::Speed { .. } => format!("[{:+.1}%, {:+.1}%]", low * 100.0, high * 100.0),
        Cell::Accuracy { .. } => format!("[{:+.1}, {:+.1}] pp", low * 100.0, high * 100.0),
    }
}

fn source_words(source: &Source) -> String {
    match source {
        Source::Pr { number, .. } => format!("#{number}"),
        Source::Anchor { at, .. } => format!("the anchor run of {}", at.get(..10).unwrap_or(at)),
    }
}

/// What the template and the page's script see.
#[derive(Debug, Serialize)]
struct View {
    repository: Option<String>,
    generated_at: String,
    settings: String,
    reference: String,
    reference_reason: Option<String>,
    merged: usize,
    unmeasured: Vec<u64>,
    other_anchors: usize,
    summary: Vec<SummaryRow>,
    models: Vec<ModelView>,
    /// The charts' data as JSON, `<`, `>` and `&` escaped: printed as it is.
    data_json: String,
}

#[derive(Debug, Serialize)]
struct SummaryRow {
    cell: String,
    anchor: String,
    state: &'static str,
    state_class: &'static str,
    chained: String,
    budget: String,
    links: usize,
    top: String,
}

#[derive(Debug, Serialize)]
struct ModelView {
    name: String,
    anchor: String,
    charts: Vec<ChartView>,
}

#[derive(Debug, Serialize)]
struct ChartView {
    id: String,
    title: String,
    caption: String,
    state: &'static str,
    state_class: &'static str,
    rows: Vec<RowView>,
}

#[derive(Debug, Serialize)]
struct RowView {
    what: String,
    url: Option<String>,
    title: String,
    own: String,
    chained: String,
}

/// One chart's data for the page's script, in percent (speed) or points (accuracy).
#[derive(Debug, Serialize)]
struct ChartData {
    id: String,
    model: String,
    cell: String,
    kind: &'static str,
    unit: &'static str,
    budget: f64,
    state: &'static str,
    points: Vec<PointData>,
}

#[derive(Debug, Serialize)]
struct PointData {
    label: String,
    kind: &'static str,
    pr: Option<u64>,
    url: Option<String>,
    title: String,
    y: f64,
    low: Option<f64>,
    high: Option<f64>,
    own: Option<f64>,
    own_low: Option<f64>,
    own_high: Option<f64>,
    agrees: Option<bool>,
}

fn view(input: &PageInput<'_>) -> View {
    let history = input.history;
    let alpha = input.guards.first().map_or(0.05, |guard| guard.alpha);
    let reference = reference_words(history, "none yet");
    let summary = input.guards.iter().map(summary_row).collect();
    let mut models: Vec<ModelView> = Vec::new();
    let mut charts = Vec::new();
    for chain in &history.chains {
        let guard = input.guards.iter().find(|guard| guard.cell == chain.cell);
        let data = chart_data(chain, guard, alpha);
        let chart = chart_view(chain, guard, &data, &reference, alpha);
        charts.push(data);
        let model = chain.cell.model();
        match models.iter_mut().find(|view| view.name == model) {
            Some(view) => view.charts.push(chart),
            None => models.push(ModelView {
                name: model.to_owned(),
                anchor: format!("model-{}", id_part(model)),
                charts: vec![chart],
            }),
        }
    }
    let data = serde_json::json!({ "alpha": alpha, "charts": charts });
    View {
        repository: input.repository.map(str::to_owned),
        generated_at: input.generated_at.to_owned(),
        settings: input.settings.to_owned(),
        reference,
        reference_reason: history.reference.as_ref().and_then(|r| r.reason.clone()),
        merged: history.merged,
        unmeasured: history.unmeasured.clone(),
        other_anchors: history.other_anchors,
        summary,
        models,
        data_json: script_json(&data.to_string()),
    }
}

/// A guard's row of the summary table.
fn summary_row(guard: &Guard) -> SummaryRow {
    SummaryRow {
        cell: guard.cell.describe(),
        anchor: chart_id(&guard.cell),
        state: state_words(guard.state),
        state_class: state_class(guard.state),
        chained: format!(
            "{} {}",
            shown(&guard.cell, guard.change),
            interval_words(&guard.cell, guard.interval)
        ),
        budget: shown(&guard.cell, guard.budget),
        links: guard.links,
        top: guard
            .top
            .iter()
            .map(|c| format!("{} {}", source_words(&c.source), shown(&guard.cell, c.shown)))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// A chain's chart on the page: its caption (the guard's numbers since `reference`), its state
/// and its table of points.
fn chart_view(
    chain: &Chain,
    guard: Option<&Guard>,
    data: &ChartData,
    reference: &str,
    alpha: f64,
) -> ChartView {
    ChartView {
        id: data.id.clone(),
        title: chart_title(&chain.cell),
        caption: guard.map_or_else(String::new, |guard| {
            format!(
                "{} {} since {reference}; budget {}",
                shown(&guard.cell, guard.change),
                interval_words(&guard.cell, guard.interval),
                shown(&guard.cell, guard.budget)
            )
        }),
        state: data.state,
        state_class: guard.map_or("open", |guard| state_class(guard.state)),
        rows: chain.points.iter().map(|point| row(&chain.cell, point, alpha)).collect(),
    }
}

fn chart_title(cell: &Cell) -> String {
    match cell {
        Cell::Speed { concurrency, .. } => format!("TPOT at concurrency {concurrency}"),
        Cell::Accuracy { benchmark, .. } => format!("Accuracy on {benchmark}"),
    }
}

/// An HTML id for a chart: `chart-speed-kimi_k31-1`, the model's unsafe bytes as `_XX`.
fn chart_id(cell: &Cell) -> String {
    match cell {
        Cell::Speed { model, concurrency } => {
            format!("chart-speed-{}-{concurrency}", id_part(model))
        }
        Cell::Accuracy { model, benchmark } => {
            format!("chart-accuracy-{}-{}", id_part(model), id_part(benchmark))
        }
    }
}

fn id_part(text: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'-' {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "_{byte:02X}");
        }
    }
    out
}

/// A value in the chart's unit: percent of TPOT, or points of accuracy.
fn in_unit(cell: &Cell, estimate: f64) -> f64 {
    let value = cell.shown(estimate) * 100.0;
    (value * 1e4).round() / 1e4
}

fn chart_data(chain: &Chain, guard: Option<&Guard>, alpha: f64) -> ChartData {
    let cell = &chain.cell;
    let points = std::iter::once(reference_point())
        .chain(chain.points.iter().map(|point| point_data(cell, point, alpha)))
        .collect();
    let (kind, unit) = match cell {
        Cell::Speed { .. } => ("speed", "%"),
        Cell::Accuracy { .. } => ("accuracy", "pp"),
    };
    ChartData {
        id: chart_id(cell),
        model: cell.model().to_owned(),
        cell: match cell {
            Cell::Speed { concurrency, .. } => format!("c={concurrency}"),
            Cell::Accuracy { benchmark, .. } => benchmark.clone(),
        },
        kind,
        unit,
        budget: guard.map_or(0.0, |guard| (guard.budget * 100.0 * 1e4).round() / 1e4),
        state: guard.map_or("open", |guard| state_words(guard.state)),
        points,
    }
}

/// The chart's first point: the reference, at zero.
fn reference_point() -> PointData {
    PointData {
        label: "reference".to_owned(),
        kind: "reference",
        pr: None,
        url: None,
        title: "the reference".to_owned(),
        y: 0.0,
        low: None,
        high: None,
        own: None,
        own_low: None,
        own_high: None,
        agrees: None,
    }
}

/// One point of a chain on the chart: chained and own, with their intervals at `alpha`.
fn point_data(cell: &Cell, point: &Point, alpha: f64) -> PointData {
    let (low, high) = point.chained.interval(alpha);
    let (own_low, own_high) = point.own.interval(alpha);
    let (label, kind, pr, url, title) = match &point.source {
        Source::Pr { number, title, url, .. } => (
            format!("#{number}"),
            "pr",
            Some(*number),
            url.as_deref().and_then(crate::comment::link_target),
            title.clone(),
        ),
        Source::Anchor { at, run, .. } => (
            format!("anchor {}", at.get(..10).unwrap_or(at)),
            "anchor",
            None,
            run.as_deref().and_then(crate::comment::link_target),
            "anchor run: the reference against main's tip".to_owned(),
        ),
    };
    PointData {
        label,
        kind,
        pr,
        url,
        title,
        y: in_unit(cell, point.chained.estimate),
        low: Some(in_unit(cell, low)),
        high: Some(in_unit(cell, high)),
        own: Some(in_unit(cell, point.own.estimate)),
        own_low: Some(in_unit(cell, own_low)),
        own_high: Some(in_unit(cell, own_high)),
        agrees: point.anchor.map(|anchor| anchor.agrees),
    }
}

fn row(cell: &Cell, point: &Point, alpha: f64) -> RowView {
    let value = |m: &Measurement| measurement_words(cell, m, alpha);
    let (what, url, title) = match &point.source {
        Source::Pr { number, title, url, .. } => (
            format!("#{number}"),
            url.as_deref().and_then(crate::comment::link_target),
            title.clone(),
        ),
        Source::Anchor { at, run, .. } => {
            let agrees = point.anchor.is_some_and(|anchor| anchor.agrees);
            let outcome = if agrees {
                "agreed: the chain is kept"
            } else {
                "disagreed: it replaced the chain"
            };
            (
                format!("anchor {}", at.get(..10).unwrap_or(at)),
                run.as_deref().and_then(crate::comment::link_target),
                format!("anchor run, {outcome}"),
            )
        }
    };
    RowView { what, url, title, own: value(&point.own), chained: value(&point.chained) }
}

fn shown_interval(cell: &Cell, measurement: &Measurement, alpha: f64) -> (f64, f64) {
    let (low, high) = measurement.interval(alpha);
    (cell.shown(low), cell.shown(high))
}

/// JSON made safe inside a `<script>` element: no `<`, `>` or `&` (so no `</script>` and no
/// comment opener), and no line or paragraph separator.
fn script_json(json: &str) -> String {
    json.replace('&', "\\u0026")
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// The ledger's reference in words (`v1.2 (1a2b3c4d5e6f)`), or `none` when it has none.
fn reference_words(history: &History, none: &str) -> String {
    history.reference.as_ref().map_or_else(|| none.to_owned(), |reference| reference.describe())
}

mod alarms;
pub use alarms::alarms;

#[cfg(test)]
mod tests;
