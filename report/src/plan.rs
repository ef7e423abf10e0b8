//! A plan for people: a table for the terminal (`prgate plan`), and Markdown for a PR comment;
//! and [`PlanOutput`], all `prgate plan` prints (the plan, its rules, its estimate) in each of
//! its three formats, the JSON one the wire format of docs/plan.md.
//!
//! Both say, for every model, its tier and the changed paths (with the pattern) that put it
//! there; for every changed path, what it matched; and, loudly first, why the diff cannot be
//! trusted when it cannot. Everything that came from the PR is escaped (see [`crate::escape`]).

use std::fmt::Write as _;

use prgate_gate::rules::RuleOutcome;
use prgate_scope::git::short_sha;
use prgate_scope::plan::{ChangedPath, DiffSource, PathMatch, Plan, Reason, Tier};

use crate::escape::{MarkdownPlace, markdown_code, markdown_path, markdown_text, terminal};
use crate::estimate::EstimateOutput;
use crate::verdict::{rules_human, rules_markdown};

/// What `prgate plan` prints: the plan, its rules judged at once (with the base side's settings
/// and policy), and what it costs when `--estimate` asks.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct PlanOutput<'a> {
    // Flattened for writing only (nothing reads a `PlanOutput`: the runner reads a `Plan`,
    // which ignores `rules` and `estimate`), so no error of a reader's is swallowed.
    #[serde(flatten)]
    pub plan: &'a Plan,
    pub rules: &'a [RuleOutcome],
    /// With `--estimate` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimate: Option<&'a EstimateOutput>,
}

impl PlanOutput<'_> {
    /// The table for a terminal.
    pub fn human(&self) -> String {
        human(self.plan)
            + &rules_human(self.rules)
            + &self.estimate.map(EstimateOutput::human).unwrap_or_default()
    }

    /// Markdown for a PR comment.
    pub fn markdown(&self) -> String {
        markdown(self.plan)
            + &rules_markdown(self.rules)
            + &self.estimate.map(EstimateOutput::markdown).unwrap_or_default()
    }

    /// The versioned wire format later steps read (docs/plan.md), pretty, with a final newline.
    pub fn json(&self) -> Result<String, serde_json::Error> {
        Ok(serde_json::to_string_pretty(self)? + "\n")
    }
}

/// How text from the PR is shown: as-is but with controls escaped on a terminal, as code
/// spans and escaped prose in Markdown.
#[derive(Debug, Clone, Copy)]
enum Style {
    Terminal,
    Markdown(MarkdownPlace),
}

impl Style {
    /// A literal: a path, a pattern, a ref, a model name.
    fn code(self, text: &str) -> String {
        match self {
            Style::Terminal => terminal(text),
            Style::Markdown(place) => markdown_code(text, place),
        }
    }

    /// A path or a path pattern: as code that a Markdown table may break after each `/`, so
    /// that a long path does not make the scope's tables scroll at a comment's 800 px.
    fn path(self, text: &str) -> String {
        match self {
            Style::Terminal => terminal(text),
            Style::Markdown(_) => markdown_path(text),
        }
    }

    /// A sentence that may quote the PR.
    fn prose(self, text: &str) -> String {
        match self {
            Style::Terminal => terminal(text),
            Style::Markdown(place) => markdown_text(text, place),
        }
    }
}

const PARAGRAPH: Style = Style::Markdown(MarkdownPlace::Paragraph);
const CELL: Style = Style::Markdown(MarkdownPlace::TableCell);

/// The plan as a terminal table.
pub fn human(plan: &Plan) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", header_line(plan, Style::Terminal));
    let _ = writeln!(out, "{}", source_line(plan));
    if !plan.diff.trusted {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "!! THE DIFF CANNOT BE TRUSTED: every model runs the full tier and the common checks run"
        );
    }
    for warning in &plan.diff.warnings {
        let _ = writeln!(out, "!! {}", Style::Terminal.prose(warning));
    }

    let _ = writeln!(out);
    changed_files_human(&mut out, plan);
    let _ = writeln!(out);
    models_table_human(&mut out, plan);

    let _ = writeln!(out);
    let _ =
        writeln!(out, "common checks: {}", if plan.common.selected { "run" } else { "skipped" });
    for reason in reasons_text(&plan.common.reasons, Style::Terminal) {
        let _ = writeln!(out, "  {reason}");
    }
    for warning in &plan.warnings {
        let _ = writeln!(out, "warning: {}", Style::Terminal.prose(warning));
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "{}", summary(plan));
    out
}

/// The changed files for the terminal, each with what it matched, in aligned columns.
fn changed_files_human(out: &mut String, plan: &Plan) {
    let _ = writeln!(out, "changed files ({})", plan.changed.len());
    if plan.changed.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    let rows: Vec<(String, String)> = plan
        .changed
        .iter()
        .map(|changed| {
            (changed_label(changed, Style::Terminal), matches_text(changed, Style::Terminal))
        })
        .collect();
    let width = rows.iter().map(|(label, _)| label.chars().count()).max().unwrap_or(0);
    for (label, matched) in rows {
        let _ = writeln!(out, "  {label:<width$}  {matched}");
    }
}

/// The models for the terminal: name, tier and each reason on its own line.
fn models_table_human(out: &mut String, plan: &Plan) {
    let name_width = plan
        .models
        .iter()
        .map(|model| model_label(model).chars().count())
        .max()
        .unwrap_or(0)
        .max("model".len());
    let _ = writeln!(out, "{:<name_width$}  tier   why", "model");
    for model in &plan.models {
        let label = Style::Terminal.code(&model_label(model));
        let reasons = model_reasons_text(&model.reasons, &plan.common.reasons, Style::Terminal);
        let first = reasons.first().map_or("-", String::as_str);
        let _ = writeln!(out, "{label:<name_width$}  {:<5}  {first}", model.tier.as_str());
        for reason in reasons.iter().skip(1) {
            let _ = writeln!(out, "{:<name_width$}         {reason}", "");
        }
    }
    if plan.models.is_empty() {
        let _ = writeln!(out, "(the manifest's model patterns match no file)");
    }
}

/// The plan as Markdown, for a PR comment or a job summary.
pub fn markdown(plan: &Plan) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "### Scope\n");
    let _ = writeln!(out, "{}. {}\n", header_line(plan, PARAGRAPH), source_line(plan));
    if !plan.diff.trusted || !plan.diff.warnings.is_empty() {
        let _ = writeln!(out, "> [!WARNING]");
        if !plan.diff.trusted {
            let _ = writeln!(
                out,
                "> **The diff cannot be trusted**: every model runs the full tier and the common checks run."
            );
        }
        for warning in &plan.diff.warnings {
            let _ = writeln!(out, "> - {}", PARAGRAPH.prose(warning));
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(out, "**{}**\n", summary(plan));

    if !plan.models.is_empty() {
        models_table_md(&mut out, plan);
    }

    let common_reasons = reasons_text(&plan.common.reasons, PARAGRAPH);
    let _ =
        write!(out, "**Common checks:** {}", if plan.common.selected { "run" } else { "skipped" });
    if !common_reasons.is_empty() {
        let _ = write!(out, " — {}", common_reasons.join("; "));
    }
    let _ = writeln!(out, "\n");

    changed_files_md(&mut out, plan);
    for warning in &plan.warnings {
        let _ = writeln!(out, "\n> {}", PARAGRAPH.prose(warning));
    }
    out
}

/// The Markdown table of the models: name, tier and why.
fn models_table_md(out: &mut String, plan: &Plan) {
    let _ = writeln!(out, "| Model | Tier | Why |");
    let _ = writeln!(out, "| --- | --- | --- |");
    for model in &plan.models {
        let marks = model_marks(model, |name| CELL.code(name));
        let name = format!("{}{marks}", CELL.code(&model.name));
        let tier = match model.tier {
            Tier::Full => "**full**",
            Tier::Smoke => "smoke",
            Tier::None => "none",
        };
        let reasons = model_reasons_text(&model.reasons, &plan.common.reasons, CELL);
        let why = if reasons.is_empty() { "—".to_owned() } else { reasons.join("<br>") };
        let _ = writeln!(out, "| {name} | {tier} | {why} |");
    }
    let _ = writeln!(out);
}

/// The collapsed Markdown table of the changed files, at most [`CHANGED_ROWS_SHOWN`] rows.
fn changed_files_md(out: &mut String, plan: &Plan) {
    let _ = writeln!(out, "<details><summary>Changed files ({})</summary>\n", plan.changed.len());
    if plan.changed.is_empty() {
        let _ = writeln!(out, "No changed files.\n");
    } else {
        let _ = writeln!(out, "| Status | Path | Matched |");
        let _ = writeln!(out, "| --- | --- | --- |");
        for changed in plan.changed.iter().take(CHANGED_ROWS_SHOWN) {
            let path = match &changed.old_path {
                Some(old) => format!("{} ← {}", CELL.path(&changed.path), CELL.path(old)),
                None => CELL.path(&changed.path),
            };
            let _ = writeln!(
                out,
                "| {} | {path} | {} |",
                status_word(changed),
                matches_text(changed, CELL)
            );
        }
        if plan.changed.len() > CHANGED_ROWS_SHOWN {
            let _ = writeln!(
                out,
                "\n… and {} more changed files: the JSON plan lists them all.",
                plan.changed.len() - CHANGED_ROWS_SHOWN
            );
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(out, "</details>");
}

/// One line: how many models run each tier, and whether common runs.
pub fn summary(plan: &Plan) -> String {
    let count = |tier: Tier| plan.models.iter().filter(|model| model.tier == tier).count();
    let new = plan.models.iter().filter(|model| model.new).count();
    let mut line = format!(
        "{} full, {} smoke, {} none",
        count(Tier::Full),
        count(Tier::Smoke),
        count(Tier::None)
    );
    if new > 0 {
        let _ = write!(line, " ({new} new)");
    }
    line.push_str(if plan.common.selected {
        "; common checks run"
    } else {
        "; common checks skipped"
    });
    if !plan.diff.trusted {
        line.push_str("; diff not trusted");
    }
    line
}

fn header_line(plan: &Plan, code: Style) -> String {
    let merge_base = match &plan.merge_base {
        Some(sha) => format!("merge-base {}", code.code(short_sha(sha))),
        None => "no merge-base".to_owned(),
    };
    let worktree = if plan.head.worktree { " with uncommitted changes" } else { "" };
    format!(
        "{} ({}){worktree} against {} ({}), {merge_base}",
        code.code(&plan.head.reference),
        code.code(short_sha(&plan.head.sha)),
        code.code(&plan.base.reference),
        code.code(short_sha(&plan.base.sha)),
    )
}

fn source_line(plan: &Plan) -> String {
    let source = match plan.diff.source {
        DiffSource::Git => "git diff from the merge-base",
        DiffSource::Worktree => "git diff from the merge-base to the working tree",
        DiffSource::FileList => "the given file list",
    };
    format!(
        "Manifest {} from {} (base side); changed files: {source}",
        plan.manifest.path,
        short_sha(&plan.manifest.commit)
    )
}

fn model_label(model: &prgate_scope::plan::ModelPlan) -> String {
    format!("{}{}", model.name, model_marks(model, |name| name.to_owned()))
}

/// What the PR does to the model as a whole: ` (new)`, ` (removed)`, ` (renamed from old)`,
/// ` (renamed to new)`, or nothing.
fn model_marks(model: &prgate_scope::plan::ModelPlan, name: impl Fn(&str) -> String) -> String {
    match (&model.renamed_from, &model.renamed_to) {
        (Some(from), _) => format!(" (renamed from {})", name(from)),
        (_, Some(to)) => format!(" (renamed to {})", name(to)),
        _ if model.new => " (new)".to_owned(),
        _ if model.removed => " (removed)".to_owned(),
        _ => String::new(),
    }
}

fn changed_label(changed: &ChangedPath, show: Style) -> String {
    let letter = status_letter(changed);
    match &changed.old_path {
        Some(old) => format!("{letter}  {} <- {}", show.code(&changed.path), show.code(old)),
        None => format!("{letter}  {}", show.code(&changed.path)),
    }
}

fn status_letter(changed: &ChangedPath) -> char {
    prgate_scope::Change { path: String::new(), status: changed.status, old_path: None }
        .status_letter()
}

fn status_word(changed: &ChangedPath) -> &'static str {
    use prgate_scope::ChangeStatus::*;
    match changed.status {
        Added => "added",
        Modified => "modified",
        Deleted => "deleted",
        Renamed => "renamed",
        Copied => "copied",
        TypeChanged => "type changed",
        Unknown => "changed",
    }
}

/// What a changed path matched, as a short phrase. A match of a rename's old path alone is
/// marked; one that both paths share is shown once.
fn matches_text(changed: &ChangedPath, show: Style) -> String {
    if changed.matches.is_empty() {
        return "no pattern: selects nothing".to_owned();
    }
    // (what, pattern) -> whether the new path matched.
    let mut phrases: Vec<(String, &str, bool)> = Vec::new();
    for path_match in &changed.matches {
        let (what, pattern, path) = match path_match {
            PathMatch::Model { model, pattern, path } => {
                (format!("model {}", show.code(model)), pattern, path)
            }
            PathMatch::Shared { pattern, path } => ("shared".to_owned(), pattern, path),
            PathMatch::Ignored { pattern, path } => ("ignored".to_owned(), pattern, path),
            PathMatch::NoModel { pattern, path } => {
                ("no known model fits".to_owned(), pattern, path)
            }
        };
        let on_new_path = *path == changed.path;
        match phrases.iter_mut().find(|(w, p, _)| *w == what && *p == pattern.as_str()) {
            Some(existing) => existing.2 |= on_new_path,
            None => phrases.push((what, pattern, on_new_path)),
        }
    }
    phrases
        .iter()
        .map(|(what, pattern, on_new_path)| {
            let side = if *on_new_path { "" } else { " (old path)" };
            format!("{what}{side} ({})", show.path(pattern))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A model's reasons, at most [`REASONS_SHOWN`] of them and a count of the rest.
fn reasons_text(reasons: &[Reason], show: Style) -> Vec<String> {
    let mut lines: Vec<String> =
        reasons.iter().take(REASONS_SHOWN).map(|reason| reason_text(reason, show)).collect();
    if reasons.len() > REASONS_SHOWN {
        lines.push(format!("… and {} more", reasons.len() - REASONS_SHOWN));
    }
    lines
}

/// A model's reasons; a shared change names the first shared path that changed.
fn model_reasons_text(reasons: &[Reason], common: &[Reason], show: Style) -> Vec<String> {
    match reasons {
        [Reason::SharedChange] => {
            let shared: Vec<&Reason> = common
                .iter()
                .filter(|reason| matches!(reason, Reason::ChangedPath { .. }))
                .collect();
            let line = match shared.as_slice() {
                [] => reason_text(&Reason::SharedChange, show),
                [only] => format!("shared: {}", reason_text(only, show)),
                [first, rest @ ..] => {
                    format!("shared: {} and {} more", reason_text(first, show), rest.len())
                }
            };
            vec![line]
        }
        _ => reasons_text(reasons, show),
    }
}

/// How many changed files the Markdown lists, so that a large PR's plan stays well inside a
/// PR comment (GitHub takes 65,536 characters); the JSON has them all.
const CHANGED_ROWS_SHOWN: usize = 200;

/// How many reasons a model's row shows; the JSON has them all.
const REASONS_SHOWN: usize = 5;

fn reason_text(reason: &Reason, show: Style) -> String {
    match reason {
        Reason::ChangedPath { path, pattern } => {
            format!("{} ({})", show.path(path), show.path(pattern))
        }
        Reason::UntrustedDiff { detail } => format!("diff not trusted: {}", show.prose(detail)),
        Reason::SharedChange => "shared paths changed: see the common checks".to_owned(),
    }
}

#[cfg(test)]
mod tests;
