use prgate_gate::history::{CellProvenance, LEDGER_VERSION, SpeedChange};
use prgate_gate::verdict::State;

use super::*;

fn run(tested: &str, merge_queue: bool, models: &[&str]) -> RunRecord {
    RunRecord {
        version: LEDGER_VERSION,
        at: "2026-12-01T15:00:00Z".to_owned(),
        pr: 7,
        title: "[Fix] t".to_owned(),
        tested_commit: tested.to_owned(),
        base_commit: "b".repeat(40),
        merge_queue,
        run: None,
        verdict: State::Pass,
        speed: models
            .iter()
            .map(|model| SpeedChange {
                model: (*model).to_owned(),
                concurrency: 1,
                covered: true,
                provenance: CellProvenance::default(),
                change: 0.01,
                interval: (0.0, 0.02),
                log_ratio: 0.00995,
                standard_error: 0.004,
                degrees_of_freedom: 8.0,
                pairs: 4,
            })
            .collect(),
        accuracy: Vec::new(),
    }
}

fn facts(pr: u64, head: &str, merge: &str) -> MergeFacts {
    MergeFacts {
        at: "2026-12-02T15:00:00Z".to_owned(),
        pr,
        title: "t".to_owned(),
        url: None,
        merge_commit: merge.to_owned(),
        head_commit: head.to_owned(),
    }
}

#[test]
fn a_merged_pr_is_recorded_once_from_its_saved_runs() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let history = HistoryDir::new(dir.path());
    let (head, merge) = ("a".repeat(40), "c".repeat(40));
    history.save_run(&run(&head, false, &["alpha", "beta"])).expect("saved");
    // A later run of the same commit is kept beside the earlier one.
    history.save_run(&run(&head, false, &["beta"])).expect("saved again");
    history.save_run(&run(&merge, true, &["alpha"])).expect("the queue's run saved");
    assert_eq!(history.runs(&head).expect("read").len(), 2);
    let recorded = history.record_merged(&facts(7, &head, &merge)).expect("recorded");
    let Recorded::Appended(line) = recorded else { panic!("not appended: {recorded:?}") };
    let cells: Vec<(&str, usize)> =
        line.speed.iter().map(|cell| (cell.model.as_str(), cell.pairs)).collect();
    // beta from the PR's two runs, pooled; alpha once, from the queue.
    assert_eq!(cells, [("beta", 8), ("alpha", 4)], "{line:?}");
    assert_eq!(
        history.record_merged(&facts(7, &head, &merge)).expect("read"),
        Recorded::AlreadyRecorded { pr: 7 }
    );
    assert_eq!(history.lines().expect("read").len(), 1);
    // A merge with no saved run is recorded, with nothing measured.
    let Recorded::Appended(line) =
        history.record_merged(&facts(8, &"d".repeat(40), &"e".repeat(40))).expect("recorded")
    else {
        panic!("not appended")
    };
    assert!(line.speed.is_empty() && line.note.is_some());
    assert_eq!(history.lines().expect("read").len(), 2);
}

#[test]
fn a_commit_that_is_not_one_names_no_file() {
    let history = HistoryDir::new(Path::new("/nowhere"));
    for bad in ["../../etc/passwd", "abc", &"g".repeat(40)] {
        let error = history.runs_path(bad).expect_err("refused");
        assert!(error.to_string().contains("is not a commit"), "{error}");
    }
}

#[test]
fn an_anchor_of_another_reference_is_refused_and_a_bad_ledger_is_named() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let history = HistoryDir::new(dir.path());
    let anchor = Anchor {
        version: LEDGER_VERSION,
        at: now(),
        reference_commit: "r".repeat(40),
        head_commit: "t".repeat(40),
        run: None,
        covers: Vec::new(),
        speed: Vec::new(),
        accuracy: Vec::new(),
    };
    let error = history
        .record_anchor(&anchor, |_lines| Some("s".repeat(40)))
        .expect_err("another reference");
    assert!(error.to_string().contains("but the reference is"), "{error}");
    history.record_anchor(&anchor, |_lines| Some("r".repeat(40))).expect("recorded");
    assert_eq!(history.lines().expect("read").len(), 1);

    std::fs::write(history.ledger_path(), "{\"event\":\"merged\"}\n").expect("written");
    let error = history.lines().expect_err("a bad line");
    assert!(error.to_string().contains("ledger.jsonl, line 1:"), "{error}");
    // Nothing is appended to a ledger that cannot be read.
    let reset = Reset {
        version: LEDGER_VERSION,
        at: now(),
        reference_commit: "r".repeat(40),
        reference_name: None,
        reason: "r".to_owned(),
        by: None,
    };
    assert!(history.reset(&reset).is_err());
    assert_eq!(
        std::fs::read_to_string(history.ledger_path()).expect("read"),
        "{\"event\":\"merged\"}\n"
    );
}

#[test]
fn concurrent_writers_each_land_their_line() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let threads: Vec<_> = (1..=8u64)
        .map(|pr| {
            let dir = dir.path().to_path_buf();
            std::thread::spawn(move || {
                HistoryDir::new(&dir)
                    .record_merged(&facts(pr, &"a".repeat(40), &"c".repeat(40)))
                    .expect("recorded");
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("joined");
    }
    let mut prs: Vec<u64> = HistoryDir::new(dir.path())
        .lines()
        .expect("read")
        .iter()
        .filter_map(|line| match line {
            Line::Merged(merged) => Some(merged.pr),
            _ => None,
        })
        .collect();
    prs.sort_unstable();
    assert_eq!(prs, (1..=8).collect::<Vec<_>>());
}
