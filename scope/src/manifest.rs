//! The manifest, `prgate.toml`: how a repository describes its models and shared paths.
//!
//! The file is parsed through private serde types that reject unknown keys, then checked and
//! turned into a [`Manifest`] whose patterns are compiled. Every error names the file, the key
//! and the bad value. Where the file comes from (always the base side of a PR) is the caller's
//! business; this module only sees its text. The rest of this page is `docs/manifest.md`.
//!
#![doc = include_str!("../../docs/manifest.md")]

use serde::Deserialize;

use crate::config_file::ConfigError;
use crate::pattern::{MODEL_SLOT, ModelPattern, PathPattern};

/// Where the manifest lives in a repository, relative to its root.
pub const MANIFEST_PATH: &str = "prgate.toml";

/// A checked manifest: compiled patterns, ready to classify paths.
#[derive(Debug, Clone)]
pub struct Manifest {
    models: Vec<ModelPattern>,
    shared: Vec<PathPattern>,
    ignore: Vec<PathPattern>,
    codeowners: String,
    readme: Option<String>,
    gate: Option<toml::Table>,
}

/// Why a manifest was refused: the file and what is wrong, as every config file says it.
pub type ManifestError = ConfigError;

impl Manifest {
    /// Parses and checks the text of a manifest. `file` names it in errors, e.g.
    /// `prgate.toml at merge-base 1a2b3c4`.
    pub fn parse(text: &str, file: &str) -> Result<Manifest, ManifestError> {
        let raw: RawManifest = ConfigError::parse_toml(text, file)?;
        let scope = raw.scope;
        let models = model_patterns(file, &scope.models)?;
        let shared = path_patterns(file, "scope.shared", &scope.shared)?;
        let ignore = path_patterns(file, "scope.ignore", &scope.ignore)?;
        let codeowners = scope.codeowners.unwrap_or_else(|| DEFAULT_CODEOWNERS.to_owned());
        if let Err(problem) = check_repository_path(&codeowners) {
            return Err(ConfigError::value(file, "scope.codeowners", &codeowners, problem));
        }
        let readme = scope.readme.map(|readme| readme_path(file, readme)).transpose()?;
        Ok(Manifest { models, shared, ignore, codeowners, readme, gate: raw.gate })
    }

    /// The patterns of paths that belong to one model, in the order the manifest lists them.
    pub fn models(&self) -> &[ModelPattern] {
        &self.models
    }

    /// The patterns of shared paths: a change there puts every model on the smoke tier at least.
    pub fn shared(&self) -> &[PathPattern] {
        &self.shared
    }

    /// The patterns of paths whose changes select nothing, whatever else they match.
    pub fn ignore(&self) -> &[PathPattern] {
        &self.ignore
    }

    /// Where the repository's CODEOWNERS file is, relative to its root.
    pub fn codeowners(&self) -> &str {
        &self.codeowners
    }

    /// Where a model's README is, with `{model}` for its name, when the manifest says.
    pub fn readme(&self) -> Option<&str> {
        self.readme.as_deref()
    }

    /// The path of one model's README, when the manifest says where READMEs are.
    pub fn readme_of(&self, model: &str) -> Option<String> {
        self.readme.as_ref().map(|readme| readme.replace(MODEL_SLOT, model))
    }

    /// The `[gate]` table, unparsed: its keys are the gate's business.
    pub fn gate_table(&self) -> Option<&toml::Table> {
        self.gate.as_ref()
    }
}

/// `scope.models` compiled: at least one pattern, and one with `{model}` as a whole path
/// segment (so that models can be discovered).
fn model_patterns(file: &str, texts: &[String]) -> Result<Vec<ModelPattern>, ManifestError> {
    if texts.is_empty() {
        return Err(ConfigError::key(
            file,
            "scope.models",
            "is empty: list at least one pattern with {model} in it",
        ));
    }
    let mut models = Vec::with_capacity(texts.len());
    for (index, text) in texts.iter().enumerate() {
        let pattern = ModelPattern::new(text).map_err(|error| {
            ConfigError::value(file, &format!("scope.models[{index}]"), text, error)
        })?;
        models.push(pattern);
    }
    if !models.iter().any(ModelPattern::is_whole_segment) {
        return Err(ConfigError::key(
            file,
            "scope.models",
            "no pattern has {model} as a whole path segment, so no model can be \
             discovered\nhint: add one such as \"models/{model}/**\"",
        ));
    }
    Ok(models)
}

/// The path patterns listed under `key`, compiled.
fn path_patterns(
    file: &str,
    key: &str,
    texts: &[String],
) -> Result<Vec<PathPattern>, ManifestError> {
    texts
        .iter()
        .enumerate()
        .map(|(index, text)| {
            PathPattern::new(text)
                .map_err(|error| ConfigError::value(file, &format!("{key}[{index}]"), text, error))
        })
        .collect()
}

/// `scope.readme` checked: a plain path with one `{model}`.
fn readme_path(file: &str, readme: String) -> Result<String, ManifestError> {
    let fits = readme.matches(MODEL_SLOT).count() == 1
        && check_repository_path(&readme.replace(MODEL_SLOT, "m")).is_ok()
        && !readme.contains(['*', '?', '[', ']']);
    if !fits {
        return Err(ConfigError::value(
            file,
            "scope.readme",
            &readme,
            "must be a plain path with one {model}, such as \"models/{model}/README.md\"",
        ));
    }
    Ok(readme)
}

/// The CODEOWNERS location used when the manifest does not name one.
pub const DEFAULT_CODEOWNERS: &str = ".github/CODEOWNERS";

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawManifest {
    scope: RawScope,
    /// The gate's settings: checked by the gate, which owns their meaning.
    gate: Option<toml::Table>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawScope {
    models: Vec<String>,
    #[serde(default)]
    shared: Vec<String>,
    #[serde(default)]
    ignore: Vec<String>,
    codeowners: Option<String>,
    readme: Option<String>,
}

/// A path inside the repository: relative, `/`-separated, no `.` or `..` segments.
fn check_repository_path(path: &str) -> Result<(), NotARepositoryPath> {
    if path.is_empty() {
        return Err(NotARepositoryPath::Empty);
    }
    if path.starts_with('/') {
        return Err(NotARepositoryPath::Absolute);
    }
    if path.split('/').any(|segment| segment.is_empty() || segment == "." || segment == "..") {
        return Err(NotARepositoryPath::NotPlain);
    }
    Ok(())
}

/// Why a path is not one inside the repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum NotARepositoryPath {
    #[error("is empty")]
    Empty,
    #[error("must be relative to the repository root (no leading /)")]
    Absolute,
    #[error("must be a plain path: no empty, . or .. segments")]
    NotPlain,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `text` and renders the outcome: the pattern lists, or the error as users see it.
    fn check(text: &str) -> String {
        match Manifest::parse(text, "prgate.toml") {
            Ok(manifest) => {
                let list = |patterns: Vec<&str>| patterns.join(", ");
                format!(
                    "ok\nmodels: {}\nshared: {}\nignore: {}\ncodeowners: {}",
                    list(manifest.models().iter().map(ModelPattern::text).collect()),
                    list(manifest.shared().iter().map(PathPattern::text).collect()),
                    list(manifest.ignore().iter().map(PathPattern::text).collect()),
                    manifest.codeowners()
                )
            }
            Err(error) => format!("error: {error}"),
        }
    }

    #[test]
    fn the_issue_example_parses() {
        insta::assert_snapshot!(check(
            r#"
[scope]
models = ["sgl_amd_mono/models/{model}/**", "test/unit/{model}/**",
          "test/kernels/test_{model}_*.py", "test/e2e/{model}.toml"]
shared = ["sgl_amd_mono/__init__.py", "sgl_amd_mono/common/**", "pyproject.toml"]
ignore = ["docs/**"]
codeowners = ".github/CODEOWNERS"
"#
        ), @r"
        ok
        models: sgl_amd_mono/models/{model}/**, test/unit/{model}/**, test/kernels/test_{model}_*.py, test/e2e/{model}.toml
        shared: sgl_amd_mono/__init__.py, sgl_amd_mono/common/**, pyproject.toml
        ignore: docs/**
        codeowners: .github/CODEOWNERS
        ");
    }

    #[test]
    fn optional_keys_take_their_defaults() {
        insta::assert_snapshot!(check("[scope]\nmodels = [\"m/{model}/**\"]\n"), @r"
        ok
        models: m/{model}/**
        shared: 
        ignore: 
        codeowners: .github/CODEOWNERS
        ");
    }

    #[test]
    fn every_kind_of_error_names_the_file_the_key_and_the_value() {
        let cases = [
            ("unknown key", "[scope]\nmodels = [\"m/{model}/**\"]\nshard = []\n"),
            ("unknown table", "[scope]\nmodels = [\"m/{model}/**\"]\n[gates]\n"),
            ("missing scope", "title = 1\n"),
            ("missing models", "[scope]\nshared = []\n"),
            ("wrong type", "[scope]\nmodels = \"m/{model}/**\"\n"),
            ("not toml", "[scope\n"),
            ("empty models", "[scope]\nmodels = []\n"),
            ("bad glob", "[scope]\nmodels = [\"m/{model}/**\", \"t/{model}/[z-a].py\"]\n"),
            ("empty file", ""),
            ("no {model}", "[scope]\nmodels = [\"m/{model}/**\", \"tests/**\"]\n"),
            ("two {model}", "[scope]\nmodels = [\"m/{model}/{model}/**\"]\n"),
            ("{model} in braces", "[scope]\nmodels = [\"m/{x,{model}}/**\"]\n"),
            ("no whole segment", "[scope]\nmodels = [\"t/test_{model}_*.py\"]\n"),
            (
                "{model} in shared",
                "[scope]\nmodels = [\"m/{model}/**\"]\nshared = [\"c/{model}\"]\n",
            ),
            ("bad ignore glob", "[scope]\nmodels = [\"m/{model}/**\"]\nignore = [\"docs/[a\"]\n"),
            ("absolute glob", "[scope]\nmodels = [\"m/{model}/**\"]\nshared = [\"/common/**\"]\n"),
            ("empty glob", "[scope]\nmodels = [\"m/{model}/**\"]\nignore = [\"\"]\n"),
            (
                "bad codeowners",
                "[scope]\nmodels = [\"m/{model}/**\"]\ncodeowners = \"../CODEOWNERS\"\n",
            ),
        ];
        let rendered: Vec<String> =
            cases.iter().map(|(name, text)| format!("## {name}\n{}", check(text))).collect();
        insta::assert_snapshot!(rendered.join("\n\n"));
    }
}
