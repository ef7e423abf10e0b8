use serde_json::{Value, json};

use super::*;

const SHA: &str = "929f8209d40f77f4abc622a499c93a83babdbe64";
const OTHER: &str = "1111111111111111111111111111111111111111";

fn event(value: Value) -> Event {
    serde_json::from_value(value).expect("an event")
}

fn pull_request(state: &str, merged: bool, head: &str) -> PullRequest {
    serde_json::from_value(json!({
        "number": 7, "title": "t", "state": state, "merged": merged,
        "head": { "ref": "feature", "sha": head },
        "base": { "ref": "main", "sha": OTHER.to_uppercase() },
        "labels": [{ "name": "accept-narrowing" }],
    }))
    .expect("a pull request")
}

/// What `value` asks for with the label `run-ci`: the request, or the error's text.
fn check(value: Value, expect: &str) {
    let got = match request(&event(value), "run-ci") {
        Ok(Request::Refuse(reason)) => format!("refuse: {reason}"),
        Ok(Request::Queue(queue)) => {
            format!("queue #{} {} on {}", queue.number, &queue.pr_head[..7], &queue.sha[..7])
        }
        Ok(Request::RerunOfHead(sha)) => format!("rerun of {}", &sha[..7]),
        Ok(Request::Run(run)) => {
            format!("run #{} at {} {:?}", run.number, &run.sha[..7], run.label)
        }
        Err(error) => format!("error: {error}"),
    };
    assert_eq!(got, expect);
}

#[test]
fn what_each_event_asks_for() {
    let labeled = |action: &str, label: &str, head: &str| {
        json!({ "action": action, "label": { "name": label },
                "pull_request": { "number": 7, "head": { "sha": head } } })
    };
    check(labeled("labeled", "Run-CI", &SHA.to_uppercase()), "run #7 at 929f820 Some(\"Run-CI\")");
    check(
        labeled("synchronize", "run-ci", SHA),
        "refuse: the event is 'synchronize', not 'labeled'",
    );
    check(labeled("labeled", "docs", SHA), "refuse: the label added is 'docs', not 'run-ci'");
    check(
        labeled("labeled", "run-ci", "abc"),
        "error: the event's head SHA 'abc' is not 40 hex digits",
    );
    check(json!({ "inputs": { "pr": "#12", "sha": SHA } }), "run #12 at 929f820 None");
    check(json!({ "inputs": { "sha": SHA } }), "error: the dispatch has no PR number in inputs.pr");
    check(
        json!({ "inputs": { "pr": 12, "sha": "abc" } }),
        "error: the dispatch needs the expected head SHA (40 hex digits) in inputs.sha",
    );
    check(
        json!({ "action": "rerequested", "check_suite": {} }),
        "refuse: the check_suite event is 'rerequested': prgate starts from its label, a dispatch or its check run's Re-run button, not from a check suite",
    );
    check(
        json!({ "action": "opened" }),
        "error: the event is neither a pull_request_target, a workflow_dispatch, a merge_group nor a check_run",
    );
}

#[test]
fn the_rerun_button_names_its_sha_and_maybe_its_pr() {
    let clicked = |identifier: &str, prs: Value| {
        json!({ "action": "requested_action", "requested_action": { "identifier": identifier },
                "check_run": { "head_sha": SHA, "pull_requests": prs } })
    };
    check(clicked(crate::RERUN_ACTION, json!([{ "number": 3 }])), "run #3 at 929f820 None");
    check(clicked(crate::RERUN_ACTION, json!([])), "rerun of 929f820");
    check(
        clicked("other", json!([])),
        "refuse: the check_run event is 'requested_action' (other), not prgate's re-run button",
    );
    assert_eq!(
        rerun_of(SHA, &[9, 4]),
        Some(RunRequest { number: 9, sha: SHA.to_owned(), label: None })
    );
    assert_eq!(rerun_of(SHA, &[]), None);
    assert_eq!(no_open_pull(SHA), format!("no open pull request has the head {SHA}"));
}

#[test]
fn a_merge_group_asks_only_when_checks_are_requested() {
    let group = |action: &str, base: &str| {
        json!({ "action": action, "merge_group": {
            "head_sha": SHA, "base_sha": base, "base_ref": "refs/heads/main",
            "head_ref": format!("refs/heads/gh-readonly-queue/main/pr-7-{OTHER}") } })
    };
    check(group("checks_requested", OTHER), "queue #7 1111111 on 929f820");
    check(
        group("destroyed", OTHER),
        "refuse: the merge_group event is 'destroyed', not 'checks_requested'",
    );
    check(group("checks_requested", "main"), "error: the merge group's base SHA 'main'");
}

#[test]
fn only_a_maintainer_who_is_no_bot_may_start_a_run() {
    let sent = |sender: Value| event(json!({ "sender": sender }));
    let bot = sent(json!({ "login": "dependabot[bot]", "type": "Bot" }));
    let bot = sender(&bot).expect("a sender");
    assert_eq!(
        bot_refusal(bot).as_deref(),
        Some("dependabot[bot] is a bot; a maintainer (write, maintain or admin) must start runs")
    );
    let user = sent(json!({ "login": "alice", "type": "User" }));
    assert_eq!(bot_refusal(sender(&user).expect("a sender")), None);
    for nobody in [json!({ "login": "" }), Value::Null] {
        assert_eq!(
            sender(&sent(nobody))
                .map(|login| login.login.clone())
                .map_err(|error| error.to_string()),
            Err("the event names no sender".to_owned())
        );
    }
    let write = Access { allowed: true, role: "maintain (permission write)".to_owned() };
    assert_eq!(refusal("alice", &write), None);
    let triage = Access { allowed: false, role: "triage (permission read)".to_owned() };
    assert_eq!(
        refusal("alice", &triage).as_deref(),
        Some(
            "alice has the triage (permission read) role; starting a run needs write, maintain or admin (GitHub's write or admin permission)"
        )
    );
}

#[test]
fn the_pr_read_again_must_be_open_and_at_the_expected_head() {
    assert_eq!(pr_refusal(7, SHA, &pull_request("open", false, &SHA.to_uppercase())), None);
    assert_eq!(
        pr_refusal(7, SHA, &pull_request("closed", true, SHA)).as_deref(),
        Some("#7 is merged; runs are for open pull requests")
    );
    assert_eq!(
        pr_refusal(7, SHA, &pull_request("closed", false, SHA)).as_deref(),
        Some("#7 is closed; runs are for open pull requests")
    );
    assert_eq!(
        pr_refusal(7, SHA, &pull_request("open", false, OTHER)),
        Some(format!(
            "the head of #7 moved from {SHA} to {OTHER}; a maintainer must start the run again"
        ))
    );
    assert_eq!(moved_while_listed(7, SHA, &pull_request("open", false, SHA)), None);
    assert_eq!(
        moved_while_listed(7, SHA, &pull_request("open", false, OTHER)),
        Some(format!(
            "the head of #7 moved from {SHA} to {OTHER} while its files were read; a maintainer must start the run again"
        ))
    );
    let request = RunRequest { number: 7, sha: SHA.to_owned(), label: None };
    let files = PrFiles { paths: vec!["a".to_owned()], truncated: true };
    let pr = pull_request("open", false, SHA);
    let pinned = run_pin(&request, &pr, &pr, &files, "alice");
    assert_eq!((pinned.base_sha.as_str(), pinned.base_ref.as_str()), (OTHER, "main"));
    assert!(pinned.files_truncated && pinned.merge_group.is_none());
    assert!(pinned.has_label("Accept-Narrowing"));
}

#[test]
fn only_a_passing_status_of_ours_is_the_prs_own_result() {
    let status = |state: &str, creator: Option<&str>| -> CommitStatus {
        serde_json::from_value(json!({
            "context": "AMD PR test", "state": state,
            "creator": creator.map(|login| json!({ "login": login })),
        }))
        .expect("a status")
    };
    let check = |statuses: &[CommitStatus], ours: Option<&str>, expect: OwnResult| {
        assert_eq!(own_result(statuses, "AMD PR test", ours), expect);
    };
    let not = |words: &str| OwnResult::NotPassed(words.to_owned());
    check(&[status("success", Some("bot"))], Some("bot"), OwnResult::Passed);
    // The newest counts.
    check(
        &[status("failure", Some("bot")), status("success", Some("bot"))],
        Some("bot"),
        not("failure"),
    );
    check(&[status("success", Some("eve"))], Some("bot"), not("posted by eve, not prgate"));
    check(&[status("success", None)], None, not("success"));
    check(&[status("success", Some("bot"))], None, not("posted by bot, not prgate"));
    check(&[], Some("bot"), not("none"));
}

#[test]
fn an_accepting_label_counts_only_from_a_maintainer_other_than_the_author() {
    let access = |allowed: bool, role: &str| Access { allowed, role: role.to_owned() };
    let maintain = access(true, "maintain");
    let triage = access(false, "triage (permission read)");
    let refusal = |adder: Option<&str>, author, access| {
        accepting_label_refusal("accept-narrowing", Ok(adder), author, access)
    };
    assert_eq!(refusal(Some("lead"), Some("author"), Some(&maintain)), None);
    // The author is refused whatever their access; GitHub's logins are one whatever their case.
    assert!(
        refusal(Some("Author"), Some("author"), Some(&maintain))
            .is_some_and(|why| why.contains("the PR's author"))
    );
    assert!(
        refusal(Some("helper"), Some("author"), Some(&triage))
            .is_some_and(|why| why.contains("triage"))
    );
    assert!(refusal(None, Some("author"), None).is_some_and(|why| why.contains("names nobody")));
    assert!(refusal(Some("lead"), None, None).is_some_and(|why| why.contains("could not be read")));
    let unread = accepting_label_refusal("accept-narrowing", Err("503".to_owned()), None, None);
    assert_eq!(
        unread.as_deref(),
        Some("the accept-narrowing label does not count: who added it could not be read: 503")
    );
}

#[test]
fn an_acceptance_counts_only_on_the_head_prgate_recorded_it_on() {
    let context = "AMD PR test / accept-narrowing";
    let status = |context: &str, state: &str, creator: &str| -> CommitStatus {
        serde_json::from_value(
            json!({ "context": context, "state": state, "creator": { "login": creator } }),
        )
        .expect("a status")
    };
    let unrecorded = |statuses: &[CommitStatus]| {
        unrecorded_acceptance("accept-narrowing", SHA, Ok(statuses), context, Some("bot"))
    };
    assert_eq!(unrecorded(&[status(context, "success", "bot")]), None);
    // No record on this head: the label was added for an earlier one (or before any push).
    let pushed_since = unrecorded(&[status("AMD PR test", "success", "bot")]);
    assert_eq!(
        pushed_since.as_deref(),
        Some(
            "the accept-narrowing label does not count: it was not given for 929f8209d40f77f4abc622a499c93a83babdbe64 (that commit has no `AMD PR test / accept-narrowing` status from prgate); a maintainer accepts the head they saw, so after a push they remove the label and add it again"
        )
    );
    // Anyone with a token that writes statuses could post one by that name: only prgate's counts.
    let forged = unrecorded(&[status(context, "success", "author")]);
    assert!(forged.is_some_and(|why| why.contains("posted by author, not prgate")));
    assert!(
        unrecorded(&[status(context, "failure", "bot")])
            .is_some_and(|why| why.contains("is failure"))
    );
    let unread =
        unrecorded_acceptance("accept-narrowing", SHA, Err("503".to_owned()), context, Some("bot"));
    assert!(unread.is_some_and(|why| why.contains("could not be read: 503")));
    // Without our own login nothing is ours.
    let unknown = unrecorded_acceptance(
        "accept-narrowing",
        SHA,
        Ok(&[status(context, "success", "bot")]),
        context,
        None,
    );
    assert!(unknown.is_some());
}

#[test]
fn an_acceptance_is_recorded_from_the_event_that_adds_its_label() {
    let labeled = |label: &str| {
        event(json!({ "action": "labeled", "label": { "name": label },
                      "pull_request": { "number": 7, "head": { "sha": SHA } } }))
    };
    let asked = acceptance_request(&labeled("Accept-Narrowing"), "accept-narrowing")
        .expect("an event GitHub sends");
    assert_eq!(
        asked,
        Ok(RunRequest {
            number: 7,
            sha: SHA.to_owned(),
            label: Some("Accept-Narrowing".to_owned())
        })
    );
    let other = acceptance_request(&labeled("run-ci"), "accept-narrowing").expect("an event");
    assert_eq!(other, Err("the label added is 'run-ci', not 'accept-narrowing'".to_owned()));
    let dispatch = event(json!({ "inputs": { "pr": "7", "sha": SHA } }));
    let refused = acceptance_request(&dispatch, "accept-narrowing").expect("an event");
    assert!(refused.is_err_and(|why| why.contains("from the pull_request_target event")));
}
