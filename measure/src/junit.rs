//! pytest under JUnit XML: the command line that runs a selection of tests, and the reader that
//! turns the XML file pytest writes (`pytest --junitxml=FILE`) into the gate's per-test results:
//! one per test, whatever pytest-xdist (`-n`) and pytest-rerunfailures (`--reruns`) wrote.
//!
//! The XML is read by the `junit-parser` crate; this module maps its test cases onto
//! [`TestResult`]s:
//!
//! - `id` is `classname::name` exactly as pytest writes them: the classname is the test's module
//!   as a dotted path with its classes (`tests.test_moe.TestRouting`), the name carries the
//!   parameters (`test_topk[8-bf16]`). This is not pytest's node id (`tests/test_moe.py::...`),
//!   which the XML does not hold; it is as stable, so base and PR results pair by it. A test case
//!   without a classname (pytest writes one for a module that fails to import) is its name alone.
//! - One result per id, in the order ids first appear. pytest writes several `<testcase>`
//!   elements for one test: a failure and then an error in teardown are two (not next to each
//!   other under xdist), and pytest-rerunfailures writes an empty `<testcase/>`, which reads like
//!   a pass, for every attempt it reran. So the elements of one id are folded: `failed` when any
//!   has a `<failure>`, else `error` when any has an `<error>` (an error in a fixture's setup or
//!   teardown, a collection error, a crashed xdist worker), else `skipped` when any has
//!   `<skipped>` (a skip or an expected failure), else `passed`; the message is the deciding
//!   element's. A test that passed with more than one element passed only on a rerun: it is
//!   `flaky`. (Without reruns a passing test has one element: pytest writes a second only for a
//!   teardown error, which is an `<error>`.)
//! - A test case with no name is a rerun attempt that pytest-xdist could not name (the test
//!   whose worker crashed; its real result follows under its name): an empty one is dropped. One
//!   with a failure, an error or a skip is kept, with its outcome, under the id
//!   [`UNNAMED_ID`], so that nothing failing is lost.
//! - `message`: the element's `message` attribute (pytest: the exception's first lines, or the
//!   skip reason), or the first non-empty line of its text when that is empty, cut to
//!   [`MAX_MESSAGE_CHARS`] characters. Passed tests have none.
//!
//! The counts then agree with pytest's own summary line: `failed` is pytest's "failed", the
//! tests pytest lists as FAILED or ERROR are exactly the failed and errored results, `skipped`
//! is its "skipped" plus "xfailed", and there is one result per collected test
//! (`runner/tests/junit.rs` checks this against real pytest, xdist and rerunfailures).
//!
//! Running pytest (in the container, with a timeout, in its own process group) and reading its
//! XML file are the caller's work: this module builds its argv and parses the bytes it is
//! handed, nothing more.

use std::ffi::OsString;
use std::path::PathBuf;

use prgate_gate::evidence::{TestOutcome, TestResult};

/// The longest message kept for one test, in characters; a longer one is cut and ends in `…`.
pub const MAX_MESSAGE_CHARS: usize = 1000;

/// The id of a failing test case that has no name (and no classname).
pub const UNNAMED_ID: &str = "(a test case with no name)";

/// How to run pytest on a selection of tests; [`pytest_argv`] turns it into an argv.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PytestCommand {
    /// The Python interpreter (`python3`): pytest runs as `python -m pytest`, so the tests see
    /// the interpreter's installed packages.
    pub python: PathBuf,
    /// The selection: paths (`tests/unit`), files, or node ids (`tests/test_x.py::test_y[a-b]`),
    /// passed to pytest as they are, after a `--`. None may start with `-`.
    pub selection: Vec<String>,
    /// Where pytest writes its JUnit XML.
    pub junit_xml: PathBuf,
    /// More options, placed before the selection (`-x`, `-k expr`, `--timeout=600`).
    pub extra_args: Vec<String>,
}

/// Why a selection cannot be turned into a pytest command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectionError {
    /// An empty selection would make pytest collect every test it can find.
    #[error("the pytest selection is empty\nhint: name the test paths or node ids to run")]
    Empty,
    /// An entry that is empty, holds a NUL byte (which no argv can carry), or starts with `-`:
    /// pytest reads some options (`-p`, `--version`) even after `--`, so such an entry could
    /// load a plugin or skip the run.
    #[error("the pytest selection entry '{entry}' {problem}")]
    InvalidEntry { entry: String, problem: &'static str },
}

/// Why bytes are not pytest's JUnit XML.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// XML has no NUL character (XML 1.0, "Char"): a file with one is not pytest's report.
    #[error("a NUL byte at offset {offset}: not XML")]
    NulByte { offset: usize },
    /// No `<testsuite>` or `<testsuites>` element: an empty or truncated file.
    #[error("no <testsuite> or <testsuites> element")]
    NoTestSuite,
    /// The XML parser refused it; `message` is its error and that error's sources, joined by
    /// `: ` (the parser's own messages say little alone).
    #[error("{message}")]
    Xml { message: String },
}

/// The argv that runs `command`'s selection under pytest with JUnit XML:
/// `<python> -m pytest -o addopts= -p no:cacheprovider --junitxml=<file> <extra args...> --
/// <selection...>`.
///
/// `-o addopts=` empties the `addopts` of the tree's ini file (`pytest.ini`, `pyproject.toml`,
/// `setup.cfg`, `tox.ini`: PR content), so a PR cannot add `-k`, `--deselect` or `-p no:junitxml`
/// to its own side's run; prgate's own options come after it. `-p no:cacheprovider` keeps
/// pytest from writing `.pytest_cache` into the tree under test.
/// No shell is involved: every element is one argument.
pub fn pytest_argv(command: &PytestCommand) -> Result<Vec<OsString>, SelectionError> {
    if command.selection.is_empty() {
        return Err(SelectionError::Empty);
    }
    for entry in &command.selection {
        let problem = if entry.is_empty() {
            "is empty"
        } else if entry.contains('\0') {
            "holds a NUL byte"
        } else if entry.starts_with('-') {
            "starts with '-', like an option\nhint: write a path that starts with '-' as './-...'"
        } else {
            continue;
        };
        return Err(SelectionError::InvalidEntry { entry: entry.replace('\0', "\\0"), problem });
    }
    let mut junit = OsString::from("--junitxml=");
    junit.push(command.junit_xml.as_os_str());
    let mut argv: Vec<OsString> = vec![
        command.python.clone().into_os_string(),
        "-m".into(),
        "pytest".into(),
        "-o".into(),
        "addopts=".into(),
        "-p".into(),
        "no:cacheprovider".into(),
        junit,
    ];
    argv.extend(command.extra_args.iter().map(OsString::from));
    argv.push("--".into());
    argv.extend(command.selection.iter().map(OsString::from));
    Ok(argv)
}

/// Parses JUnit XML into one result per test, in the order tests first appear (see the
/// module's documentation for how a test's elements are folded); the error is why it is not
/// JUnit XML. A document without a `<testsuite>` or `<testsuites>` element (an empty or
/// truncated file) is an error: pytest writes one even when no test ran.
pub fn parse_junit(xml: &[u8]) -> Result<Vec<TestResult>, ParseError> {
    // A lenient parser must not read what follows a NUL byte as if it were XML.
    if let Some(offset) = xml.iter().position(|byte| *byte == 0) {
        return Err(ParseError::NulByte { offset });
    }
    let text = String::from_utf8_lossy(xml);
    if !text.contains("<testsuite") {
        return Err(ParseError::NoTestSuite);
    }
    let suites = junit_parser::from_reader(xml)
        .map_err(|error| ParseError::Xml { message: error_chain(&error) })?;
    let mut cases = Vec::new();
    for suite in &suites.suites {
        collect(suite, &mut cases);
    }
    Ok(fold(cases))
}

/// One `<testcase>` element: its id (`None` when it has no name) and its result.
struct Case {
    id: Option<String>,
    outcome: TestOutcome,
    message: Option<String>,
}

fn collect(suite: &junit_parser::TestSuite, cases: &mut Vec<Case>) {
    for case in &suite.cases {
        cases.push(test_case(case));
    }
    for nested in &suite.suites {
        collect(nested, cases);
    }
}

fn test_case(case: &junit_parser::TestCase) -> Case {
    let name = case.original_name.as_str();
    let id = match case.classname.as_deref() {
        Some(classname) if !classname.is_empty() => Some(format!("{classname}::{name}")),
        _ => (!name.is_empty()).then(|| name.to_owned()),
    };
    let (outcome, message) = match &case.status {
        junit_parser::TestStatus::Success => (TestOutcome::Passed, None),
        junit_parser::TestStatus::Failure(failure) => {
            (TestOutcome::Failed, message(&failure.message, &failure.text))
        }
        junit_parser::TestStatus::Error(error) => {
            (TestOutcome::Error, message(&error.message, &error.text))
        }
        junit_parser::TestStatus::Skipped(skipped) => {
            (TestOutcome::Skipped, message(&skipped.message, &skipped.text))
        }
    };
    Case { id, outcome, message }
}

/// The elements of each test folded into one result (the module's documentation).
fn fold(cases: Vec<Case>) -> Vec<TestResult> {
    let mut order: Vec<String> = Vec::new();
    let mut by_id: std::collections::HashMap<String, Vec<Case>> = std::collections::HashMap::new();
    for case in cases {
        let id = match &case.id {
            Some(id) => id.clone(),
            None if case.outcome == TestOutcome::Passed => continue,
            None => UNNAMED_ID.to_owned(),
        };
        let entry = by_id.entry(id.clone()).or_default();
        if entry.is_empty() {
            order.push(id);
        }
        entry.push(case);
    }
    order
        .into_iter()
        .filter_map(|id| {
            let elements = by_id.remove(&id)?;
            let deciding = [TestOutcome::Failed, TestOutcome::Error, TestOutcome::Skipped]
                .into_iter()
                .find_map(|outcome| elements.iter().find(|case| case.outcome == outcome));
            Some(match deciding {
                Some(case) => TestResult {
                    id,
                    outcome: case.outcome,
                    message: case.message.clone(),
                    flaky: false,
                },
                None => TestResult {
                    id,
                    outcome: TestOutcome::Passed,
                    message: None,
                    flaky: elements.len() > 1,
                },
            })
        })
        .collect()
}

/// The `message` attribute, or else the first non-empty line of the element's text, cut.
fn message(attribute: &str, text: &str) -> Option<String> {
    let chosen = if attribute.trim().is_empty() {
        text.lines().map(str::trim).find(|line| !line.is_empty())?
    } else {
        attribute.trim()
    };
    Some(truncate(chosen, MAX_MESSAGE_CHARS))
}

/// `text` cut to `max` characters, ending in `…` when cut.
fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((cut, _)) => {
            let kept = text[..cut].trim_end();
            format!("{kept}…")
        }
    }
}

/// An error and its sources, joined by `: ` (the parser's own messages say little alone).
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let causes = std::iter::successors(Some(error), |error| error.source());
    causes.map(ToString::to_string).collect::<Vec<_>>().join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncates_on_a_character_boundary() {
        let cases: [(&str, usize, &str); 4] = [
            ("short", 10, "short"),
            ("exactly", 7, "exactly"),
            ("ünïcödé", 3, "ünï…"),
            ("cut here  now", 9, "cut here…"),
        ];
        for (text, max, expect) in cases {
            assert_eq!(truncate(text, max), expect, "{text} to {max}");
        }
    }

    #[test]
    fn message_falls_back_to_the_first_line_of_the_text() {
        let cases = [
            ("boom", "ignored", Some("boom")),
            ("", "\n  first line\nsecond", Some("first line")),
            ("  ", "", None),
        ];
        for (attribute, text, expect) in cases {
            assert_eq!(message(attribute, text).as_deref(), expect, "{attribute:?} {text:?}");
        }
    }
}
