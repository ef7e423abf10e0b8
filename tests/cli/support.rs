//! Test support: real git repositories built with the git command line, and the real `prgate`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use tempfile::TempDir;

/// A git repository in a temporary directory, built by running git.
pub(crate) struct Repo {
    dir: TempDir,
}

/// The manifest most tests use: the layout of the issue, with a shared test folder.
pub(crate) const MANIFEST: &str = r#"[scope]
models = ["pkg/models/{model}/**", "test/unit/{model}/**",
          "test/kernels/test_{model}_*.py", "test/e2e/{model}.toml"]
shared = ["pkg/__init__.py", "pkg/common/**", "pyproject.toml"]
ignore = ["docs/**"]
codeowners = ".github/CODEOWNERS"
"#;

impl Repo {
    /// An empty repository whose first branch is `main`.
    pub(crate) fn new() -> Repo {
        let repo = Repo { dir: tempfile::tempdir().expect("a temporary directory") };
        repo.git(&["init", "-q", "-b", "main"]);
        repo
    }

    /// A repository with the standard manifest and models `alpha`, `beta` and `beta_x`
    /// committed on `main`.
    pub(crate) fn standard() -> Repo {
        let repo = Repo::new();
        repo.write("prgate.toml", MANIFEST)
            .write("pyproject.toml", "[project]\nname = \"pkg\"\n")
            .write("pkg/__init__.py", "")
            .write("pkg/common/guard.py", "def guard(): pass\n")
            .write("docs/index.md", "# docs\n")
            .write("scripts/release.sh", "echo release\n");
        for model in ["alpha", "beta", "beta_x"] {
            repo.write(&format!("pkg/models/{model}/layer.py"), &format!("# {model}\n"))
                .write(&format!("pkg/models/{model}/README.md"), &format!("# {model}\n"))
                .write(&format!("test/unit/{model}/test_layer.py"), "def test(): pass\n")
                .write(&format!("test/kernels/test_{model}_k1.py"), "def test(): pass\n")
                .write(&format!("test/e2e/{model}.toml"), "[server]\n");
        }
        repo.commit("base");
        repo
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a file (creating its folders).
    pub(crate) fn write(&self, path: &str, text: &str) -> &Repo {
        let full = self.dir.path().join(path);
        std::fs::create_dir_all(full.parent().expect("a parent")).expect("create folders");
        std::fs::write(full, text).expect("write a file");
        self
    }

    /// Runs git in the repository with a fixed identity and clock, and returns its stdout.
    pub(crate) fn git(&self, args: &[&str]) -> String {
        git_in(self.dir.path(), args)
    }

    /// Stages everything and commits.
    pub(crate) fn commit(&self, message: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
        self.git(&["rev-parse", "HEAD"]).trim().to_owned()
    }

    /// A branch `name` from `from`, checked out.
    pub(crate) fn branch(&self, name: &str, from: &str) -> &Repo {
        self.git(&["checkout", "-q", "-b", name, from]);
        self
    }
}

/// Runs git in `dir` with a fixed identity and clock, isolated from the user's configuration.
pub(crate) fn git_in(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
        .output()
        .expect("git runs");
    assert!(
        output.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("git prints UTF-8")
}

/// What a run of `prgate` gave.
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// Runs the real `prgate` binary in `dir` with `args`, feeding `stdin`.
pub(crate) fn prgate_with_stdin(dir: &Path, args: &[&str], stdin: &str) -> Run {
    prgate_full(dir, args, stdin, &[])
}

/// Runs the real `prgate` binary in `dir` with `args` and extra environment variables.
pub(crate) fn prgate_with_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    prgate_full(dir, args, "", env)
}

fn prgate_full(dir: &Path, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Run {
    use std::io::Write as _;
    let mut child = Command::new(binary())
        .args(args)
        .envs(env.iter().copied())
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("prgate starts");
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write stdin");
    let output: Output = child.wait_with_output().expect("prgate ends");
    Run {
        code: output.status.code().expect("prgate exits, not killed"),
        stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
    }
}

/// Runs the real `prgate` binary in `dir` with `args`.
pub(crate) fn prgate(dir: &Path, args: &[&str]) -> Run {
    prgate_with_stdin(dir, args, "")
}

/// Runs `prgate plan --format json` with `args` and parses the plan; the run must succeed.
pub(crate) fn plan_json(dir: &Path, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["plan", "--format", "json"];
    all.extend_from_slice(args);
    let run = prgate(dir, &all);
    assert_eq!(run.code, 0, "prgate {all:?} failed: {}", run.stderr);
    serde_json::from_str(&run.stdout).expect("the plan is JSON")
}

/// Every model of a plan as `name tier [new] [removed]`, one a line.
pub(crate) fn tiers(plan: &serde_json::Value) -> String {
    plan["models"]
        .as_array()
        .expect("models")
        .iter()
        .map(|model| {
            let mut line = format!("{} {}", text(&model["name"]), text(&model["tier"]));
            if model["new"] == true {
                line.push_str(" new");
            }
            if model["removed"] == true {
                line.push_str(" removed");
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every changed path of a plan as `status path [<- old]: kinds`, one a line.
pub(crate) fn changed(plan: &serde_json::Value) -> String {
    plan["changed"]
        .as_array()
        .expect("changed")
        .iter()
        .map(|change| {
            let old = match change["old_path"].as_str() {
                Some(old) => format!(" <- {old}"),
                None => String::new(),
            };
            let kinds: Vec<String> = change["matches"]
                .as_array()
                .expect("matches")
                .iter()
                .map(|m| match m["model"].as_str() {
                    Some(model) => format!("{} {model}", text(&m["kind"])),
                    None => text(&m["kind"]).to_owned(),
                })
                .collect();
            format!(
                "{} {}{old}: {}",
                text(&change["status"]),
                text(&change["path"]),
                kinds.join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub(crate) fn text(value: &serde_json::Value) -> &str {
    value.as_str().unwrap_or_else(|| panic!("{value} is not a string"))
}

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_prgate"))
}
