//! The drift guard's alarms for a PR comment's header: the tripped guards of the PR's models in
//! full ([`super::alarm_words`]), then, per other model, how many of its cells are tripped.
//! Which guards are tripped is the gate's ([`prgate_gate::drift::guards`]); reading the ledger
//! is the caller's.

use prgate_gate::drift::{Guard, GuardState, History};

/// The alarms of the tripped guards among `guards` (of `history`): in full for the models
/// `models` (the PR's), then how many cells of each other model are tripped.
pub fn alarms(history: &History, guards: Vec<Guard>, models: &[String]) -> Vec<String> {
    let tripped: Vec<Guard> =
        guards.into_iter().filter(|guard| guard.state == GuardState::Tripped).collect();
    let (mine, others): (Vec<_>, Vec<_>) =
        tripped.iter().partition(|guard| models.iter().any(|model| model == guard.cell.model()));
    let mut words: Vec<String> =
        mine.iter().map(|guard| super::alarm_words(guard, history)).collect();
    let mut models: Vec<&str> = others.iter().map(|guard| guard.cell.model()).collect();
    models.dedup();
    for model in models {
        let count = others.iter().filter(|guard| guard.cell.model() == model).count();
        let cells = if count == 1 { "cell" } else { "cells" };
        words.push(format!(
            "{model}: {count} {cells} over the budget (see prgate history check, or the history page)"
        ));
    }
    words
}
