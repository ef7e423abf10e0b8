//! A maintainer's `accept-narrowing` is of the commit they saw: `prgate accept` records it on
//! that head (the `AMD PR test / accept-narrowing` status), and a run counts the label only on
//! a head that has prgate's record. A push after the acceptance, a record the author posted
//! themselves, an author or a triage user adding the label: none of them counts.

use super::*;

const PUSHED: &str = "2222222222222222222222222222222222222222";
const LABEL: &str = "accept-narrowing";
const CONTEXT: &str = "AMD PR test / accept-narrowing";

/// A stand-in for PR #7 at `head` that carries the accept-narrowing label, added by `adder`
/// (its issue events say so); `lead` maintains, `author` wrote the PR and may write, `helper`
/// triages.
async fn accepted_hub(head: &str, adder: &str) -> (MockServer, Hub) {
    let (server, hub) = hub(head, BASE_SHA, "run-ci").await;
    hub.with(|state| {
        state.pr["labels"] = json!([{ "name": LABEL }]);
        state.permissions.insert("author".to_owned(), permission("write", "write"));
        state.permissions.insert("helper".to_owned(), permission("read", "triage"));
        state.events = vec![
            json!({ "event": "labeled", "actor": { "login": adder }, "label": { "name": LABEL } }),
        ];
    });
    (server, hub)
}

/// `prgate accept` on `event`.
async fn accept(server: &MockServer, event: &Value) -> Run {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("event.json");
    std::fs::write(&path, event.to_string()).expect("write the event");
    let path = path.to_str().expect("UTF-8").to_owned();
    let args = ["accept", "--event", &path, "--repository", "amd/mono"];
    prgate(server, args.map(str::to_owned).to_vec(), &[]).await
}

/// The pinned labels and notes of a run started by `lead` at `head`.
async fn pinned_labels(server: &MockServer, hub: &Hub, head: &str) -> (Vec<Value>, Vec<Value>) {
    // Each run's label is removed as it starts: the maintainer added it again.
    hub.with(|state| state.labels = vec!["run-ci".to_owned()]);
    let (run, dir) = trigger(server, &labeled("lead", "run-ci", head)).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let pin = pinned(&dir);
    let list = |key: &str| pin[key].as_array().cloned().unwrap_or_default();
    (list("labels"), list("notes"))
}

fn recorded(hub: &Hub, sha: &str) -> Vec<Value> {
    hub.with(|state| state.statuses.get(sha).cloned().unwrap_or_default())
        .into_iter()
        .filter(|status| status["context"] == CONTEXT)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_acceptance_counts_on_the_head_it_was_given_for_and_not_after_a_push() {
    let (server, hub) = accepted_hub(SHA, "lead").await;
    // Before prgate recorded it, the label does not count even at its own head.
    let (labels, notes) = pinned_labels(&server, &hub, SHA).await;
    assert!(labels.is_empty(), "{labels:?}");
    assert!(
        notes[0].as_str().is_some_and(|note| note.contains("it was not given for")),
        "{notes:?}"
    );

    let run = accept(&server, &labeled("lead", "Accept-Narrowing", SHA)).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let status = recorded(&hub, SHA);
    assert_eq!(status.len(), 1, "{status:?}");
    assert_eq!(status[0]["state"], "success");
    assert_eq!(status[0]["creator"]["login"], "prgate-bot");
    assert!(status[0]["description"].as_str().is_some_and(|text| text.starts_with("lead added")));
    // The label stays on the PR: it is the acceptance; the status ties it to this commit.
    assert_eq!(hub.requested("DELETE", "/repos/amd/mono/issues/7/labels/accept"), 0);
    let (labels, notes) = pinned_labels(&server, &hub, SHA).await;
    assert_eq!(labels, [json!(LABEL)]);
    assert!(notes.is_empty(), "{notes:?}");

    // The author pushes: the label is still on the PR, but nobody accepted the new head.
    hub.with(|state| state.pr["head"]["sha"] = json!(PUSHED));
    let (labels, notes) = pinned_labels(&server, &hub, PUSHED).await;
    assert!(labels.is_empty(), "{labels:?}");
    let expected = format!(
        "the accept-narrowing label does not count: it was not given for {PUSHED} (that commit has no `{CONTEXT}` status from prgate); a maintainer accepts the head they saw, so after a push they remove the label and add it again"
    );
    assert_eq!(notes, [json!(expected)]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_record_the_author_posts_themselves_does_not_count() {
    let (server, hub) = accepted_hub(SHA, "lead").await;
    // Any token that may write statuses can post one with that context.
    hub.with(|state| {
        let forged =
            json!({ "context": CONTEXT, "state": "success", "creator": { "login": "author" } });
        state.statuses.insert(SHA.to_owned(), vec![forged]);
    });
    let (labels, notes) = pinned_labels(&server, &hub, SHA).await;
    assert!(labels.is_empty(), "{labels:?}");
    assert!(notes[0].as_str().is_some_and(|note| note.contains("posted by author, not prgate")));
}

#[tokio::test(flavor = "multi_thread")]
async fn only_a_maintainer_other_than_the_author_at_the_prs_head_is_recorded() {
    let cases = [
        ("author", SHA, "author, the PR's author, added it"),
        ("helper", SHA, "helper added it with the triage (permission read) role"),
        // The maintainer labelled an older head than the PR has now.
        ("lead", PUSHED, &format!("the head of #7 moved from {PUSHED} to {SHA}")),
    ];
    for (sender, head, why) in cases {
        let (server, hub) = accepted_hub(SHA, sender).await;
        let run = accept(&server, &labeled(sender, LABEL, head)).await;
        assert_eq!(run.code, 1, "{sender}: {}{}", run.stdout, run.stderr);
        assert!(run.stderr.contains(why), "{sender}: {}", run.stderr);
        assert!(recorded(&hub, SHA).is_empty() && recorded(&hub, PUSHED).is_empty(), "{sender}");
    }
    // Another label is not an acceptance.
    let (server, hub) = accepted_hub(SHA, "lead").await;
    let run = accept(&server, &labeled("lead", "run-ci", SHA)).await;
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("the label added is 'run-ci', not 'accept-narrowing'"));
    assert_eq!(hub.requested("POST", "/repos/amd/mono/statuses"), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_queued_pr_counts_the_acceptance_of_its_own_head_not_of_the_queues_commit() {
    const MERGE: &str = "4444444444444444444444444444444444444444";
    let mut event = fixture("merge_group.json");
    event["merge_group"]["head_sha"] = json!(MERGE);
    event["merge_group"]["base_sha"] = json!(BASE_SHA);
    event["merge_group"]["head_ref"] =
        json!(format!("refs/heads/gh-readonly-queue/main/pr-7-{SHA}"));
    for (recorded_on, counts) in [(SHA, true), (MERGE, false)] {
        let (server, hub) = accepted_hub(SHA, "lead").await;
        hub.with(|state| {
            let ours = json!({ "context": CONTEXT, "state": "success", "creator": { "login": "prgate-bot" } });
            state.statuses.insert(recorded_on.to_owned(), vec![ours]);
        });
        let (run, dir) = trigger(&server, &event).await;
        assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
        let pin = pinned(&dir);
        assert_eq!(pin["sha"], MERGE);
        let kept = pin["labels"].as_array().is_some_and(|labels| labels.contains(&json!(LABEL)));
        assert_eq!(kept, counts, "recorded on {recorded_on}: {pin:#}");
    }
}
