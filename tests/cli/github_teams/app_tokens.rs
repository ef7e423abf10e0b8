//! Publishing with an App installation token: the comment found again by GraphQL's viewer (or
//! no login guessed), comments read through `Link` pagination and never outside the API, and
//! a check run posted beside the commit status.

use super::*;

/// A plan and a (pending) verdict of a real repository, for `prgate publish`.
struct Published {
    _repo: crate::support::Repo,
    dir: tempfile::TempDir,
    head: String,
}

fn published() -> Published {
    let repo = crate::support::Repo::standard();
    repo.branch("pr", "main").write("pkg/models/alpha/layer.py", "# faster\n");
    let head = repo.commit("pr");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let plan = crate::support::prgate(
        repo.path(),
        &["plan", "--base", "main", "--head", "pr", "--format", "json"],
    );
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    std::fs::write(dir.path().join("plan.json"), plan.stdout).expect("write the plan");
    std::fs::create_dir(dir.path().join("evidence")).expect("an evidence folder");
    let plan_path = dir.path().join("plan.json");
    let evidence = dir.path().join("evidence");
    let path = |path: &Path| path.to_str().expect("UTF-8").to_owned();
    let verdict = crate::support::prgate(
        repo.path(),
        &["gate", "--plan", &path(&plan_path), "--evidence", &path(&evidence), "--format", "json"],
    );
    // No evidence: not a pass (pending while a run goes; `error` once it is judged final).
    assert!(matches!(verdict.code, 1 | 2), "not a pass: {}", verdict.stderr);
    let parsed: Value = serde_json::from_str(&verdict.stdout).expect("a verdict");
    assert_ne!(parsed["result"], "pass", "{parsed}");
    std::fs::write(dir.path().join("verdict.json"), verdict.stdout).expect("write the verdict");
    Published { _repo: repo, dir, head }
}

fn publish_args(published: &Published, extra: &[&str]) -> Vec<String> {
    let dir = published.dir.path();
    let mut args: Vec<String> = [
        "publish",
        "--repository",
        "amd/mono",
        "--pr",
        "7",
        "--sha",
        &published.head,
        "--plan",
        dir.join("plan.json").to_str().expect("UTF-8"),
        "--verdict",
        dir.join("verdict.json").to_str().expect("UTF-8"),
    ]
    .iter()
    .map(|arg| (*arg).to_owned())
    .collect();
    args.extend(extra.iter().map(|arg| (*arg).to_owned()));
    args
}

#[tokio::test(flavor = "multi_thread")]
async fn an_app_token_finds_its_own_comment_by_graphqls_viewer() {
    let published = published();
    let (server, hub) = hub(SHA, BASE_SHA, "run-ci").await;
    hub.with(|state| {
        state.app = Some("my-app".to_owned());
        state.comments = vec![
            // Someone quoting the marker, and the comment the App wrote last time.
            Comment { id: 1, login: "mallory".to_owned(), body: format!("{MARKER}\nfake") },
            Comment { id: 2, login: "my-app[bot]".to_owned(), body: format!("{MARKER}\nold") },
        ];
    });
    // In Actions, where prgate used to take any App for github-actions[bot].
    let actions = [("GITHUB_ACTIONS", "true"), ("GITHUB_STEP_SUMMARY", "/dev/null")];
    for _ in 0..2 {
        let run = prgate(&server, publish_args(&published, &[]), &actions).await;
        assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    }
    hub.with(|state| {
        assert_eq!(state.comments.len(), 2, "no new comment: {:?}", state.comments);
        assert!(state.comments[1].body.contains("AMD PR test"), "{}", state.comments[1].body);
        assert!(state.comments[0].body.ends_with("fake"), "someone else's is left alone");
    });
    assert_eq!(hub.requested("POST", "/repos/amd/mono/issues/7/comments"), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_app_token_that_cannot_name_itself_guesses_no_login() {
    let published = published();
    let (server, hub) = hub(SHA, BASE_SHA, "run-ci").await;
    hub.with(|state| {
        state.app = Some("my-app".to_owned());
        state.graphql = false;
    });
    let actions = [("GITHUB_ACTIONS", "true"), ("GITHUB_STEP_SUMMARY", "/dev/null")];
    let run = prgate(&server, publish_args(&published, &[]), &actions).await;
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("--bot-login"), "{}", run.stderr);
    assert_eq!(hub.requested("POST", "/repos/amd/mono/issues/7/comments"), 0);
    // The status went first: the required check is never left stale by a comment.
    hub.with(|state| assert!(state.statuses.contains_key(&published.head)));
    // Named, it works.
    let run =
        prgate(&server, publish_args(&published, &["--bot-login", "my-app[bot]"]), &actions).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    hub.with(|state| assert_eq!(state.comments.len(), 1));
}

#[tokio::test(flavor = "multi_thread")]
async fn comments_are_read_through_the_link_header() {
    let published = published();
    let (server, hub) = hub(SHA, BASE_SHA, "run-ci").await;
    hub.with(|state| {
        state.page_size = 2;
        state.comments = (1..=4)
            .map(|id| Comment {
                id,
                login: "reviewer".to_owned(),
                body: format!("looks good {id}"),
            })
            .chain([Comment {
                id: 10,
                login: "prgate-bot".to_owned(),
                body: format!("{MARKER}\nold"),
            }])
            .collect();
    });
    let run = prgate(&server, publish_args(&published, &[]), &[]).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    hub.with(|state| {
        assert_eq!(state.comments.len(), 5, "ours on page 3 was found");
        assert!(state.comments[4].body.contains("AMD PR test"));
    });
    // Pages 2 and 3 were read where GitHub's Link pointed, not at a `page=` prgate made up.
    assert_eq!(hub.requested("GET", "/repositories/1000/issues/7/comments"), 2);
    assert_eq!(hub.requested("POST", "/repos/amd/mono/issues/7/comments"), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_link_header_outside_the_api_is_not_followed() {
    let published = published();
    let (server, hub) = hub(SHA, BASE_SHA, "run-ci").await;
    hub.with(|state| {
        state.page_size = 1;
        state.foreign_link = Some("https://collector.invalid/steal?page=2".to_owned());
        state.comments = vec![
            Comment { id: 1, login: "reviewer".to_owned(), body: "first".to_owned() },
            Comment { id: 2, login: "prgate-bot".to_owned(), body: format!("{MARKER}\nold") },
        ];
    });
    let run = prgate(&server, publish_args(&published, &[]), &[]).await;
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("points outside the API"), "{}", run.stderr);
    assert_eq!(hub.requested("POST", "/repos/amd/mono/issues/7/comments"), 0, "no second comment");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_app_token_posts_a_check_run_beside_the_status() {
    let published = published();
    let (server, hub) = hub(SHA, BASE_SHA, "run-ci").await;
    hub.with(|state| state.app = Some("my-app".to_owned()));
    let run = prgate(&server, publish_args(&published, &["--check-run", "on"]), &[]).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    hub.with(|state| {
        // The status is still posted: it stays the required check.
        assert_eq!(state.statuses[&published.head][0]["context"], "AMD PR test");
        assert_eq!(state.check_runs.len(), 1);
        let body = &state.check_runs.values().next().expect("a check run")[0];
        assert_eq!(body["name"], "AMD PR test details");
        assert_eq!(body["head_sha"], published.head.as_str());
        // The verdict of a run with no evidence is `error`: a failure, never a pass, with
        // the button that runs the test again.
        assert_eq!(body["status"], "completed", "{body}");
        assert_eq!(body["conclusion"], "failure", "{body}");
        assert_eq!(body["actions"][0]["identifier"], "prgate-rerun", "{body}");
        let summary = body["output"]["summary"].as_str().expect("a summary");
        assert!(!summary.contains(MARKER) && summary.contains("AMD PR test"), "{summary}");
        let annotations = body["output"]["annotations"].as_array().expect("annotations");
        assert!(!annotations.is_empty(), "{body}");
        for annotation in annotations {
            assert_eq!(annotation["path"], "pkg/models/alpha/layer.py", "{annotation}");
            assert_eq!(annotation["start_line"], 1);
            assert_eq!(annotation["annotation_level"], "failure", "{annotation}");
            let message = annotation["message"].as_str().expect("a message");
            assert!(message.starts_with("alpha: ") && message.contains("\nrule: "), "{message}");
        }
    });
}
