//! The workflow templates (`templates/github/`) as GitHub would read them: the triggers, each
//! job's permissions, and the concurrency group, evaluated with GitHub's expression rules
//! (`&&` and `||` give an operand, `==` compares strings case-insensitively, a missing property
//! is null) for real event payloads. `.ci/lint-workflows` runs zizmor and actionlint on them.

use serde_json::{Value, json};

const TEMPLATES: [&str; 2] = ["amd-pr-test.yml", "amd-pr-test-single-node.yml"];

fn template(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("templates/github").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|_| panic!("{}", path.display()))
}

/// The lines of the top-level key `key` (up to the next top-level key), or of a job.
fn block(text: &str, header: &str) -> String {
    let mut lines = text.lines().skip_while(|line| *line != header);
    let first = lines.next().unwrap_or_else(|| panic!("no '{header}'"));
    let indent = first.len() - first.trim_start().len();
    let mut out = vec![first.to_owned()];
    for line in lines {
        let own = line.len() - line.trim_start().len();
        if !line.trim().is_empty() && own <= indent && !line.trim_start().starts_with('#') {
            break;
        }
        out.push(line.to_owned());
    }
    out.join("\n")
}

/// The permissions a job holds: its `permissions:` block's `scope: level` lines.
fn permissions(job: &str) -> Vec<String> {
    let block = block(job, "    permissions:");
    block
        .lines()
        .skip(1)
        .map(|line| line.split('#').next().unwrap_or_default().trim().to_owned())
        .filter(|line| !line.is_empty())
        .collect()
}

#[test]
fn the_templates_listen_to_the_merge_queue() {
    for name in TEMPLATES {
        let on = block(&template(name), "on:");
        assert!(on.contains("\n  merge_group:\n    types: [checks_requested]"), "{name}: {on}");
        assert!(on.contains("pull_request_target:") && on.contains("workflow_dispatch:"), "{name}");
        assert!(on.contains("\n  check_run:\n    types: [requested_action]"), "{name}: {on}");
    }
}

#[test]
fn each_job_holds_only_what_it_uses() {
    for name in TEMPLATES {
        assert!(
            template(name).contains("\npermissions: {}"),
            "{name}: nothing at the workflow level"
        );
    }
    let two = block(&template("amd-pr-test.yml"), "jobs:");
    let jobs: Vec<(&str, Vec<&str>)> = vec![
        (
            "  start:",
            vec!["contents: read", "statuses: write", "pull-requests: write", "issues: write"],
        ),
        // `prgate ci --stage run` never calls GitHub.
        ("  run:", vec!["contents: read"]),
        // No label to remove at the end.
        ("  finish:", vec!["contents: read", "statuses: write", "pull-requests: write"]),
        // `prgate accept` posts one status and reads the PR; it checks out nothing.
        ("  accept:", vec!["statuses: write", "pull-requests: read"]),
    ];
    for (job, expected) in jobs {
        assert_eq!(permissions(&block(&two, job)), expected, "{job}");
    }
    let one = block(&template("amd-pr-test-single-node.yml"), "jobs:");
    assert_eq!(
        permissions(&block(&one, "  test:")),
        ["contents: read", "statuses: write", "pull-requests: write", "issues: write"]
    );
    assert_eq!(permissions(&block(&one, "  accept:")), ["statuses: write", "pull-requests: read"]);
}

/// A value of GitHub's expressions.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(flag) => *flag,
        Value::Number(number) => number.as_f64().is_some_and(|n| n != 0.0),
        Value::String(text) => !text.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A small evaluator of GitHub's expression syntax: enough for a concurrency group.
struct Expression<'a> {
    tokens: Vec<String>,
    at: usize,
    context: &'a Value,
}

impl Expression<'_> {
    fn evaluate(text: &str, context: &Value) -> Value {
        let mut tokens = Vec::new();
        let chars: Vec<char> = text.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c.is_whitespace() {
                i += 1;
            } else if c == '\'' {
                let end =
                    (i + 1..chars.len()).find(|&j| chars[j] == '\'').expect("a closed string");
                tokens.push(chars[i..=end].iter().collect());
                i = end + 1;
            } else if "(),".contains(c) {
                tokens.push(c.to_string());
                i += 1;
            } else if ["&&", "||", "==", "!="]
                .iter()
                .any(|op| text[char_offset(text, i)..].starts_with(op))
            {
                tokens.push(chars[i..i + 2].iter().collect());
                i += 2;
            } else {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || "._-[]".contains(chars[i]))
                {
                    i += 1;
                }
                assert!(i > start, "cannot read '{c}' in {text}");
                tokens.push(chars[start..i].iter().collect());
            }
        }
        let mut expression = Expression { tokens, at: 0, context };
        let value = expression.or();
        assert_eq!(expression.at, expression.tokens.len(), "trailing tokens in {text}");
        value
    }

    fn peek(&self) -> Option<&str> {
        self.tokens.get(self.at).map(String::as_str)
    }

    fn next(&mut self) -> String {
        self.at += 1;
        self.tokens[self.at - 1].clone()
    }

    fn or(&mut self) -> Value {
        let mut left = self.and();
        while self.peek() == Some("||") {
            self.next();
            let right = self.and();
            left = if truthy(&left) { left } else { right };
        }
        left
    }

    fn and(&mut self) -> Value {
        let mut left = self.comparison();
        while self.peek() == Some("&&") {
            self.next();
            let right = self.comparison();
            left = if truthy(&left) { right } else { left };
        }
        left
    }

    fn comparison(&mut self) -> Value {
        let left = self.primary();
        match self.peek() {
            Some(op @ ("==" | "!=")) => {
                let equal = op == "==";
                self.next();
                let right = self.primary();
                let same = text_of(&left).to_lowercase() == text_of(&right).to_lowercase();
                Value::Bool(same == equal)
            }
            _ => left,
        }
    }

    fn primary(&mut self) -> Value {
        let token = self.next();
        if token == "(" {
            let value = self.or();
            assert_eq!(self.next(), ")");
            return value;
        }
        if let Some(text) = token.strip_prefix('\'') {
            return Value::String(text.trim_end_matches('\'').to_owned());
        }
        if self.peek() == Some("(") {
            self.next();
            let mut args = vec![self.or()];
            while self.peek() == Some(",") {
                self.next();
                args.push(self.or());
            }
            assert_eq!(self.next(), ")");
            assert_eq!(token, "format", "only format() is known");
            let mut out = text_of(&args[0]);
            for (index, arg) in args.iter().enumerate().skip(1) {
                out = out.replace(&format!("{{{}}}", index - 1), &text_of(arg));
            }
            return Value::String(out);
        }
        token
            .split('.')
            // `a.b[0].c`: properties, and indexes into arrays.
            .fold(self.context.clone(), |value, key| {
                let (name, index) = match key.split_once('[') {
                    Some((name, rest)) => (name, rest.trim_end_matches(']').parse::<usize>().ok()),
                    None => (key, None),
                };
                let value = value.get(name).cloned().unwrap_or(Value::Null);
                match index {
                    Some(index) => value.get(index).cloned().unwrap_or(Value::Null),
                    None => value,
                }
            })
    }
}

fn char_offset(text: &str, chars: usize) -> usize {
    text.char_indices().nth(chars).map_or(text.len(), |(offset, _)| offset)
}

/// The concurrency group of `template` for an event, as GitHub evaluates it.
fn group(template_text: &str, event_name: &str, event: &Value, actor: &str) -> String {
    let block = block(template_text, "concurrency:");
    let start = block.find("${{").expect("an expression") + 3;
    let end = block.rfind("}}").expect("an expression");
    let inputs = event.get("inputs").cloned().unwrap_or(Value::Null);
    let context = json!({
        "github": { "event_name": event_name, "event": event, "actor": actor, "run_id": "4242" },
        "inputs": inputs,
    });
    text_of(&Expression::evaluate(&block[start..end], &context))
}

fn fixture(name: &str) -> Value {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/github").join(name);
    serde_json::from_str(&std::fs::read_to_string(path).expect("a fixture")).expect("JSON")
}

fn labeled(label: &str, sender: &str) -> Value {
    let mut event = fixture("pull_request_labeled.payload.json");
    event["pull_request"]["number"] = json!(7);
    event["label"]["name"] = json!(label);
    event["sender"]["login"] = json!(sender);
    event
}

#[test]
fn a_refused_event_never_shares_a_group_with_an_accepted_run() {
    for name in TEMPLATES {
        let text = template(name);
        let of =
            |event_name: &str, event: &Value, actor: &str| group(&text, event_name, event, actor);
        let maintainer = of("pull_request_target", &labeled("run-ci", "lead"), "lead");
        assert_eq!(maintainer, "amd-pr-test-7-lead", "{name}");
        // A triage user's label (prgate refuses it) waits in its own group: it cannot replace
        // the maintainer's pending run.
        let triage = of("pull_request_target", &labeled("run-ci", "helper"), "helper");
        assert_ne!(triage, maintainer, "{name}");
        // The same maintainer again, in any case, or by dispatch: one group, one pending run.
        assert_eq!(of("pull_request_target", &labeled("Run-CI", "lead"), "lead"), maintainer);
        let mut dispatch = fixture("workflow_dispatch_payload.json");
        dispatch["inputs"] = json!({ "pr": 7, "sha": "1111111111111111111111111111111111111111" });
        assert_eq!(of("workflow_dispatch", &dispatch, "lead"), maintainer, "{name}");
        // The check run's "Re-run" button, clicked by the same maintainer: the same group; on a
        // fork's PR (no PR in the event), a group of the SHA and the sender.
        let rerun = |pull_requests: Value| {
            json!({
                "action": "requested_action",
                "check_run": { "head_sha": "1111111111111111111111111111111111111111", "pull_requests": pull_requests },
                "requested_action": { "identifier": "prgate-rerun" },
            })
        };
        assert_eq!(of("check_run", &rerun(json!([{ "number": 7 }])), "lead"), maintainer, "{name}");
        assert_eq!(
            of("check_run", &rerun(json!([])), "lead"),
            "amd-pr-test-1111111111111111111111111111111111111111-lead",
            "{name}"
        );
        // Another label (its jobs are skipped) and a merge queue commit: groups of their own.
        let other = of("pull_request_target", &labeled("bug", "lead"), "lead");
        assert_eq!(other, "amd-pr-test-not-run-ci-4242", "{name}");
        let queue = of("merge_group", &fixture("merge_group.json"), "lead");
        assert_eq!(queue, "amd-pr-test-queue-2ffea6db159f6b6c47a24e778fb9ef40cf6b1c7d", "{name}");
    }
}

#[test]
fn the_two_node_workflow_leaves_drained_nodes_out() {
    let two = template("amd-pr-test.yml");
    let start = block(&block(&two, "jobs:"), "  start:");
    // The schedule reads the nodes file without the drained nodes.
    let filter = start.find("\"$PRGATE\" node filter --node \"$PRGATE_NODE\" --nodes \"$PRGATE_NODES\" > \"$RUNNER_TEMP/prgate-nodes.toml\"");
    let stage = start.find("--nodes \"$RUNNER_TEMP/prgate-nodes.toml\"");
    assert!(filter.is_some() && stage.is_some() && filter < stage, "{start}");
    assert!(!start.contains("--nodes \"$PRGATE_NODES\" --label"), "{start}");
    // Each node checks its own ledger before it runs anything, and records its strikes after.
    let run = block(&block(&two, "jobs:"), "  run:");
    let status =
        run.find("\"$PRGATE\" node status --node \"$PRGATE_NODE\"").expect("a health check");
    let stage = run.find("\"$PRGATE\" ci --stage run").expect("the run stage");
    let scan = run.find("\"$PRGATE\" node scan --node \"$PRGATE_NODE\"").expect("a scan");
    assert!(status < stage && stage < scan, "{run}");
    // The single node records its strikes after its run too.
    let one = template("amd-pr-test-single-node.yml");
    let ci = one.find("\"$PRGATE\" ci --event").expect("the run");
    let scan = one.find("\"$PRGATE\" node scan --node \"$PRGATE_NODE\"").expect("a scan");
    assert!(ci < scan, "{one}");
}
