//! What starts a run and what refuses one: a label in another case, custom roles by their
//! permission, a closed or merged PR, a bot, GitHub Enterprise's abuse-detection 403, an
//! uppercase dispatch SHA, failures after the label is gone, and a moved head.

use super::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_label_in_other_case_starts_a_run_as_the_workflows_if_does() {
    let (server, hub) = hub(SHA, BASE_SHA, "Run-CI").await;
    let (run, dir) = trigger(&server, &labeled("lead", "Run-CI", SHA)).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(pinned(&dir)["sha"], SHA);
    // The label is removed as it was added.
    hub.with(|state| assert!(state.labels.is_empty(), "{:?}", state.labels));
}

#[tokio::test(flavor = "multi_thread")]
async fn github_permission_decides_custom_roles_included() {
    // (permission, role_name, starts): GitHub's `permission` is the legacy level, `role_name`
    // the role (a custom role's own name).
    let table = [
        ("write", "ci-operators", true),
        ("write", "maintain", true),
        ("admin", "release-admins", true),
        ("read", "triage", false),
        ("read", "read", false),
    ];
    for (level, role, starts) in table {
        let (server, hub) = hub(SHA, BASE_SHA, "run-ci").await;
        hub.with(|state| {
            state.permissions.insert("lead".to_owned(), permission(level, role));
        });
        let (run, dir) = trigger(&server, &labeled("lead", "run-ci", SHA)).await;
        assert_eq!(run.code, if starts { 0 } else { 1 }, "{role}: {}{}", run.stdout, run.stderr);
        assert_eq!(dir.path().join("out/trigger.json").exists(), starts, "{role}");
        if !starts {
            let shown = if role == level {
                role.to_owned()
            } else {
                format!("{role} (permission {level})")
            };
            assert!(run.stderr.contains(&format!("lead has the {shown} role")), "{}", run.stderr);
            // The label is gone: the labeller learns why on the PR.
            hub.with(|state| {
                assert_eq!(state.comments.len(), 1, "{role}: {:?}", state.comments);
                let body = &state.comments[0].body;
                assert!(body.starts_with(REFUSAL_MARKER), "{body}");
                // Markdown-escaped, as all text from a run is: `\(permission read\)`.
                let text = body.replace('\\', "");
                assert!(text.contains(&format!("lead has the {shown} role")), "{body}");
            });
        } else {
            hub.with(|state| assert!(state.comments.is_empty(), "{role}: {:?}", state.comments));
        }
        hub.with(|state| assert!(state.labels.is_empty(), "{role}: the label stays"));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_closed_or_merged_pr_is_refused_with_a_comment() {
    for (state_name, merged, word) in [("closed", false, "closed"), ("closed", true, "merged")] {
        let (server, hub) = hub(SHA, BASE_SHA, "run-ci").await;
        hub.with(|state| state.pr = pull_request(SHA, BASE_SHA, state_name, merged));
        let (run, dir) = trigger(&server, &labeled("lead", "run-ci", SHA)).await;
        assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
        assert!(!dir.path().join("out/trigger.json").exists());
        hub.with(|state| {
            assert_eq!(state.comments.len(), 1, "{:?}", state.comments);
            let comment = &state.comments[0];
            assert!(comment.body.starts_with(REFUSAL_MARKER), "{}", comment.body);
            assert!(comment.body.contains(&format!("is {word}")), "{}", comment.body);
        });
        // Labelled again: the same comment is edited, not a second one.
        hub.with(|state| state.labels.push("run-ci".to_owned()));
        let (run, _dir) = trigger(&server, &labeled("lead", "run-ci", SHA)).await;
        assert_eq!(run.code, 1);
        hub.with(|state| assert_eq!(state.comments.len(), 1));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bot_is_refused_by_its_type_and_a_login_is_percent_encoded() {
    let (server, hub) = hub(SHA, BASE_SHA, "run-ci").await;
    let mut event = labeled("renovate[bot]", "run-ci", SHA);
    event["sender"]["type"] = json!("Bot");
    let (run, _dir) = trigger(&server, &event).await;
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("renovate[bot] is a bot"), "{}", run.stderr);
    assert_eq!(hub.requested("GET", "/repos/amd/mono/collaborators"), 0, "no permission asked");

    // A sender GitHub does not know as a collaborator (a bot in an old payload, without its
    // type): 404 is a refusal, not an error, and the login went encoded.
    hub.with(|state| state.labels.push("run-ci".to_owned()));
    let mut event = labeled("helper[bot]", "run-ci", SHA);
    event["sender"]["type"] = Value::Null;
    let (run, _dir) = trigger(&server, &event).await;
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("helper[bot] has the no collaborator role"), "{}", run.stderr);
    assert_eq!(hub.requested("GET", "/repos/amd/mono/collaborators/helper%5Bbot%5D/permission"), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_abuse_detection_403_of_github_enterprise_is_retried() {
    let (server, hub) = hub(SHA, BASE_SHA, "run-ci").await;
    hub.with(|state| state.abuse = 1);
    let (run, dir) = trigger(&server, &labeled("lead", "run-ci", SHA)).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(dir.path().join("out/trigger.json").exists());
    assert_eq!(hub.requested("GET", "/repos/amd/mono/collaborators/lead/permission"), 2);
    assert!(run.stderr.contains("GitHub answered 403 Forbidden"), "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_uppercase_dispatch_sha_is_the_same_commit() {
    let (server, hub) = hub(SHA, BASE_SHA, "run-ci").await;
    let head = "abcdef0123456789abcdef0123456789abcdef01";
    hub.with(|state| state.pr = pull_request(head, BASE_SHA, "open", false));
    // The real workflow_dispatch payload, with prgate's inputs.
    let mut event = fixture("workflow_dispatch_payload.json");
    event["inputs"] = json!({ "pr": "7", "sha": head.to_uppercase() });
    event["sender"]["login"] = json!("lead");
    let (run, dir) = trigger(&server, &event).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(pinned(&dir)["sha"], head);
}

#[tokio::test(flavor = "multi_thread")]
async fn failures_after_the_label_is_gone_leave_a_status_and_a_comment() {
    let (server, hub) = hub(SHA, BASE_SHA, "run-ci").await;
    hub.with(|state| state.pr_failures = u32::MAX);
    let (run, _dir) = trigger(&server, &labeled("lead", "run-ci", SHA)).await;
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    hub.with(|state| {
        assert!(state.labels.is_empty(), "the label was removed");
        let status = &state.statuses.get(SHA).expect("a status on the expected SHA")[0];
        assert_eq!(status["state"], "error", "{status}");
        assert_eq!(status["context"], "AMD PR test");
        assert!(status["description"].as_str().expect("text").contains("502"), "{status}");
        assert_eq!(state.comments.len(), 1);
        let body = &state.comments[0].body;
        assert!(body.starts_with(REFUSAL_MARKER), "{body}");
        assert!(
            body.contains("could not start the run") && body.contains("add it again"),
            "{body}"
        );
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_moved_head_is_said_on_the_pr() {
    let (server, hub) = hub("2222222222222222222222222222222222222222", BASE_SHA, "run-ci").await;
    let (run, _dir) = trigger(&server, &labeled("lead", "run-ci", SHA)).await;
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    hub.with(|state| {
        assert_eq!(state.comments.len(), 1);
        assert!(state.comments[0].body.contains("moved from"), "{}", state.comments[0].body);
    });
}
