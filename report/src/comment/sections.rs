//! The comment's checklist: the verdict's sections in the guideline's order, each with its
//! state and its items worst first (capped by the detail the comment can afford), and the
//! recipes the PR changed. The per-model tables are the models module's.

use prgate_gate::verdict::{Item, Section, State, Verdict};

use crate::escape::{MarkdownPlace, html_text, markdown_code};

use super::{Detail, ItemView, RecipeChangeView, SectionView, finding_md, state_md};

pub(super) fn sections(verdict: &Verdict, detail: Detail) -> Vec<SectionView> {
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
pub(super) fn recipe_changes(verdict: &Verdict) -> Vec<RecipeChangeView> {
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
