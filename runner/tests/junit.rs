//! `runner::junit` against real pytest: a test file with every kind of outcome is run by
//! `python3 -m pytest` as a real process, and the JUnit XML it writes is read back.

#![expect(clippy::disallowed_methods, reason = "the tests run real pytest for its JUnit XML")]

use std::path::Path;
use std::process::Command;

use prgate_gate::evidence::{TestOutcome, TestResult};
use prgate_runner::junit::{
    JunitError, MAX_MESSAGE_CHARS, PytestCommand, SelectionError, parse_junit, pytest_argv,
    read_junit_file,
};

const TEST_FILE: &str = r#"
import pytest

def test_pass():
    assert 1 + 1 == 2

def test_fail():
    assert 1 == 2, "one is not two"

@pytest.mark.skip(reason="not on this node")
def test_skip():
    pass

@pytest.fixture
def broken():
    raise RuntimeError("fixture exploded")

def test_fixture_error(broken):
    pass

@pytest.mark.parametrize("value", ["a::b", "x y", "<tag>&\"q\"", "-k"])
def test_param(value):
    assert value != "x y"

def test_long_message():
    raise ValueError("z" * 5000)

def test_long_skip():
    pytest.skip("y" * 5000)

class TestGroup:
    def test_method(self):
        pass
"#;

/// Runs pytest on `selection` in `dir` and returns its exit code and the parsed results.
fn run_pytest(dir: &Path, selection: &[&str]) -> (Option<i32>, Vec<TestResult>) {
    let junit_xml = dir.join("out").join("junit.xml");
    let command = PytestCommand {
        python: "python3".into(),
        selection: selection.iter().map(|s| s.to_string()).collect(),
        junit_xml: junit_xml.clone(),
        extra_args: vec!["-q".into()],
    };
    let argv = pytest_argv(&command).expect("a valid selection");
    let output = Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(dir)
        .output()
        .expect("python3 runs (install pytest: python3 -m pip install pytest)");
    let results = read_junit_file(&junit_xml).unwrap_or_else(|error| {
        panic!(
            "{error:#}\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.code(), results)
}

fn check(results: &[TestResult], expect: &[(&str, TestOutcome, Option<&str>)]) {
    let got: Vec<(&str, TestOutcome, Option<&str>)> = results
        .iter()
        .map(|result| (result.id.as_str(), result.outcome, result.message.as_deref()))
        .collect();
    assert_eq!(got, expect);
}

#[test]
fn reads_every_outcome_of_a_real_pytest_run() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::create_dir(dir.path().join("tests")).expect("tests/");
    std::fs::create_dir(dir.path().join("out")).expect("out/");
    std::fs::write(dir.path().join("tests/test_sample.py"), TEST_FILE).expect("the test file");

    let (code, results) = run_pytest(dir.path(), &["tests/test_sample.py"]);
    assert_eq!(code, Some(1), "pytest exits 1 when a test failed");

    let message_of = |id: &str| {
        let result = results.iter().find(|r| r.id == id);
        result.and_then(|r| r.message.clone()).unwrap_or_else(|| panic!("a message for {id}"))
    };
    // pytest cuts a long failure message itself; a skip reason it writes whole, and it is cut
    // here.
    let long = message_of("tests.test_sample::test_long_message");
    assert!(long.starts_with("ValueError: zzz") && long.chars().count() <= MAX_MESSAGE_CHARS);
    let long_skip = message_of("tests.test_sample::test_long_skip");
    assert_eq!(long_skip, format!("{}…", "y".repeat(MAX_MESSAGE_CHARS)));

    use TestOutcome::*;
    let expect: Vec<(&str, TestOutcome, Option<&str>)> = vec![
        ("tests.test_sample::test_pass", Passed, None),
        (
            "tests.test_sample::test_fail",
            Failed,
            Some("AssertionError: one is not two\nassert 1 == 2"),
        ),
        ("tests.test_sample::test_skip", Skipped, Some("not on this node")),
        (
            "tests.test_sample::test_fixture_error",
            Error,
            Some("failed on setup with \"RuntimeError: fixture exploded\""),
        ),
        ("tests.test_sample::test_param[a::b]", Passed, None),
        (
            "tests.test_sample::test_param[x y]",
            Failed,
            Some("AssertionError: assert 'x y' != 'x y'"),
        ),
        ("tests.test_sample::test_param[<tag>&\"q\"]", Passed, None),
        ("tests.test_sample::test_param[-k]", Passed, None),
        ("tests.test_sample::test_long_message", Failed, Some(long.as_str())),
        ("tests.test_sample::test_long_skip", Skipped, Some(long_skip.as_str())),
        ("tests.test_sample.TestGroup::test_method", Passed, None),
    ];
    check(&results, &expect);
}

#[test]
fn a_selection_of_node_ids_runs_only_those_tests() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::create_dir(dir.path().join("out")).expect("out/");
    std::fs::write(dir.path().join("test_sample.py"), TEST_FILE).expect("the test file");

    let (code, results) =
        run_pytest(dir.path(), &["test_sample.py::test_pass", "test_sample.py::test_param[a::b]"]);
    assert_eq!(code, Some(0));
    use TestOutcome::*;
    check(
        &results,
        &[
            ("test_sample::test_pass", Passed, None),
            ("test_sample::test_param[a::b]", Passed, None),
        ],
    );
}

#[test]
fn a_module_that_cannot_be_imported_is_an_error_named_by_its_module() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::create_dir(dir.path().join("out")).expect("out/");
    std::fs::write(dir.path().join("test_broken.py"), "import no_such_module_here\n")
        .expect("the test file");

    let (code, results) = run_pytest(dir.path(), &["test_broken.py"]);
    assert_eq!(code, Some(2), "pytest exits 2 on a collection error");
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].id, "test_broken");
    assert_eq!(results[0].outcome, TestOutcome::Error);
    assert_eq!(results[0].message.as_deref(), Some("collection failure"));
}

#[test]
fn builds_the_argv_without_a_shell() {
    let command = PytestCommand {
        python: "/usr/bin/python3".into(),
        selection: vec!["tests/unit".into(), "tests/test_x.py::test_y[a b]".into()],
        junit_xml: "/results/unit.xml".into(),
        extra_args: vec!["-x".into()],
    };
    let argv = pytest_argv(&command).expect("a valid selection");
    let argv: Vec<&str> = argv.iter().map(|arg| arg.to_str().expect("UTF-8")).collect();
    assert_eq!(
        argv,
        [
            "/usr/bin/python3",
            "-m",
            "pytest",
            "-o",
            "addopts=",
            "-p",
            "no:cacheprovider",
            "--junitxml=/results/unit.xml",
            "-x",
            "--",
            "tests/unit",
            "tests/test_x.py::test_y[a b]",
        ]
    );

    let empty = PytestCommand { selection: vec![], ..command.clone() };
    assert_eq!(pytest_argv(&empty), Err(SelectionError::Empty));
    let invalid = [
        ("", "is empty"),
        ("tests/a\0b", "holds a NUL byte"),
        (
            "-pmalicious",
            "starts with '-', like an option\nhint: write a path that starts with '-' as './-...'",
        ),
        (
            "--version",
            "starts with '-', like an option\nhint: write a path that starts with '-' as './-...'",
        ),
    ];
    for (entry, problem) in invalid {
        let selection = vec!["tests".to_owned(), entry.to_owned()];
        let command = PytestCommand { selection, ..command.clone() };
        let error = pytest_argv(&command).expect_err(entry);
        assert!(matches!(&error, SelectionError::InvalidEntry { problem: p, .. } if *p == problem));
        assert_eq!(
            error.to_string(),
            format!("the pytest selection entry '{}' {problem}", entry.replace('\0', "\\0"))
        );
    }
    let blank = PytestCommand { selection: vec!["tests".into(), String::new()], ..command };
    assert_eq!(
        pytest_argv(&blank),
        Err(SelectionError::InvalidEntry { entry: String::new(), problem: "is empty" })
    );
}

#[test]
fn errors_name_the_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let missing = dir.path().join("missing.xml");
    let error = read_junit_file(&missing).expect_err("no file");
    assert!(matches!(error, JunitError::Read { .. }));
    assert_eq!(
        error.to_string(),
        format!("error reading the JUnit XML file {}", missing.display())
    );

    let cases = [
        ("empty.xml", ""),
        ("cut.xml", "<?xml version=\"1.0\"?><testsuites><testsuite name=\"pytest\"><testcase "),
        ("not-xml.xml", "pytest crashed before it wrote anything\n"),
    ];
    for (name, text) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("the file");
        let error = read_junit_file(&path).expect_err(name);
        let message = error.to_string();
        assert!(
            message.starts_with(&format!("error parsing the JUnit XML file {}: ", path.display())),
            "{message}"
        );
    }
    assert_eq!(parse_junit(b"<testsuites/>"), Ok(vec![]));
    // A NUL byte, first or anywhere: not XML, whatever follows it.
    let valid = b"<testsuites><testsuite name=\"pytest\"><testcase classname=\"t\" name=\"a\"/></testsuite></testsuites>";
    assert_eq!(
        parse_junit(&[b"\0".as_slice(), valid].concat()).map_err(|error| error.to_string()),
        Err("a NUL byte at offset 0: not XML".to_owned())
    );
    let mut inside = valid.to_vec();
    inside.insert(12, 0);
    assert_eq!(
        parse_junit(&inside).map_err(|error| error.to_string()),
        Err("a NUL byte at offset 12: not XML".to_owned())
    );
    assert_eq!(parse_junit(valid).map(|results| results.len()), Ok(1));
}

/// The real suite of `measure/tests/fixtures/realworld/pytest-junit/suite` (see the README
/// there: the parser's real inputs are `prgate-measure`'s).
fn realworld(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../measure/tests/fixtures/realworld/pytest-junit")
        .join(path)
}

/// Passed, failed, errors, skipped, and the ids of the flaky results.
type Tally<'a> = (usize, usize, usize, usize, Vec<&'a str>);

/// Per outcome, how many results; and the ids of the flaky ones.
fn tally(results: &[TestResult]) -> Tally<'_> {
    let count = |outcome| results.iter().filter(|result| result.outcome == outcome).count();
    let flaky = results.iter().filter(|result| result.flaky).map(|r| r.id.as_str()).collect();
    (
        count(TestOutcome::Passed),
        count(TestOutcome::Failed),
        count(TestOutcome::Error),
        count(TestOutcome::Skipped),
        flaky,
    )
}

fn assert_one_result_per_id(results: &[TestResult]) {
    let ids: std::collections::BTreeSet<&str> = results.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids.len(), results.len(), "an id is listed twice: {results:#?}");
    assert!(!ids.contains(""), "a result without an id: {results:#?}");
}

/// The JUnit files real pytest wrote, with and without xdist and rerunfailures: one result per
/// test (30), a failure plus a teardown error once (as the failure), a rerun that passed once
/// and flaky. pytest printed "8 failed, 16 passed, 2 skipped, 2 xfailed, 1 xpassed, 3 errors"
/// for the first two and "7 failed, 18 passed, 2 skipped, 2 xfailed, 1 xpassed, 3 errors, 11
/// rerun" for the others: its failed count is ours, its skipped and xfailed are our skipped,
/// and its errors count the teardown error of a failed test that we fold into the failure.
#[test]
fn the_real_files_give_one_result_per_test() {
    let flaky_test = "tests.test_odd::test_flaky_first_time";
    let cases: [(&str, Tally<'_>); 4] = [
        ("plain.xml", (16, 8, 2, 4, vec![])),
        ("xdist.xml", (16, 8, 2, 4, vec![])),
        ("reruns.xml", (17, 7, 2, 4, vec![flaky_test])),
        ("both.xml", (17, 7, 2, 4, vec![flaky_test])),
    ];
    for (file, expect) in cases {
        let results = read_junit_file(&realworld(file)).expect(file);
        assert_eq!(results.len(), 30, "{file}");
        assert_one_result_per_id(&results);
        assert_eq!(tally(&results), expect, "{file}");
        let both = results
            .iter()
            .find(|r| r.id == "tests.test_odd::test_fail_then_teardown_error")
            .expect(file);
        assert_eq!(both.outcome, TestOutcome::Failed, "{file}");
        assert_eq!(both.message.as_deref(), Some("AssertionError: call failed\nassert False"));
        let teardown = results
            .iter()
            .find(|r| r.id == "tests.test_odd::test_pass_then_teardown_error")
            .expect(file);
        assert_eq!(teardown.outcome, TestOutcome::Error, "{file}");
    }
}

/// What pytest itself said of a run: its summary line's counts, and the node ids its short
/// summary (`-rfER`) lists as FAILED or ERROR, and as RERUN.
struct PytestSaid {
    counts: std::collections::BTreeMap<String, usize>,
    failing: std::collections::BTreeSet<String>,
    rerun: std::collections::BTreeSet<String>,
}

fn pytest_said(stdout: &str) -> PytestSaid {
    let summary = stdout
        .lines()
        .rev()
        .find(|line| line.starts_with('=') && line.contains(" in "))
        .unwrap_or_else(|| panic!("no summary line in\n{stdout}"));
    let words: Vec<&str> = summary
        .trim_matches(|c: char| c == '=' || c == ' ')
        .split(" in ")
        .next()
        .unwrap_or_default()
        .split(", ")
        .collect();
    let counts = words
        .iter()
        .filter_map(|pair| {
            let (count, word) = pair.split_once(' ')?;
            Some((word.to_owned(), count.parse().ok()?))
        })
        .collect();
    // pytest-rerunfailures prints its own section, "rerun test summary info", before pytest's.
    let short = stdout.split("rerun test summary info").last().unwrap_or_default();
    let node_ids = |prefix: &str| {
        short
            .lines()
            .filter_map(|line| line.strip_prefix(prefix))
            .map(|rest| junit_id(rest.split(" - ").next().unwrap_or(rest).trim()))
            .collect()
    };
    let mut failing: std::collections::BTreeSet<String> = node_ids("FAILED ");
    failing.extend(node_ids("ERROR "));
    PytestSaid { counts, failing, rerun: node_ids("RERUN ") }
}

/// A pytest node id as JUnit names the test: `tests/test_odd.py::TestGroup::test_m[None]` is
/// `tests.test_odd.TestGroup::test_m[None]`.
fn junit_id(node_id: &str) -> String {
    let (head, parameters) = match node_id.find('[') {
        Some(at) => node_id.split_at(at),
        None => (node_id, ""),
    };
    let parts: Vec<&str> = head.split("::").collect();
    let (name, scope) = parts.split_last().expect("a node id");
    let mut classname = scope[0].trim_end_matches(".py").replace('/', ".");
    for class in &scope[1..] {
        classname.push('.');
        classname.push_str(class);
    }
    format!("{classname}::{name}{parameters}")
}

/// Real pytest, with pytest-xdist and pytest-rerunfailures (`.ci/test` installs them), on the
/// real suite: every run's results agree with what pytest printed. One result per collected
/// test; the failed and errored results are exactly the tests pytest lists as FAILED or ERROR;
/// skipped is its skipped plus xfailed; a test it reran that did not fail in the end is the one
/// flaky result. A crashed xdist worker's rerun writes a nameless test case: dropped. (Whether
/// rerunfailures reruns the crashed test depends on timing; both ways are checked.)
#[test]
fn real_pytest_with_xdist_and_reruns_counts_as_pytest_does() {
    let runs: [(&str, &[&str]); 5] = [
        ("tests/test_odd.py", &[]),
        ("tests/test_odd.py", &["-n", "2"]),
        ("tests/test_odd.py", &["--reruns", "1"]),
        ("tests/test_odd.py", &["-n", "2", "--reruns", "1"]),
        ("tests/test_k1.py", &["-n", "2", "--reruns", "1"]),
    ];
    for (file, flags) in runs {
        let dir = tempfile::tempdir().expect("a temporary directory");
        std::fs::create_dir_all(dir.path().join("tests")).expect("tests/");
        for name in ["conftest.py", "test_odd.py", "test_k1.py"] {
            let source = realworld(&format!("suite/tests/{name}"));
            std::fs::copy(&source, dir.path().join("tests").join(name)).expect("a test file");
        }
        let collected = Command::new("python3")
            .args(["-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q", file])
            .current_dir(dir.path())
            .output()
            .expect("python3 runs");
        let collected = String::from_utf8_lossy(&collected.stdout);
        let collected: usize = collected
            .lines()
            .find_map(|line| {
                line.split_once(" tests collected").or(line.split_once(" test collected"))
            })
            .and_then(|(count, _)| count.trim().parse().ok())
            .unwrap_or_else(|| panic!("no count in\n{collected}"));

        let xml = dir.path().join("junit.xml");
        let command = PytestCommand {
            python: "python3".into(),
            selection: vec![file.to_owned()],
            junit_xml: xml.clone(),
            extra_args: flags
                .iter()
                .map(|flag| (*flag).to_owned())
                .chain(["-rfER".to_owned()])
                .collect(),
        };
        let argv = pytest_argv(&command).expect("a selection");
        let output =
            Command::new(&argv[0]).args(&argv[1..]).current_dir(dir.path()).output().expect(
                "python3 runs (.ci/test installs pytest, pytest-xdist, pytest-rerunfailures)",
            );
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !stderr.contains("unrecognized arguments"),
            "install pytest-xdist and pytest-rerunfailures: {stderr}"
        );
        let said = pytest_said(&stdout);
        let results = read_junit_file(&xml).expect("pytest wrote its JUnit XML");
        let what = format!("{file} {flags:?}:\n{stdout}");

        assert_eq!(results.len(), collected, "one result per collected test: {what}");
        assert_one_result_per_id(&results);
        let failing: std::collections::BTreeSet<String> = results
            .iter()
            .filter(|r| matches!(r.outcome, TestOutcome::Failed | TestOutcome::Error))
            .map(|r| r.id.clone())
            .collect();
        assert_eq!(failing, said.failing, "{what}");
        let (passed, failed, _errors, skipped, flaky) = tally(&results);
        let count = |word: &str| said.counts.get(word).copied().unwrap_or(0);
        assert_eq!(skipped, count("skipped") + count("xfailed"), "{what}");
        assert_eq!(passed, collected - failing.len() - skipped, "{what}");
        let expected_flaky: Vec<String> =
            said.rerun.iter().filter(|id| !said.failing.contains(*id)).cloned().collect();
        assert_eq!(flaky, expected_flaky, "{what}");
        if file.ends_with("test_odd.py") {
            assert_eq!(failed, count("failed"), "{what}");
            assert_eq!(collected, 30);
            let reran = flags.contains(&"--reruns");
            assert_eq!(count("rerun") > 0, reran, "{what}");
            assert_eq!(flaky.len(), usize::from(reran), "{what}");
        } else {
            assert_eq!(failing.len(), 1, "the crashed test: {what}");
            // rerunfailures reruns a crashed worker's test only when its crash report arrives in
            // time; on a loaded machine it may not, and then there is no rerun to write the
            // nameless case. When pytest says it reran, the case is there (and dropped above).
            let nameless = std::fs::read_to_string(&xml)
                .expect("the XML")
                .contains("<testcase time=\"0.000\" />");
            assert_eq!(nameless, count("rerun") > 0, "a nameless test case iff a rerun: {what}");
        }
    }
}
