//! The manifest's path patterns: git-style globs, and model patterns that capture `{model}`.
//!
//! Globs follow git's rules: they match the whole path from the repository root, `*` and `?`
//! stop at `/`, `**` as a whole segment crosses any number of directories, `{a,b}` is an
//! alternation and `[...]` a class. Parsing is globset's; a model pattern is compiled by putting
//! a placeholder where `{model}` stands, letting globset build the regular expression, and
//! putting a capture group where the placeholder landed. Which models exist is not known here:
//! the caller binds partial-segment patterns to the known names ([`ModelPattern::bind`]).

use std::cell::OnceCell;

use aho_corasick::AhoCorasick;
use globset::GlobBuilder;
use regex::bytes::Regex;

/// The placeholder a model pattern's name slot is written as.
pub const MODEL_SLOT: &str = "{model}";

/// What stands for `{model}` while globset compiles the pattern. Letters only, so that globset
/// copies it into the regular expression unchanged.
const MARKER: &str = "prgatemodelslotmarker";

/// A pattern of `scope.shared` or `scope.ignore`: a plain glob.
#[derive(Debug, Clone)]
pub struct PathPattern {
    text: String,
    /// The text every match starts with: a cheap test before the regular expression.
    literal_prefix: String,
    regex: Regex,
}

/// A pattern of `scope.models`: a glob with one `{model}` slot that names the model a path
/// belongs to.
#[derive(Debug, Clone)]
pub struct ModelPattern {
    text: String,
    /// The text every match starts with: a cheap test before the regular expression.
    literal_prefix: String,
    whole_segment: bool,
    /// `{model}` comes right after the literal prefix (`models/{model}/**`): the name is then
    /// the segment after the prefix, and a plain match confirms it, with no capture search.
    slot_after_literal_prefix: bool,
    /// The pattern ends `{model}/**`: any path with a segment after the name matches.
    slot_then_anything: bool,
    /// The regular expression before and after the slot.
    regex_before: String,
    regex_after: String,
    /// The slot as any one segment (`[^/]+`): for whole-segment patterns this is the matcher.
    any_name: Regex,
}

/// A model pattern ready to name models: a whole-segment pattern captures any segment, a
/// partial-segment pattern only the known names, longest first.
#[derive(Debug, Clone)]
pub struct BoundModelPattern {
    bound: Bound,
}

#[derive(Debug, Clone)]
enum Bound {
    Whole(ModelPattern),
    /// The pattern's regular expression around the slot, and a lazily built one per known name.
    Partial {
        regex_before: String,
        regex_after: String,
        names: Vec<(String, OnceCell<Option<Regex>>)>,
        occurs: Option<AhoCorasick>,
    },
}

/// Why a pattern was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("a pattern cannot be empty")]
    Empty,
    #[error("patterns are relative to the repository root\nhint: drop the leading '/'")]
    Absolute,
    #[error("{0}")]
    Glob(String),
    #[error("a models pattern needs {{model}} where the model's name stands")]
    NoModelSlot,
    #[error("{{model}} may appear only once in a pattern")]
    SeveralModelSlots,
    #[error("{{model}} cannot stand inside an alternation {{...}}")]
    ModelSlotInAlternation,
    #[error("only scope.models patterns capture {{model}}")]
    UnexpectedModelSlot,
    #[error("the pattern contains prgate's internal placeholder '{MARKER}'")]
    ReservedText,
    #[error(
        "a pattern ending in '/' matches no file\nhint: write 'dir/**' for every file below dir"
    )]
    TrailingSlash,
    #[error("segments must be plain: no empty, '.' or '..' segment")]
    NotPlain,
    #[error("POSIX character classes such as [:alpha:] are not supported; list the characters")]
    PosixClass,
    #[error("{{model}} cannot stand inside a character class [...]")]
    ModelSlotInClass,
    #[error(
        "{{model}} right after '**' is ambiguous: any directory could be the model\nhint: put the directory that holds the models before it, as in 'models/{{model}}/**'"
    )]
    ModelSlotAfterRecursive,
}

impl PathPattern {
    /// Compiles a glob that has no `{model}` slot.
    pub fn new(text: &str) -> Result<PathPattern, PatternError> {
        check_common(text)?;
        if text.contains(MODEL_SLOT) {
            return Err(PatternError::UnexpectedModelSlot);
        }
        let regex = compile(&glob_regex(text)?)?;
        Ok(PathPattern { text: text.to_owned(), literal_prefix: literal_prefix(text), regex })
    }

    /// The pattern as written in the manifest.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the pattern matches a path (relative to the repository root, `/`-separated).
    pub fn is_match(&self, path: &str) -> bool {
        path.starts_with(&self.literal_prefix) && self.regex.is_match(path.as_bytes())
    }
}

impl ModelPattern {
    /// Compiles a glob with exactly one `{model}` slot.
    pub fn new(text: &str) -> Result<ModelPattern, PatternError> {
        check_common(text)?;
        let slots: Vec<usize> = text.match_indices(MODEL_SLOT).map(|(at, _)| at).collect();
        let at = match slots.as_slice() {
            [] => return Err(PatternError::NoModelSlot),
            [at] => *at,
            _ => return Err(PatternError::SeveralModelSlots),
        };
        let (depth, in_class) = open_groups(&text[..at]);
        if in_class {
            return Err(PatternError::ModelSlotInClass);
        }
        if depth > 0 {
            return Err(PatternError::ModelSlotInAlternation);
        }
        let before = &text[..at];
        if before == "**/" || before.ends_with("/**/") {
            return Err(PatternError::ModelSlotAfterRecursive);
        }
        let after = &text[at + MODEL_SLOT.len()..];
        let whole_segment = (before.is_empty() || before.ends_with('/'))
            && (after.is_empty() || after.starts_with('/'));

        let regex = glob_regex(&format!("{before}{MARKER}{after}"))?;
        let (regex_before, regex_after) = match regex.split_once(MARKER) {
            Some((regex_before, regex_after)) if !regex_after.contains(MARKER) => {
                (regex_before.to_owned(), regex_after.to_owned())
            }
            _ => return Err(PatternError::Glob("{model} is not in a literal position".to_owned())),
        };
        let any_name = compile(&format!("{regex_before}(?P<model>[^/]+){regex_after}"))?;
        let literal_prefix = literal_prefix(text);
        Ok(ModelPattern {
            text: text.to_owned(),
            slot_after_literal_prefix: literal_prefix == before,
            slot_then_anything: after == "/**",
            literal_prefix,
            whole_segment,
            regex_before,
            regex_after,
            any_name,
        })
    }

    /// The pattern as written in the manifest.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The text every path the pattern matches starts with (`models/` for `models/{model}/**`;
    /// empty when the pattern starts with a wildcard): a tree walk need not enter a folder
    /// that neither starts with it nor is a folder on the way to it.
    pub fn literal_prefix(&self) -> &str {
        &self.literal_prefix
    }

    /// Whether `{model}` is a whole path segment, so that the pattern can discover models.
    pub fn is_whole_segment(&self) -> bool {
        self.whole_segment
    }

    /// For a whole-segment pattern, the segment a path puts in the slot, valid name or not.
    /// `None` when the path does not match, or when the pattern is a partial-segment one.
    pub fn capture<'p>(&self, path: &'p str) -> Option<&'p str> {
        if !self.whole_segment || !path.starts_with(&self.literal_prefix) {
            return None;
        }
        if self.slot_after_literal_prefix {
            let rest = &path[self.literal_prefix.len()..];
            let name = rest.split('/').next()?;
            let matches = if self.slot_then_anything {
                rest.len() > name.len() + 1
            } else {
                self.any_name.is_match(path.as_bytes())
            };
            return (!name.is_empty() && matches).then_some(name);
        }
        self.any_name.captures(path.as_bytes()).and_then(|captures| {
            let slot = captures.name("model")?;
            path.get(slot.start()..slot.end())
        })
    }

    /// Whether the path matches the pattern with any one segment's text in the slot.
    pub fn matches_some_name(&self, path: &str) -> bool {
        path.starts_with(&self.literal_prefix) && self.any_name.is_match(path.as_bytes())
    }

    /// Binds the pattern to the known model names: a partial-segment pattern then names the
    /// longest known model that fits, a whole-segment one any valid name.
    pub fn bind<'n>(&self, known: impl IntoIterator<Item = &'n str>) -> BoundModelPattern {
        if self.whole_segment {
            return BoundModelPattern { bound: Bound::Whole(self.clone()) };
        }
        let mut names: Vec<&str> = known.into_iter().collect();
        names.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        names.dedup();
        BoundModelPattern {
            bound: Bound::Partial {
                regex_before: self.regex_before.clone(),
                regex_after: self.regex_after.clone(),
                occurs: AhoCorasick::new(&names).ok(),
                names: names.into_iter().map(|name| (name.to_owned(), OnceCell::new())).collect(),
            },
        }
    }
}

impl BoundModelPattern {
    /// The model a path belongs to under this pattern, if any. A whole-segment pattern's name
    /// is not checked here.
    pub fn model(&self, path: &str) -> Option<String> {
        match &self.bound {
            Bound::Whole(pattern) => pattern.capture(path).map(str::to_owned),
            Bound::Partial { regex_before, regex_after, names, occurs } => {
                // Only the names that occur in the path are tried, longest first; a name's
                // regular expression is built the first time it is.
                let mut candidates: Vec<usize> = match occurs {
                    Some(occurs) => occurs
                        .find_overlapping_iter(path)
                        .map(|found| found.pattern().as_usize())
                        .collect(),
                    None => (0..names.len()).collect(),
                };
                candidates.sort_unstable();
                candidates.dedup();
                candidates.into_iter().find_map(|index| {
                    let (name, regex) = &names[index];
                    let regex = regex.get_or_init(|| {
                        Regex::new(&format!("{regex_before}{}{regex_after}", regex::escape(name)))
                            .ok()
                    });
                    regex
                        .as_ref()
                        .is_some_and(|regex| regex.is_match(path.as_bytes()))
                        .then(|| name.clone())
                })
            }
        }
    }
}

/// Whether a captured name can be a model's: letters, digits, `_`, `-` and `.`, but not `.`
/// or `..`.
pub fn is_valid_model_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-' | b'.'))
}

/// The start of a glob up to its first special character: every path it matches starts so.
fn literal_prefix(text: &str) -> String {
    let end = text.find(['*', '?', '[', '{', '\\']).unwrap_or(text.len());
    text[..end].to_owned()
}

fn check_common(text: &str) -> Result<(), PatternError> {
    if text.is_empty() {
        return Err(PatternError::Empty);
    }
    if text.starts_with('/') {
        return Err(PatternError::Absolute);
    }
    if text.contains(MARKER) {
        return Err(PatternError::ReservedText);
    }
    if text.ends_with('/') {
        return Err(PatternError::TrailingSlash);
    }
    if text.split('/').any(|segment| segment.is_empty() || segment == "." || segment == "..") {
        return Err(PatternError::NotPlain);
    }
    if text.contains("[:") {
        return Err(PatternError::PosixClass);
    }
    Ok(())
}

/// The regular expression globset builds for a glob under git's rules.
fn glob_regex(text: &str) -> Result<String, PatternError> {
    GlobBuilder::new(text)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map(|glob| glob.regex().to_owned())
        .map_err(|error| PatternError::Glob(error.kind().to_string()))
}

fn compile(source: &str) -> Result<Regex, PatternError> {
    Regex::new(source).map_err(|error| PatternError::Glob(error.to_string()))
}

/// How many alternation braces are open at the end of `text`, and whether a character class
/// is (escapes respected).
fn open_groups(text: &str) -> (usize, bool) {
    let mut depth = 0usize;
    let mut in_class = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '[' if !in_class => in_class = true,
            ']' if in_class => in_class = false,
            '{' if !in_class => depth += 1,
            '}' if !in_class => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    (depth, in_class)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_path(pattern: &str, cases: &[(&str, bool)]) {
        let compiled = PathPattern::new(pattern).expect("pattern compiles");
        for (path, expected) in cases {
            assert_eq!(compiled.is_match(path), *expected, "{pattern} on {path}");
        }
    }

    #[test]
    fn globs_follow_git_rules() {
        check_path(
            "docs/**",
            &[("docs/a.md", true), ("docs/x/y/z.md", true), ("docs", false), ("a/docs/b", false)],
        );
        check_path("*.md", &[("README.md", true), ("docs/README.md", false)]);
        check_path("**/*.md", &[("README.md", true), ("docs/x/README.md", true), ("a.py", false)]);
        check_path("a/**/b", &[("a/b", true), ("a/x/b", true), ("a/x/y/b", true), ("a/xb", false)]);
        check_path("pyproject.toml", &[("pyproject.toml", true), ("sub/pyproject.toml", false)]);
        check_path("src/?.rs", &[("src/a.rs", true), ("src/ab.rs", false), ("src//.rs", false)]);
        check_path(
            "{docs,site}/*.md",
            &[("docs/a.md", true), ("site/b.md", true), ("blog/c.md", false)],
        );
        check_path("test_[ab].py", &[("test_a.py", true), ("test_c.py", false)]);
        check_path("a\\*b", &[("a*b", true), ("axb", false)]);
    }

    #[test]
    fn whole_segment_patterns_capture_the_segment() {
        let cases = [
            ("models/{model}/**", "models/kimi_k31/layer.py", Some("kimi_k31")),
            ("models/{model}/**", "models/kimi_k31/a/b/c.py", Some("kimi_k31")),
            ("models/{model}/**", "models/kimi_k31", None),
            ("models/{model}/**", "models/__init__.py", None),
            ("models/{model}/**", "other/kimi/layer.py", None),
            ("{model}/**", "kimi/x.py", Some("kimi")),
            ("pkg/**/models/{model}/*.py", "pkg/a/b/models/glm/x.py", Some("glm")),
            ("pkg/**/models/{model}/*.py", "pkg/models/glm/x.py", Some("glm")),
            ("pkg/**/models/{model}/*.py", "pkg/models/glm/sub/x.py", None),
            ("recipes/{model}", "recipes/deepseek", Some("deepseek")),
        ];
        for (pattern, path, expected) in cases {
            let compiled = ModelPattern::new(pattern).expect("pattern compiles");
            assert!(compiled.is_whole_segment(), "{pattern}");
            assert_eq!(compiled.capture(path), expected, "{pattern} on {path}");
        }
    }

    #[test]
    fn partial_segment_patterns_pick_the_longest_known_name_that_fits() {
        let known = ["kimi_k3", "kimi_k31", "glm53_flash", "glm53"];
        let cases = [
            (
                "test/kernels/test_{model}_*.py",
                "test/kernels/test_kimi_k31_k1_ring.py",
                Some("kimi_k31"),
            ),
            ("test/kernels/test_{model}_*.py", "test/kernels/test_kimi_k3_k1.py", Some("kimi_k3")),
            (
                "test/kernels/test_{model}_*.py",
                "test/kernels/test_glm53_flash_sparse.py",
                Some("glm53_flash"),
            ),
            ("test/kernels/test_{model}_*.py", "test/kernels/test_glm53_other.py", Some("glm53")),
            ("test/kernels/test_{model}_*.py", "test/kernels/test_qwen_x.py", None),
            ("test/kernels/test_{model}_*.py", "test/kernels/sub/test_kimi_k3_k1.py", None),
            ("test/e2e/{model}.toml", "test/e2e/kimi_k31.toml", Some("kimi_k31")),
            ("test/e2e/{model}.toml", "test/e2e/kimi_k3.toml", Some("kimi_k3")),
            ("test/e2e/{model}.toml", "test/e2e/kimi_k32.toml", None),
        ];
        for (pattern, path, expected) in cases {
            let compiled = ModelPattern::new(pattern).expect("pattern compiles");
            assert!(!compiled.is_whole_segment(), "{pattern}");
            assert_eq!(compiled.capture(path), None, "partial patterns discover nothing");
            assert_eq!(
                compiled.bind(known).model(path).as_deref(),
                expected,
                "{pattern} on {path}"
            );
        }
    }

    #[test]
    fn a_partial_pattern_with_no_known_models_matches_nothing() {
        let compiled = ModelPattern::new("t/test_{model}_*.py").expect("pattern compiles");
        assert_eq!(compiled.bind([]).model("t/test_a_b.py"), None);
        assert!(compiled.matches_some_name("t/test_a_b.py"));
    }

    proptest::proptest! {
        #[test]
        fn the_quick_capture_agrees_with_the_regular_expression(
            segments in proptest::collection::vec(
                proptest::sample::select(vec!["models", "m", "kimi_k3", "a b", "x.py", "sub", "test"]),
                0..6,
            ),
            pattern in proptest::sample::select(vec![
                "models/{model}/**", "{model}/**", "models/{model}", "models/{model}/*.py",
                "models/*/{model}/**", "**/models/{model}/**", "m/{model}/sub/**",
            ]),
        ) {
            let path = segments.join("/");
            let compiled = ModelPattern::new(pattern).expect("pattern compiles");
            let slow = compiled.any_name.captures(path.as_bytes()).and_then(|captures| {
                let slot = captures.name("model")?;
                path.get(slot.start()..slot.end())
            });
            proptest::prop_assert_eq!(compiled.capture(&path), slow, "{} on {}", pattern, path);
        }
    }

    #[test]
    fn patterns_that_cannot_mean_what_they_say_are_refused() {
        let cases = [
            ("docs/", PatternError::TrailingSlash),
            ("./pyproject.toml", PatternError::NotPlain),
            ("a//b", PatternError::NotPlain),
            ("a/../b", PatternError::NotPlain),
            ("[[:alpha:]]*.py", PatternError::PosixClass),
            ("", PatternError::Empty),
            ("/abs/**", PatternError::Absolute),
        ];
        for (text, expected) in cases {
            assert_eq!(PathPattern::new(text).err(), Some(expected), "{text}");
        }
        let model_cases = [
            ("t/[{model}]/x", PatternError::ModelSlotInClass),
            ("t/{a,{model}}/x", PatternError::ModelSlotInAlternation),
            ("pkg/**/{model}/**", PatternError::ModelSlotAfterRecursive),
            ("**/{model}/**", PatternError::ModelSlotAfterRecursive),
            ("models/{model}/", PatternError::TrailingSlash),
        ];
        for (text, expected) in model_cases {
            assert_eq!(ModelPattern::new(text).err(), Some(expected), "{text}");
        }
        assert!(ModelPattern::new("pkg/**/models/{model}/**").is_ok());
    }

    #[test]
    fn a_glob_before_a_partial_slot_does_not_take_the_longer_name_away() {
        let compiled = ModelPattern::new("t/*_{model}.py").expect("pattern compiles");
        let bound = compiled.bind(["k31", "kimi_k31"]);
        assert_eq!(bound.model("t/test_kimi_k31.py").as_deref(), Some("kimi_k31"));
        assert_eq!(bound.model("t/test_x_k31.py").as_deref(), Some("k31"));
    }

    #[test]
    fn model_names_are_plain_identifiers() {
        let cases = [
            ("kimi_k31", true),
            ("glm-5.3", true),
            ("A1", true),
            (".hidden", true),
            (".", false),
            ("..", false),
            ("", false),
            ("a b", false),
            ("a@b", false),
            ("ünï", false),
        ];
        for (name, expected) in cases {
            assert_eq!(is_valid_model_name(name), expected, "{name}");
        }
    }
}
