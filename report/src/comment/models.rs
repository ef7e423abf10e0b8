//! The comment's per-model details: for each model, its counts and collapsible tables of base
//! against PR (speed, accuracy, kernels, tests), and a Mermaid chart of the median-TPOT change
//! per concurrency with the rule's lines. Which items exist is the verdict's business.

use prgate_gate::verdict::{Confidence, Item, Numbers, State, Verdict};
use prgate_scope::plan::{Plan, Tier};

use crate::escape::html_text;

use super::{
    AccuracyRow, Chart, KernelRow, ModelView, SpeedRow, TestsRow, colours, milliseconds, percent,
    points, state_md, unknown,
};

/// The models with items in the verdict: the plan's order, then any the plan does not list.
pub(super) fn models(verdict: &Verdict, plan: &Plan) -> Vec<ModelView> {
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
        view.speed.extend(speed_row(item));
        view.accuracy.extend(accuracy_row(item));
        view.kernels.extend(kernel_row(item));
        view.tests.extend(tests_row(item));
    }
    view.chart = chart(name, items);
    view.empty = view.speed.is_empty()
        && view.accuracy.is_empty()
        && view.kernels.is_empty()
        && view.tests.is_empty();
    view
}

/// A speed item's row of the speed table.
fn speed_row(item: &Item) -> Option<SpeedRow> {
    let Some(Numbers::Speed {
        concurrency,
        covered,
        base_ms,
        pr_ms,
        change,
        interval,
        pairs,
        confidence,
        ..
    }) = &item.numbers
    else {
        return None;
    };
    Some(SpeedRow {
        // An uncovered concurrency's state says "not judged" and the intro why; only a state
        // that does not is told.
        concurrency: if *covered || item.state == State::NotJudged {
            concurrency.to_string()
        } else {
            format!("{concurrency} (not covered)")
        },
        medians: format!("{} → {}", milliseconds(*base_ms), milliseconds(*pr_ms)),
        // The interval's ends in the change's unit without their own `%`: the table fits an
        // 800 px comment (`.ci/render-comments`).
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
        state_md: state_md(item.state),
    })
}

/// An accuracy item's row of the accuracy table.
fn accuracy_row(item: &Item) -> Option<AccuracyRow> {
    let Some(Numbers::Accuracy {
        benchmark,
        base,
        pr,
        difference,
        interval,
        questions,
        paired,
        tolerance,
        ..
    }) = &item.numbers
    else {
        return None;
    };
    Some(AccuracyRow {
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
        state_md: state_md(item.state),
    })
}

/// A kernel item's row of the kernel table.
fn kernel_row(item: &Item) -> Option<KernelRow> {
    let Some(Numbers::Kernel { kernel, base_us, pr_us, change }) = &item.numbers else {
        return None;
    };
    Some(KernelRow {
        kernel: kernel.clone(),
        times: format!("{base_us:.1} → {pr_us:.1}"),
        change: percent(*change),
        state_md: state_md(item.state),
    })
}

/// A tests item's row of the tests table.
fn tests_row(item: &Item) -> Option<TestsRow> {
    let Some(Numbers::Tests { passed, failed, skipped, errors, pre_existing }) = &item.numbers
    else {
        return None;
    };
    Some(TestsRow {
        suite: item.check.clone(),
        passed: *passed,
        failed: *failed,
        errors: *errors,
        skipped: *skipped,
        pre_existing: *pre_existing,
        state_md: state_md(item.state),
    })
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
pub(super) fn chart(name: &str, items: &[&Item]) -> Option<Chart> {
    let cells = chart_cells(items);
    // A rule's line needs two points to show.
    if cells.len() < 2 {
        return None;
    }
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
    let (bottom, top) = chart_axis(&cells, loss, gain);
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

/// The concurrencies with a finite change and interval, in percent, by concurrency.
fn chart_cells(items: &[&Item]) -> Vec<Cell> {
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
    cells.sort_by_key(|cell| cell.0);
    cells
}

/// The y-axis's bottom and top: it holds every interval and the rule's lines; past the least
/// span, with a margin of 1% beyond the farthest.
fn chart_axis(cells: &[Cell], loss: Option<f64>, gain: Option<f64>) -> (f64, f64) {
    let lowest = cells
        .iter()
        .map(|cell| cell.2)
        .chain(gain.map(|gain| -gain))
        .fold(-CHART_MIN_SPAN, f64::min);
    let highest = cells.iter().map(|cell| cell.3).chain(loss).fold(CHART_MIN_SPAN, f64::max);
    let bottom = if lowest < -CHART_MIN_SPAN { (lowest - 1.0).floor() } else { -CHART_MIN_SPAN };
    let top = if highest > CHART_MIN_SPAN { (highest + 1.0).ceil() } else { CHART_MIN_SPAN };
    (bottom, top)
}

/// A threshold in percent for the legend: `2%`, `2.5%`.
fn threshold_percent(value: f64) -> String {
    let text = format!("{value:.1}");
    format!("{}%", text.strip_suffix(".0").unwrap_or(&text))
}

/// A label Mermaid cannot read as syntax: letters, digits, `_`, `-`, `.` and spaces only,
/// at most 40 characters.
pub(super) fn chart_label(text: &str) -> String {
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
