//! ARCHITECTURE.md's crate invariants, checked on the tree: the crate graph (who may depend on
//! whom), which crates may do I/O, which may talk to GitHub, and that the binary only wires (no
//! format or git of its own, short files). Read from the manifests and the sources as text, so
//! a change that breaks an invariant fails here by name.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `[dependencies]` of the crate in `dir` (not its dev-dependencies).
fn dependencies(dir: &str) -> BTreeSet<String> {
    let path = root().join(dir).join("Cargo.toml");
    let text = std::fs::read_to_string(&path).expect("the crate's manifest");
    let manifest: toml::Table = text.parse().expect("TOML");
    manifest
        .get("dependencies")
        .and_then(toml::Value::as_table)
        .map(|table| table.keys().cloned().collect())
        .unwrap_or_default()
}

/// The `.rs` files under `dir`, tests left out (`tests.rs` and `tests/` modules).
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("a source folder") {
            let path = entry.expect("an entry").path();
            let name = path.file_name().and_then(|name| name.to_str()).unwrap_or_default();
            if path.is_dir() {
                if name != "tests" {
                    folders.push(path);
                }
            } else if name.ends_with(".rs") && name != "tests.rs" {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// `(file, needle)` for each source file of `dir` that names one of `needles` outside its
/// `#[cfg(test)]` module (the text from a line `#[cfg(test)]` on is a test's).
fn mentions(dir: &str, needles: &[&str]) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for path in sources(&root().join(dir)) {
        let text = std::fs::read_to_string(&path).expect("a source file");
        let code = text.split("\n#[cfg(test)]").next().unwrap_or_default();
        for needle in needles {
            if code.contains(needle) {
                let shown = path.strip_prefix(root()).unwrap_or(&path).display().to_string();
                found.push((shown, (*needle).to_owned()));
            }
        }
    }
    found
}

/// The workspace's library crates but `github` (whose place the GitHub tests check), by folder.
const LIBRARIES: [&str; 10] = [
    "scope",
    "gate",
    "report",
    "runner",
    "sim-server",
    "recipe",
    "sandbox",
    "measure",
    "schedule",
    "sample",
];

/// What names I/O in a source: files and folders, sockets, processes, the environment.
const IO: [&str; 13] = [
    "std::fs",
    "std::net",
    "std::process",
    "std::io",
    "std::env",
    "File::open",
    "File::create",
    "read_to_string",
    "read_dir",
    "Command::new",
    "TcpStream",
    "UnixStream",
    "rustix",
];

/// `(file, needle)` for each source file of `dir` that names I/O ([`IO`] and `more`), but for
/// the needles in `allowed`.
fn io_in(dir: &str, more: &[&str], allowed: &[&str]) -> Vec<(String, String)> {
    let needles: Vec<&str> =
        IO.iter().chain(more).copied().filter(|needle| !allowed.contains(needle)).collect();
    mentions(dir, &needles)
}

#[test]
fn the_crate_graph_points_one_way() {
    let ours = |dir: &str| -> Vec<String> {
        dependencies(dir).into_iter().filter(|name| name.starts_with("prgate-")).collect()
    };
    assert_eq!(ours("scope"), Vec::<String>::new(), "scope depends on no crate of ours");
    assert_eq!(ours("sim-server"), Vec::<String>::new(), "the sim-server stands alone");
    assert_eq!(ours("gate"), ["prgate-scope"], "gate never depends on runner or report");
    assert_eq!(ours("report"), ["prgate-gate", "prgate-scope"]);
    assert_eq!(
        ours("runner"),
        [
            "prgate-gate",
            "prgate-measure",
            "prgate-recipe",
            "prgate-sandbox",
            "prgate-schedule",
            "prgate-scope"
        ],
        "runner never depends on report"
    );
    // The sandbox needs the node profile (GPUs, image, secrets) and the stall limit, no more.
    assert_eq!(ours("sandbox"), ["prgate-recipe"], "sandbox never depends on runner or gate");
    // The formats: scope for the one error shape of config files and the plan's renames, gate
    // for the wire types a recipe answers in (checks, not-run reasons, contract changes).
    assert_eq!(ours("recipe"), ["prgate-gate", "prgate-scope"], "recipe never depends on runner");
    assert!(dependencies("runner").contains("prgate-recipe"), "the runner reads the formats");
    // The estimate and the schedule: the formats an estimate is made from (recipe), the wire
    // types and the event stream's lines (gate), the plan (scope); never what runs a plan.
    assert_eq!(
        ours("schedule"),
        ["prgate-gate", "prgate-recipe", "prgate-scope"],
        "schedule never depends on runner or sandbox"
    );
    // The evidence types it parses into are the gate's (pure); never the runner's.
    assert_eq!(ours("measure"), ["prgate-gate"], "measure depends on nothing but the evidence");
    assert_eq!(ours("github"), Vec::<String>::new(), "github knows nothing of the others");
    // The demo's sample: the node profile's format (recipe), never what runs the sample.
    assert_eq!(ours("sample"), ["prgate-recipe"], "sample never depends on runner");
    for dir in LIBRARIES {
        assert!(!dependencies(dir).contains("prgate-github"), "{dir} uses the GitHub crate");
    }
}

#[test]
fn only_the_binary_talks_to_github() {
    // GitHub's client is the `github` crate's alone, and only the binary depends on that.
    for dir in LIBRARIES.into_iter().chain(["."]) {
        let deps = dependencies(dir);
        assert!(!deps.contains("octocrab"), "{dir} depends on GitHub's client itself");
    }
    for dir in LIBRARIES {
        let found = mentions(dir, &["api.github.com", "octocrab"]);
        assert!(found.is_empty(), "{dir} names GitHub's API: {found:?}");
    }
    assert!(dependencies("github").contains("octocrab"), "the github crate's client is octocrab");
    assert!(dependencies(".").contains("prgate-github"), "the binary talks through it");
}

#[test]
fn gate_and_report_do_no_io_and_scope_reads_only_git() {
    for dir in ["gate/src", "report/src"] {
        let found = io_in(dir, &[], &[]);
        assert!(found.is_empty(), "{dir} does I/O: {found:?}");
    }
    let found: Vec<_> = io_in("scope/src", &[], &[])
        .into_iter()
        .filter(|(file, _)| {
            !["scope/src/git.rs", "scope/src/git/files.rs"].contains(&file.as_str())
        })
        .collect();
    assert!(found.is_empty(), "scope reads more than git: {found:?}");
}

#[test]
fn recipe_reads_text_and_does_no_io() {
    // The formats are parsed from text the caller read: no file, process, socket, environment
    // or container in `recipe/`, so `plan --estimate` on a laptop links none of it.
    let found = io_in("recipe/src", &[], &[]);
    assert!(found.is_empty(), "recipe does I/O: {found:?}");
    let deps = dependencies("recipe");
    for crate_that_runs in ["rustix", "signal-hook", "ureq", "git2", "prgate-runner"] {
        assert!(!deps.contains(crate_that_runs), "recipe depends on {crate_that_runs}");
    }
}

#[test]
fn children_start_in_the_sandbox_and_at_prgates_own_named_tools() {
    // Every place that starts a child is marked for clippy's `disallowed-methods`
    // (`clippy.toml`); the sandbox holds the starter of steps' commands, the container engine
    // and the watchdog. Outside it, only these marked places of prgate's own tools: SLURM's
    // commands and `scontrol` (the runner), the demo's python3 check (the binary). Tests may
    // start children of their own (a test module is not looked at).
    let outside = [
        ("runner/src", "runner/src/run/topology.rs"),
        ("runner/src", "runner/src/slurm/client.rs"),
        ("src", "src/demo.rs"),
    ];
    let marker = ["clippy::disallowed_methods"];
    let no_child = LIBRARIES.into_iter().filter(|dir| !["runner", "sandbox"].contains(dir));
    for dir in no_child.chain(["github"]) {
        let found = mentions(&format!("{dir}/src"), &marker);
        assert!(found.is_empty(), "{dir} starts a child: {found:?}");
    }
    for dir in ["runner/src", "src"] {
        let found: Vec<String> = mentions(dir, &marker).into_iter().map(|(file, _)| file).collect();
        let expected: Vec<&str> =
            outside.iter().filter(|(of, _)| *of == dir).map(|(_, file)| *file).collect();
        assert_eq!(found, expected, "the marked places outside the sandbox in {dir}");
    }
    assert!(!mentions("sandbox/src", &marker).is_empty(), "the sandbox starts the children");
    assert!(dependencies("runner").contains("prgate-sandbox"), "the runner runs through it");
    assert!(!dependencies("recipe").contains("prgate-sandbox"), "the formats start nothing");
}

#[test]
fn measure_parses_what_it_is_handed_and_starts_nothing() {
    // Its one I/O is its two clients' HTTP to the server under test (ureq's sockets): no child
    // process, no file or folder (a PR's tree, a container's output), no environment, no
    // socket of its own. Reading those is the runner's, which hands measure the text.
    // `std::io` and `read_to_string`: reading the HTTP answers.
    let found = io_in("measure/src", &["std::io::stdin"], &["std::io", "read_to_string"]);
    assert!(found.is_empty(), "measure does I/O beyond its HTTP clients: {found:?}");
    // Lean: the parsers' crates and the HTTP client; a new one is a decision made here.
    let expect = ["junit-parser", "prgate-gate", "serde", "serde_json", "thiserror", "ureq"];
    let expect: BTreeSet<String> = expect.into_iter().map(str::to_owned).collect();
    assert_eq!(dependencies("measure"), expect, "measure's dependencies");
}

#[test]
fn schedule_decides_from_plain_data_and_runs_nothing() {
    // What a plan costs and where it runs is decided from text and values its callers read (the
    // recipes from head's tree: the runner's `estimate_plan`; the event streams and the nodes
    // file: the binary): no file, process, socket, environment, clock or repository in
    // `schedule/`, so `plan --estimate` on a laptop links no container or cluster code.
    let found = io_in("schedule/src", &["SystemTime", "Instant", "git2"], &[]);
    assert!(found.is_empty(), "schedule does I/O: {found:?}");
    let deps = dependencies("schedule");
    for crate_that_runs in
        ["prgate-sandbox", "prgate-runner", "rustix", "signal-hook", "ureq", "git2"]
    {
        assert!(!deps.contains(crate_that_runs), "schedule depends on {crate_that_runs}");
    }
    // Lean: the formats and wire types below it, serde for the nodes file and the assignment's
    // state file; a new one is a decision made here.
    let expect = [
        "prgate-gate",
        "prgate-recipe",
        "prgate-scope",
        "serde",
        "serde_json",
        "thiserror",
        "toml",
    ];
    let expect: BTreeSet<String> = expect.into_iter().map(str::to_owned).collect();
    assert_eq!(deps, expect, "schedule's dependencies");
}

#[test]
fn the_sample_starts_nothing_and_only_the_binary_uses_it() {
    // The demo's sample repository is built from the files embedded in the crate: it writes the
    // repository (git2) and the node profile (`std::fs`) below the folder it is given, and
    // reads no file or folder, environment, process, socket or clock of its own. `std::io`:
    // the error of those writes.
    let found = io_in("sample/src", &["SystemTime", "Instant"], &["std::fs", "std::io"]);
    assert!(found.is_empty(), "sample does I/O beyond writing its folder: {found:?}");
    // Lean: git2 for the repository, the node profile's format, serde for its PR list; a new
    // one is a decision made here.
    let expect = ["git2", "prgate-recipe", "serde", "serde_json", "thiserror", "toml"];
    let expect: BTreeSet<String> = expect.into_iter().map(str::to_owned).collect();
    assert_eq!(dependencies("sample"), expect, "sample's dependencies");
    for dir in LIBRARIES.into_iter().chain(["github"]) {
        assert!(!dependencies(dir).contains("prgate-sample"), "{dir} uses the demo's sample");
    }
    assert!(dependencies(".").contains("prgate-sample"), "the binary's demo runs it");
}

/// Every `.rs` file of the workspace, tests included, but for the build output.
fn all_sources() -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut folders = vec![root()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("a folder") {
            let path = entry.expect("an entry").path();
            let name = path.file_name().and_then(|name| name.to_str()).unwrap_or_default();
            if path.is_dir() {
                if name != "target" && !name.starts_with('.') {
                    folders.push(path);
                }
            } else if name.ends_with(".rs") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// `(file, lines)` for each of `files` longer than `limit` lines.
fn longer_than(files: &[PathBuf], limit: usize) -> Vec<(String, usize)> {
    files
        .iter()
        .map(|path| {
            let lines = std::fs::read_to_string(path).expect("a source file").lines().count();
            (path.strip_prefix(root()).unwrap_or(path).display().to_string(), lines)
        })
        .filter(|&(_, lines)| lines > limit)
        .collect()
}

#[test]
fn the_binary_only_wires() {
    // Every format the binary reads or writes is a crate's (the plan's scope's, the evidence
    // and verdict the gate's, `prgate plan`'s output report's, the sample's PR list the
    // sample's): the binary derives no serde type of its own.
    let formats: Vec<String> = sources(&root().join("src"))
        .into_iter()
        .filter(|path| {
            let text = std::fs::read_to_string(path).expect("a source file");
            // A derive's whole list, however rustfmt wrapped it.
            let derives = text.split("#[derive(").skip(1).map(|rest| rest.split(")]").next());
            derives.flatten().any(|list| list.contains("Serialize") || list.contains("Deserialize"))
                || text.contains("#[serde(")
        })
        .map(|path| path.strip_prefix(root()).unwrap_or(&path).display().to_string())
        .collect();
    assert!(formats.is_empty(), "the binary defines a format: {formats:?}");
    // Git is scope's (the plan, a ref resolved, the commits a run needs): the binary names git2
    // only for libgit2's process-wide switch in main.rs.
    let git: Vec<_> =
        mentions("src", &["git2"]).into_iter().filter(|(file, _)| file != "src/main.rs").collect();
    assert!(git.is_empty(), "the binary reads git itself: {git:?}");
    // Wiring is short: no file of the binary over 700 lines, none in the workspace over 1,000.
    let binary = longer_than(&sources(&root().join("src")), 700);
    assert!(binary.is_empty(), "a file of the binary over 700 lines: {binary:?}");
    let workspace = longer_than(&all_sources(), 1_000);
    assert!(workspace.is_empty(), "a file over 1,000 lines: {workspace:?}");
}
