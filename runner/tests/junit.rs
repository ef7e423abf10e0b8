//! `runner::junit` against real pytest: a test file with every kind of outcome is run by
//! `python3 -m pytest` as a real process, and the JUnit XML it writes is read back.

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
}
