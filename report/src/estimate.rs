//! The estimate of `prgate plan --estimate` for people: each planned model's GPU time and the
//! models scheduled onto nodes, as terminal tables, as Markdown, and in words for the PR
//! comment's header. The data ([`EstimateOutput`]) is also the `estimate` object of `prgate
//! plan --format json` (docs/plan.md); the runner's schedule computes it, the binary fills it.
//! Pure: data in, text out; every name is escaped where it is shown.

use std::fmt::Write as _;

use prgate_gate::evidence::NotRunReason;
use prgate_scope::plan::Tier;
use serde::Serialize;

use crate::escape::{MarkdownPlace, markdown_code, markdown_text, terminal};

/// The `estimate` object of `prgate plan --format json`; docs/plan.md documents it.
#[derive(Debug, Serialize)]
pub struct EstimateOutput {
    pub nodes: Vec<NodeOutput>,
    pub jobs: Vec<JobOutput>,
    pub makespan_seconds: u64,
    pub lower_bound_seconds: u64,
    pub lower_bound_basis: String,
    pub optimal: bool,
    pub history_files: usize,
}

#[derive(Debug, Serialize)]
pub struct NodeOutput {
    pub name: String,
    pub hardware: String,
    pub seconds: u64,
    /// Its jobs, longest first: model names, `null` for the common checks.
    pub jobs: Vec<Option<String>>,
}

#[derive(Debug, Serialize)]
pub struct JobOutput {
    /// `null` for the common checks.
    pub model: Option<String>,
    pub tier: Option<Tier>,
    pub seconds: u64,
    pub source: &'static str,
    pub node: Option<String>,
    pub unschedulable: Option<String>,
    /// What the job's `not-run` records say when no node can run it (not in the JSON: the
    /// `--stage start` schedule file keeps it).
    #[serde(skip)]
    pub not_run: Option<NotRunReason>,
    pub note: Option<String>,
    /// What the job holds while it runs, when its recipe says (not for the common checks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holds: Option<HoldsOutput>,
    pub parts: Vec<PartOutput>,
}

/// The nodes and GPUs a job holds, and its GPU time (`seconds × gpus`).
#[derive(Debug, Serialize)]
pub struct HoldsOutput {
    pub nodes: u32,
    pub gpus: u32,
    pub gpu_seconds: u64,
}

#[derive(Debug, Serialize)]
pub struct PartOutput {
    pub part: String,
    pub seconds: u64,
    pub source: &'static str,
}

/// `5h03m`, `42m`, `0m`: minutes rounded up.
pub fn clock(seconds: u64) -> String {
    let minutes = seconds.div_ceil(60);
    if minutes >= 60 {
        format!("{}h{:02}m", minutes / 60, minutes % 60)
    } else {
        format!("{minutes}m")
    }
}

impl EstimateOutput {
    fn job_name(job: &JobOutput) -> String {
        job.model.clone().unwrap_or_else(|| "(common checks)".to_owned())
    }

    /// The job's time; a topology's with the nodes and GPUs it holds for it.
    fn time_text(job: &JobOutput) -> String {
        match &job.holds {
            Some(holds) if holds.nodes > 1 => format!(
                "{} on {} nodes, {} GPUs ({} GPU time)",
                clock(job.seconds),
                holds.nodes,
                holds.gpus,
                clock(holds.gpu_seconds)
            ),
            _ => clock(job.seconds),
        }
    }

    fn source_text(job: &JobOutput) -> String {
        match (job.source, job.parts.iter().filter(|part| part.source == "history").count()) {
            ("no-recipe", _) => "no recipe".to_owned(),
            ("recipe", _) => "recipe".to_owned(),
            (source, parts) => format!("{source} ({parts} parts)"),
        }
    }

    fn summary(&self) -> String {
        let bound =
            format!("lower bound {} ({})", clock(self.lower_bound_seconds), self.lower_bound_basis);
        if self.optimal {
            format!("makespan {}; {bound}; no schedule is shorter", clock(self.makespan_seconds))
        } else {
            format!("makespan {}; {bound}", clock(self.makespan_seconds))
        }
    }

    /// The estimate as terminal tables, after the plan's.
    pub fn human(&self) -> String {
        let mut out = String::new();
        let history = match self.history_files {
            0 => "no history".to_owned(),
            1 => "1 history file".to_owned(),
            files => format!("{files} history files"),
        };
        let _ = writeln!(out, "\nestimate on {} nodes, {history}", self.nodes.len());
        let rows: Vec<[String; 5]> = self.jobs.iter().map(Self::human_job_row).collect();
        table(&mut out, ["model", "tier", "time", "from", "node"], &rows);
        for job in &self.jobs {
            Self::human_note(&mut out, job);
        }
        let _ = writeln!(out);
        let rows: Vec<[String; 4]> = self.nodes.iter().map(Self::human_node_row).collect();
        table(&mut out, ["node", "hardware", "total", "models"], &rows);
        let _ = writeln!(out, "\n{}", terminal(&self.summary()));
        out
    }

    /// A job's row of the terminal table: model, tier, time, where the time is from, node.
    fn human_job_row(job: &JobOutput) -> [String; 5] {
        let node = match (&job.node, &job.unschedulable) {
            (Some(node), _) => terminal(node),
            (None, Some(reason)) => format!("none: {}", terminal(reason)),
            (None, None) => "none".to_owned(),
        };
        [
            terminal(&Self::job_name(job)),
            job.tier.map_or("", Tier::as_str).to_owned(),
            Self::time_text(job),
            Self::source_text(job),
            node,
        ]
    }

    /// A job's note, if it has one, below the table.
    fn human_note(out: &mut String, job: &JobOutput) {
        if let Some(note) = &job.note {
            // A recipe's error may run over lines (TOML's): each indented under the first.
            let mut lines = note.lines();
            let first = lines.next().unwrap_or_default();
            let _ = writeln!(out, "note: {}: {}", terminal(&Self::job_name(job)), terminal(first));
            for line in lines {
                let _ = writeln!(out, "      {}", terminal(line));
            }
        }
    }

    /// A node's row of the terminal table: name, hardware, its total, the jobs it runs.
    fn human_node_row(node: &NodeOutput) -> [String; 4] {
        let jobs: Vec<String> = node
            .jobs
            .iter()
            .map(|job| terminal(job.as_deref().unwrap_or("(common checks)")))
            .collect();
        [terminal(&node.name), terminal(&node.hardware), clock(node.seconds), jobs.join(", ")]
    }

    /// The estimate as Markdown, after the plan's.
    pub fn markdown(&self) -> String {
        let cell = |text: &str| markdown_code(text, MarkdownPlace::TableCell);
        let prose = |text: &str| markdown_text(text, MarkdownPlace::TableCell);
        let name = |model: Option<&str>| model.map_or_else(|| "common checks".to_owned(), cell);
        let mut out = String::new();
        let _ = writeln!(out, "\n### Estimate on {} nodes\n", self.nodes.len());
        let _ = writeln!(out, "| model | tier | time | from | node |");
        let _ = writeln!(out, "| --- | --- | --- | --- | --- |");
        for job in &self.jobs {
            let node = match (&job.node, &job.unschedulable) {
                (Some(node), _) => cell(node),
                (None, Some(reason)) => format!("none: {}", prose(reason)),
                (None, None) => "none".to_owned(),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {node} |",
                name(job.model.as_deref()),
                job.tier.map_or("", Tier::as_str),
                Self::time_text(job),
                Self::source_text(job)
            );
        }
        let _ = writeln!(out, "\n| node | hardware | total | models |");
        let _ = writeln!(out, "| --- | --- | --- | --- |");
        for node in &self.nodes {
            let jobs: Vec<String> = node.jobs.iter().map(|job| name(job.as_deref())).collect();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                cell(&node.name),
                cell(&node.hardware),
                clock(node.seconds),
                jobs.join(", ")
            );
        }
        let _ = writeln!(out, "\n{}", markdown_text(&self.summary(), MarkdownPlace::Paragraph));
        out
    }
}

/// Left-aligned columns two spaces apart; the last column is not padded.
fn table<const N: usize>(out: &mut String, header: [&str; N], rows: &[[String; N]]) {
    let mut widths = header.map(|title| title.chars().count());
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut line = |cells: Vec<&str>| {
        let mut text = String::new();
        for (index, cell) in cells.iter().enumerate() {
            if index + 1 == N {
                text.push_str(cell);
            } else {
                let _ = write!(text, "{cell:<width$}  ", width = widths[index]);
            }
        }
        let _ = writeln!(out, "{}", text.trim_end());
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

/// `about 5h53m of GPU time; about 3h10m on 2 nodes (no schedule is shorter than 2h58m)`: the
/// estimate in words, for the comment's header.
pub fn estimate_words(estimate: &EstimateOutput) -> String {
    let total: u64 = estimate.jobs.iter().map(|job| job.seconds).sum();
    let busy = estimate.nodes.iter().filter(|node| !node.jobs.is_empty()).count();
    let plural = if busy == 1 { "" } else { "s" };
    format!(
        "about {} of GPU time; about {} on {busy} node{plural} (no schedule is shorter than {})",
        clock(total),
        clock(estimate.makespan_seconds),
        clock(estimate.lower_bound_seconds)
    )
}
