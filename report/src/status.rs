//! The commit status on the pinned PR commit: a state GitHub knows, a context (`AMD PR test`
//! unless configured), a link to the run, and a description of at most
//! [`DESCRIPTION_LIMIT`] characters that says what matters — what failed, with its number,
//! and how much ran: "kimi_k31: TPOT +3.1% at c=64; 2 full, 5 smoke".
//!
//! Plain text on GitHub (no Markdown), so nothing is escaped but control characters. Posting
//! the status is the binary's business.

use prgate_gate::verdict::{Headline, Item, Numbers, State, Verdict};
use prgate_scope::plan::{Plan, Tier};

use crate::comment::{Progress, StepState};
use crate::escape::terminal;

/// The status's context unless the configuration names another.
pub const DEFAULT_CONTEXT: &str = "AMD PR test";

/// The context of the status that records a maintainer's acceptance `label` on the commit it
/// was given for (`prgate accept`): `AMD PR test / accept-narrowing`.
pub fn acceptance_context(label: &str) -> String {
    format!("{DEFAULT_CONTEXT} / {label}")
}

/// The status that records `login`'s acceptance `label` on the commit it was given for: a
/// success, so that GitHub shows it beside the run's own, on that commit alone.
pub fn acceptance_status(label: &str, login: &str) -> Status {
    Status {
        state: StatusState::Success,
        context: acceptance_context(label),
        description: fit_description(&terminal(&format!(
            "{login} added {label} at this commit; it counts for this commit only"
        ))),
        target_url: None,
    }
}

/// The most characters GitHub keeps of a status's description.
pub const DESCRIPTION_LIMIT: usize = 140;

/// A commit status, ready for GitHub's API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub state: StatusState,
    pub context: String,
    /// At most [`DESCRIPTION_LIMIT`] characters.
    pub description: String,
    pub target_url: Option<String>,
}

/// The states of a commit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatusState {
    Pending,
    Success,
    Failure,
    /// prgate itself could not finish: nothing was decided about the PR.
    Error,
}

/// What the configuration and the run say about every status: its context and its link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusSettings {
    pub context: String,
    /// The run's page.
    pub target_url: Option<String>,
}

impl Default for StatusSettings {
    fn default() -> StatusSettings {
        StatusSettings { context: DEFAULT_CONTEXT.to_owned(), target_url: None }
    }
}

impl StatusState {
    /// The state as GitHub's API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            StatusState::Pending => "pending",
            StatusState::Success => "success",
            StatusState::Failure => "failure",
            StatusState::Error => "error",
        }
    }
}

/// The status of a PR test: `pending` while no verdict exists or checks are still open,
/// `success` when the verdict passed (warnings allowed), `failure` when it failed.
pub fn commit_status(
    verdict: Option<&Verdict>,
    plan: &Plan,
    progress: Option<&Progress>,
    settings: &StatusSettings,
) -> Status {
    let state = match verdict.map(Verdict::headline) {
        None | Some(Headline::Pending) => StatusState::Pending,
        Some(Headline::Fail) => StatusState::Failure,
        // The node could not judge a check: never `success`.
        Some(Headline::CannotJudge) => StatusState::Error,
        Some(Headline::Pass | Headline::PassWithWarnings) => StatusState::Success,
    };
    let lead = match verdict {
        None => vec![running(progress)],
        Some(verdict) => lead_phrases(verdict, progress),
    };
    Status {
        state,
        context: settings.context.clone(),
        description: compose(&lead, &scope_phrase(plan)),
        target_url: settings.target_url.clone(),
    }
}

/// The status when prgate itself failed (a file it could not read, GitHub unreachable): state
/// `error`, and the problem in the description.
pub fn error_status(problem: &str, settings: &StatusSettings) -> Status {
    Status {
        state: StatusState::Error,
        context: settings.context.clone(),
        description: fit_description(&terminal(&format!("prgate could not finish: {problem}"))),
        target_url: settings.target_url.clone(),
    }
}

/// The status of a merge queue's commit on which the PR's own passing result holds
/// (docs/github.md, "The merge queue"): `success`, and why in the description.
pub fn queue_holds(why: &str, settings: &StatusSettings) -> Status {
    Status {
        state: StatusState::Success,
        context: settings.context.clone(),
        description: fit_description(why),
        target_url: settings.target_url.clone(),
    }
}

/// At most [`DESCRIPTION_LIMIT`] characters (not bytes). A longer text is cut after its last
/// whole word that fits, and ends with `…`; only a text with no space in the second half of
/// the limit is cut inside a word.
/// Not `prgate_scope::text::clip`: the `…` must fit inside the limit, which GitHub enforces.
pub fn fit_description(text: &str) -> String {
    if text.chars().count() <= DESCRIPTION_LIMIT {
        return text.to_owned();
    }
    let budget = DESCRIPTION_LIMIT - 1;
    let prefix: String = text.chars().take(budget).collect();
    let next_is_space = text.chars().nth(budget).is_some_and(char::is_whitespace);
    let cut = if next_is_space {
        prefix.len()
    } else {
        match prefix.rfind(char::is_whitespace) {
            Some(space) if prefix[..space].chars().count() >= budget / 2 => space,
            _ => prefix.len(),
        }
    };
    let mut out = prefix[..cut].trim_end().trim_end_matches([';', ',', ':']).to_owned();
    out.push('…');
    out
}

/// What leads the description: what failed, else what is open, else that it passed.
fn lead_phrases(verdict: &Verdict, progress: Option<&Progress>) -> Vec<String> {
    let items: Vec<&Item> = verdict.sections.iter().flat_map(|section| &section.items).collect();
    let with_state = |state: State| -> Vec<&Item> {
        items.iter().copied().filter(|item| item.state == state).collect()
    };
    match verdict.result {
        State::Fail => with_state(State::Fail).into_iter().map(item_phrase).collect(),
        State::Error => {
            let errors = with_state(State::Error);
            let mut lead = vec![format!(
                "{} {} could not be judged",
                errors.len(),
                plural(errors.len(), "check", "checks")
            )];
            lead.extend(errors.into_iter().map(item_phrase));
            lead
        }
        State::Pending => {
            let open = with_state(State::Pending).len();
            let mut lead = vec![match progress {
                Some(_) => running(progress),
                None => format!("waiting for {open} {}", plural(open, "check", "checks")),
            }];
            lead.extend(with_state(State::Pending).into_iter().map(item_phrase));
            lead
        }
        State::Pass
        | State::Warn
        | State::AuthorProvided
        | State::NothingToCheck
        | State::NotJudged => {
            let warnings = with_state(State::Warn).len();
            let author = with_state(State::AuthorProvided).len();
            let mut passed = "passed".to_owned();
            let mut notes = Vec::new();
            if warnings > 0 {
                notes.push(format!("{warnings} {}", plural(warnings, "warning", "warnings")));
            }
            if author > 0 {
                notes.push(format!("{author} author-provided"));
            }
            if !notes.is_empty() {
                passed.push_str(" with ");
                passed.push_str(&notes.join(", "));
            }
            vec![passed]
        }
    }
}

fn running(progress: Option<&Progress>) -> String {
    match progress {
        Some(progress) => {
            let done = progress.steps.iter().filter(|step| step.state == StepState::Done).count();
            format!("running: {done} of {} steps done", progress.steps.len())
        }
        None => "running".to_owned(),
    }
}

/// An item in a few words, its number first: "kimi_k31: TPOT +3.1% at c=64".
fn item_phrase(item: &Item) -> String {
    let who = item.model.as_deref().map(|model| format!("{model}: ")).unwrap_or_default();
    let what = match (&item.numbers, item.check.as_str()) {
        (Some(Numbers::Speed { concurrency, change: Some(change), .. }), _) => {
            format!("TPOT {:+.1}% at c={concurrency}", change * 100.0)
        }
        (Some(Numbers::Accuracy { benchmark, difference, .. }), _) => {
            format!("{benchmark} {:+.1} points", difference * 100.0)
        }
        (Some(Numbers::Kernel { kernel, change, .. }), _) => {
            format!("{kernel} {:+.1}%", change * 100.0)
        }
        (Some(Numbers::Tests { failed, errors, pre_existing, .. }), check) => {
            let failing = (failed + errors).saturating_sub(*pre_existing);
            format!("{check} {failing} failing")
        }
        (_, "routing") if item.state == State::Fail => "no monokernel routing".to_owned(),
        (_, "gain") if item.state == State::Fail => "no TPOT gain shown".to_owned(),
        (_, "codeowners") => format!("CODEOWNERS {}", item.state.as_str()),
        (_, check) => format!("{check} {}", item.state.as_str()),
    };
    terminal(&format!("{who}{what}"))
}

/// How much ran: "2 full, 5 smoke, common".
fn scope_phrase(plan: &Plan) -> String {
    let count = |tier: Tier| {
        plan.models.iter().filter(|model| model.tier == tier && !model.removed).count()
    };
    let mut parts: Vec<String> = [(Tier::Full, "full"), (Tier::Smoke, "smoke")]
        .iter()
        .filter_map(|(tier, word)| {
            let n = count(*tier);
            (n > 0).then(|| format!("{n} {word}"))
        })
        .collect();
    if plan.common.selected {
        parts.push("common".to_owned());
    }
    if parts.is_empty() { "no model runs".to_owned() } else { parts.join(", ") }
}

/// The lead phrases and the scope, as many phrases as fit with a count of the rest; then the
/// first phrase alone; then the first phrase cut.
fn compose(lead: &[String], scope: &str) -> String {
    let fits = |text: &str| text.chars().count() <= DESCRIPTION_LIMIT;
    for shown in (1..=lead.len()).rev() {
        let mut text = lead[..shown].join("; ");
        if shown < lead.len() {
            text.push_str(&format!("; +{} more", lead.len() - shown));
        }
        text.push_str("; ");
        text.push_str(scope);
        if fits(&text) {
            return text;
        }
    }
    match lead.first() {
        Some(first) => fit_description(first),
        None => fit_description(scope),
    }
}

fn plural(count: usize, one: &'static str, many: &'static str) -> &'static str {
    if count == 1 { one } else { many }
}

#[cfg(test)]
mod tests;
