//! `prgate run` against a hostile PR (and hostile commands): a gated dataset fetched by prgate
//! with no secret or host file reaching any output, a changed recipe's diff redacted, and a recipe that is a link
//! named by its path in the tree.

use super::*;

/// The secret's value in the tests: long enough to be redacted, and found by the scan.
const SECRET_VALUE: &str = "hf_TESTSECRETvalue0123456789";

/// What the "host file" holds: a file outside every tree that a hostile PR points links at.
const HOST_CONTENT: &str = "HOST-ONLY-CONTENT-7f3a";

/// A hostile gated evaluation: it looks for the token everywhere it can (its environment, by
/// name and by value), prints its whole environment, then scores the dataset prgate fetched for
/// it (`PRGATE_DATASET`); and it tries to hand back a host file through a link.
const FAKE_GATED_EVAL: &str = r#"import json, os, sys
env = dict(os.environ)
print("environment:", json.dumps(env, sort_keys=True))
assert "HF_TOKEN" not in env, "the command got the token"
assert not any(name.startswith("PRGATE_SECRET_") for name in env), "the command got a secret"
rows = [json.loads(line) for line in open(os.path.join(env["PRGATE_DATASET"], "data/test.jsonl"))]
run = os.path.join(sys.argv[1], "sgl_eval_gated_20261129_120000")
os.makedirs(run)
json.dump({"name": "gated", "num_examples": len(rows), "n_repeats": 1, "aggregate": {"score": 1.0}},
          open(os.path.join(run, "metrics.json"), "w"))
os.symlink(sys.argv[3], os.path.join(sys.argv[1], "stolen.json"))
"#;

/// A hostile evaluation that knows the token's value (a guess, a leak elsewhere) and prints
/// it before it fails: its log's tail goes into the evidence, redacted.
const FAKE_LEAKY_EVAL: &str = r#"import sys
print("the token is " + sys.argv[2])
sys.exit(3)
"#;

fn gated_accuracy(host_file: &Path) -> String {
    format!(
        r#"
[[accuracy]]
name = "gated"
evaluator = "external"
command = "python3 test/e2e/fake_gated_eval.py {{results}} {{port}} {host}"
metrics = "stolen.json"
token = "HF_TOKEN"
hub-dataset = "org/gated-set@{HUB_REVISION}"

[[accuracy]]
name = "leaky"
evaluator = "external"
command = "python3 test/e2e/fake_leaky_eval.py {{results}} {SECRET_VALUE} {{port}}"
metrics = "metrics.json"
"#,
        host = host_file.display()
    )
}

const HUB_REVISION: &str = "0123456789abcdef0123456789abcdef01234567";

/// A hub on loopback for `org/gated-set`: its file list and one file, to a request that
/// carries `Bearer <SECRET_VALUE>`; 401 to any other. Serves until the test ends.
fn fake_hub() -> String {
    use std::io::{BufRead as _, BufReader, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let url = format!("http://{}", listener.local_addr().expect("an address"));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().expect("a clone"));
            let mut first = String::new();
            let _ = reader.read_line(&mut first);
            let mut authorized = false;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                    break;
                }
                // Header names are case-insensitive (RFC 9110): prgate's client sends them
                // lowercase.
                authorized |= line.trim().split_once(':').is_some_and(|(name, value)| {
                    name.eq_ignore_ascii_case("authorization")
                        && value.trim() == format!("Bearer {SECRET_VALUE}")
                });
            }
            let path = first.split(' ').nth(1).unwrap_or_default().to_owned();
            let body = if !authorized {
                None
            } else if path == format!("/api/datasets/org/gated-set/revision/{HUB_REVISION}") {
                Some(r#"{"siblings": [{"rfilename": "data/test.jsonl"}]}"#.to_owned())
            } else if path
                == format!("/datasets/org/gated-set/resolve/{HUB_REVISION}/data/test.jsonl")
            {
                Some("{\"q\": 1}\n{\"q\": 2}\n".to_owned())
            } else {
                None
            };
            let (status, body) = match body {
                Some(body) => ("200 OK", body),
                None => ("401 Unauthorized", String::new()),
            };
            let mut stream = stream;
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

/// Every file below `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                pending.push(path);
            } else if kind.is_file()
                && std::fs::read(&path).is_ok_and(|bytes| {
                    bytes.windows(needle.len()).any(|window| window == needle.as_bytes())
                })
            {
                found.push(path);
            }
        }
    }
    found
}

#[test]
fn a_gated_dataset_is_fetched_by_prgate_and_no_secret_or_host_file_reaches_any_output() {
    let hub = fake_hub();
    let host = tempfile::tempdir().expect("a temporary directory");
    let host_file = host.path().join("host-secret.json");
    std::fs::write(&host_file, format!("{{\"stolen\": \"{HOST_CONTENT}\"}}\n")).expect("written");
    let recipe = gated_accuracy(&host_file);
    let recipe: &'static str = Box::leak(recipe.into_boxed_str());
    let fixture = Fixture::new(&Sample {
        recipe_extra: recipe,
        gate: TWO_PAIRS,
        pr: |repo| {
            repo.write("pkg/models/alpha/layer.py", "# alpha, faster\n");
        },
        // The evaluators are base's (measuring tools run from base's tree on both sides).
        base_files: &[
            ("test/e2e/fake_gated_eval.py", FAKE_GATED_EVAL),
            ("test/e2e/fake_leaky_eval.py", FAKE_LEAKY_EVAL),
        ],
        ..Sample::default()
    });
    // The node lists the secret, but this run has no value for it.
    let args = fixture.run_args("without");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = crate::support::prgate_with_env(
        fixture.repo.path(),
        &args,
        &[("PRGATE_SECRET_HF_TOKEN", ""), ("HF_ENDPOINT", &hub)],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let record = fixture.record("without", "alpha.accuracy.pr.gated%40repeat-0");
    assert_eq!(record["outcome"]["reason"], "gated-dataset", "{record}");
    let builtin = fixture.record("without", "alpha.accuracy.pr.tiny%40repeat-0");
    assert_eq!(builtin["outcome"]["kind"], "accuracy", "{builtin}");

    // With the value, prgate fetches the dataset with it; the command gets the dataset, never
    // the token (it asserts so), and the link it hands back is not followed.
    let args = fixture.run_args("with");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = crate::support::prgate_with_env(
        fixture.repo.path(),
        &args,
        &[("PRGATE_SECRET_HF_TOKEN", SECRET_VALUE), ("HF_ENDPOINT", &hub)],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let record = fixture.record("with", "alpha.accuracy.pr.gated%40repeat-0");
    // `stolen.json` is a link to the host file: not read, so sgl-eval's run directory is.
    assert_eq!(record["outcome"]["kind"], "accuracy", "{record}");
    assert_eq!(record["outcome"]["questions"], 2, "{record}");
    let leaky = fixture.record("with", "alpha.accuracy.pr.leaky%40repeat-0");
    assert_eq!(leaky["outcome"]["reason"], "no-result", "{leaky}");
    let detail = leaky["outcome"]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("the token is [redacted HF_TOKEN]"), "{detail}");

    // The scan: no file the run with the secret wrote holds its value or the host file's
    // content. (The run without it has no value to redact: the leaky command's own guess is
    // just text there.)
    for needle in [SECRET_VALUE, HOST_CONTENT] {
        let mut found = files_containing(&fixture.results("with"), needle);
        let events = std::fs::read_to_string(fixture.events("with")).expect("the events");
        assert!(events.contains("step-finished"), "the events were scanned: {events}");
        if events.contains(needle) {
            found.push(fixture.events("with"));
        }
        assert!(found.is_empty(), "{needle} found in {found:#?}");
    }
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

/// The PR's change of the sample: a longer unit-test timeout, and a comment with the node's
/// secret value in the recipe.
fn change_the_recipe(repo: &Repo) {
    let recipe = std::fs::read_to_string(repo.path().join("test/e2e/alpha.toml")).expect("it");
    let changed = recipe.replace("unit-tests = \"2m\"", "unit-tests = \"3m\"");
    repo.write("test/e2e/alpha.toml", &format!("{changed}# the token: {SECRET_VALUE}\n"));
}

#[test]
fn a_changed_recipe_shows_its_redacted_diff_and_no_output_names_the_work_dir_or_the_secret() {
    let fixture =
        Fixture::new(&Sample { gate: TWO_PAIRS, pr: change_the_recipe, ..Sample::default() });
    let args = fixture.run_args("changed");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let secret = [("PRGATE_SECRET_HF_TOKEN", SECRET_VALUE)];
    let run = crate::support::prgate_with_env(fixture.repo.path(), &args, &secret);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The job plan carries the diff, redacted.
    let job = read_json(&fixture.results("changed").join("job.json"));
    let diff = job["targets"][0]["recipe"]["diff"]["text"].as_str().expect("a diff").to_owned();
    assert!(diff.contains("\n-unit-tests = \"2m\"\n+unit-tests = \"3m\"\n"), "{diff}");
    assert!(diff.contains("\n+# the token: [redacted HF_TOKEN]\n"), "{diff}");

    // The verdict, the comment and the full report show it.
    let gate = fixture.gate("changed");
    let plan = fixture.plan.to_str().expect("UTF-8");
    let evidence = fixture.evidence("changed");
    let verdict = crate::support::prgate_with_env(
        fixture.repo.path(),
        &[
            "gate",
            "--plan",
            plan,
            "--evidence",
            evidence.to_str().expect("UTF-8"),
            "--format",
            "json",
        ],
        &secret,
    );
    assert!(verdict.stdout.contains("recipe_changes"), "{}{}", gate.stdout, verdict.stderr);
    let verdict_path = fixture.work.path().join("verdict.json");
    std::fs::write(&verdict_path, &verdict.stdout).expect("the verdict");
    let report = crate::support::prgate_with_env(
        fixture.repo.path(),
        &[
            "report",
            "--pr",
            "7",
            "--plan",
            plan,
            "--verdict",
            verdict_path.to_str().expect("UTF-8"),
        ],
        &secret,
    );
    assert_eq!(report.code, 0, "{}", report.stderr);
    let comment = report.stdout;
    let at = comment.find("### Recipes changed against base").expect("the diff's section");
    let section = &comment[at..];
    assert!(section.contains("<code>alpha</code>: <code>test/e2e/alpha.toml</code>"), "{section}");
    assert!(section.contains("```diff\n"), "{section}");
    assert!(section.contains("\n-unit-tests = \"2m\"\n+unit-tests = \"3m\"\n"), "{section}");
    assert!(section.contains("+# the token: [redacted HF_TOKEN]"), "{section}");
    std::fs::write(fixture.work.path().join("comment.md"), &comment).expect("the comment");

    // No output of the run names the node's work directory (where the trees are exported)
    // or holds the secret's value: the evidence, the job plan, the events, the verdict, the
    // comment.
    let work_dir = fixture.work.path().join("work").display().to_string();
    let outputs = [
        fixture.evidence("changed"),
        fixture.results("changed").join("job.json"),
        fixture.events("changed"),
        verdict_path,
        fixture.work.path().join("comment.md"),
    ];
    for needle in [SECRET_VALUE, work_dir.as_str()] {
        let found: Vec<PathBuf> = outputs
            .iter()
            .flat_map(|output| {
                if output.is_dir() {
                    files_containing(output, needle)
                } else {
                    let text = std::fs::read_to_string(output).unwrap_or_default();
                    if text.contains(needle) { vec![output.clone()] } else { Vec::new() }
                }
            })
            .collect();
        assert!(found.is_empty(), "{needle} found in {found:#?}");
    }

    // An unchanged recipe has no diff and no section.
    let same = Fixture::new(&Sample { gate: TWO_PAIRS, ..Sample::default() });
    let run = same.run("same");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let job = read_json(&same.results("same").join("job.json"));
    assert!(job["targets"][0]["recipe"].get("diff").is_none(), "{job}");
}

/// The PR's change of the sample: its recipe is a link to a file of the node.
fn link_the_recipe(repo: &Repo) {
    let recipe = repo.path().join("test/e2e/alpha.toml");
    std::fs::remove_file(&recipe).expect("the recipe goes");
    std::os::unix::fs::symlink("/etc/hostname", &recipe).expect("a link");
}

#[test]
fn a_refused_recipe_is_named_by_its_path_in_the_tree_not_where_the_node_exported_it() {
    let fixture =
        Fixture::new(&Sample { gate: TWO_PAIRS, pr: link_the_recipe, ..Sample::default() });
    let run = fixture.run("linked");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let job = std::fs::read_to_string(fixture.results("linked").join("job.json")).expect("it");
    assert!(
        job.contains("\"test/e2e/alpha.toml: `test/e2e/alpha.toml` is a symbolic link"),
        "{job}"
    );
    let gate = fixture.gate("linked");
    assert!(gate.stdout.contains("test/e2e/alpha.toml"), "{}{}", gate.stdout, gate.stderr);
    let work_dir = fixture.work.path().join("work").display().to_string();
    let mut found = files_containing(&fixture.results("linked"), &work_dir);
    for output in [fixture.events("linked")] {
        if std::fs::read_to_string(&output).unwrap_or_default().contains(&work_dir) {
            found.push(output);
        }
    }
    if gate.stdout.contains(&work_dir) {
        found.push("the verdict".into());
    }
    assert!(found.is_empty(), "{work_dir} found in {found:#?}");
}
