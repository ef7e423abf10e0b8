use super::*;

const HEAD: &str = "929f8209d40f77f4abc622a499c93a83babdbe64";

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|&item| item.to_owned()).collect()
}

fn queued(added: &[String]) -> Queued<'_> {
    Queued { number: 7, pr_head: HEAD, context: "AMD PR test", added, judging: &[] }
}

#[test]
fn a_queue_that_changes_what_judges_the_pr_runs_everything_it_changes_again() {
    let added = strings(&["docs/b.md", "prgate.toml", "test/e2e/alpha.toml"]);
    let judging = strings(&["prgate.toml", "CODEOWNERS.rules", "test/e2e/alpha.toml"]);
    let moved = Queued { judging: &judging, ..queued(&added) };
    let pr_files = strings(&["models/alpha/a.py", "models/alpha/b.py"]);
    assert_eq!(
        QueueVerdict::judging_moved(&moved, &pr_files),
        Some(QueueVerdict::Rerun {
            files: pr_files.clone(),
            note: "merge queue: #7 passed at 929f820, but the queue changes prgate.toml, test/e2e/alpha.toml, which judge it: everything it changes runs again on the merge commit".to_owned(),
        })
    );
    let unjudged = strings(&["docs/b.md", "test/e2e/beta.toml"]);
    let unmoved = Queued { judging: &judging, ..queued(&unjudged) };
    assert_eq!(QueueVerdict::judging_moved(&unmoved, &pr_files), None);
}

#[test]
fn without_a_passing_result_everything_either_changes_runs() {
    let added = strings(&["docs/b.md", "models/alpha/a.py"]);
    assert_eq!(
        QueueVerdict::without_result(&queued(&added), "failure", &strings(&["models/alpha/a.py", "x.py"])),
        QueueVerdict::Rerun {
            files: strings(&["docs/b.md", "models/alpha/a.py", "x.py"]),
            note: "merge queue: #7 has no passing AMD PR test on its head 929f820 (failure): everything it or the queue changes runs on the merge commit".to_owned(),
        }
    );
}

#[test]
fn a_passing_result_holds_unless_the_queue_touches_what_it_was_tested_for() {
    let one = strings(&["docs/b.md"]);
    assert_eq!(
        QueueVerdict::of_overlap(&queued(&one), Overlap::default()),
        QueueVerdict::Holds(
            "#7 passed at 929f820; the queue adds 1 path, none in the scope it was tested for"
                .to_owned()
        )
    );
    let two = strings(&["common/c.py", "models/alpha/a.py"]);
    let overlap = Overlap {
        models: ["alpha".to_owned(), "beta".to_owned()].into(),
        common: true,
        paths: ["common/c.py".to_owned()].into(),
    };
    assert_eq!(
        QueueVerdict::of_overlap(&queued(&two), overlap),
        QueueVerdict::Rerun {
            files: strings(&["common/c.py"]),
            note: "merge queue: #7 passed at 929f820, but the queue adds 2 paths that touch what it was tested for: alpha, beta, the common checks run again on the merge commit".to_owned(),
        }
    );
}
