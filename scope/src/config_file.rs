//! The one error shape of every config file prgate reads (the manifest, a recipe, the common
//! checks' recipe, the node profile): [`ConfigError`], the file and what is wrong with it.
//!
//! Each file's parser names the file as its caller gave it (e.g. `prgate.toml at merge-base
//! 1a2b3c4`); this module only builds and prints the error, so every config file's messages
//! read alike: `<file>: <message>`, `<file>: <key> = <value>: <problem>`, `<file>: <key>:
//! <problem>`.

use std::fmt;

/// Why a config file was refused: the file, as its caller named it, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {kind}")]
pub struct ConfigError {
    /// The file, e.g. `test/e2e/kimi_k3.toml at 9f8e7d6`.
    pub file: String,
    /// What is wrong with it.
    pub kind: ConfigErrorKind,
}

/// What is wrong with a config file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigErrorKind {
    /// The file is not valid TOML or does not have the expected shape (unknown key, wrong type).
    #[error("{message}")]
    Syntax { message: String },
    /// A value has the right type but is not acceptable; `value` is shown as Rust's `Debug`
    /// prints it (a string in quotes).
    #[error("{key} = {value}: {problem}")]
    Value { key: String, value: String, problem: String },
    /// A key is wrong as a whole (an empty list, two lists that do not match, a key missing
    /// where another needs it).
    #[error("{key}: {problem}")]
    Key { key: String, problem: String },
}

impl ConfigError {
    /// `text` read as TOML into `T`; a syntax or shape error names `file`.
    pub fn parse_toml<T: serde::de::DeserializeOwned>(
        text: &str,
        file: &str,
    ) -> Result<T, ConfigError> {
        toml::from_str(text).map_err(|error| ConfigError {
            file: file.to_owned(),
            kind: ConfigErrorKind::Syntax { message: error.to_string().trim_end().to_owned() },
        })
    }

    /// `key` in `file` has the unacceptable `value`.
    pub fn value(
        file: &str,
        key: &str,
        value: &dyn fmt::Debug,
        problem: impl fmt::Display,
    ) -> ConfigError {
        ConfigError {
            file: file.to_owned(),
            kind: ConfigErrorKind::Value {
                key: key.to_owned(),
                value: format!("{value:?}"),
                problem: problem.to_string(),
            },
        }
    }

    /// `key` in `file` is wrong as a whole.
    pub fn key(file: &str, key: &str, problem: impl fmt::Display) -> ConfigError {
        ConfigError {
            file: file.to_owned(),
            kind: ConfigErrorKind::Key { key: key.to_owned(), problem: problem.to_string() },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_names_the_file_first() {
        #[derive(Debug, serde::Deserialize)]
        #[expect(dead_code, reason = "only the parse error is looked at")]
        struct Shape {
            n: u32,
        }
        let syntax = ConfigError::parse_toml::<Shape>("n = 'x'", "a.toml").expect_err("a string");
        assert!(syntax.to_string().starts_with("a.toml: "), "{syntax}");
        assert!(matches!(syntax.kind, ConfigErrorKind::Syntax { .. }), "{syntax:?}");
        let cases = [
            (ConfigError::value("a.toml", "k", &"v", "is bad"), "a.toml: k = \"v\": is bad"),
            (ConfigError::value("a.toml", "n", &3, "is odd"), "a.toml: n = 3: is odd"),
            (ConfigError::key("a.toml", "list", "is empty"), "a.toml: list: is empty"),
        ];
        for (error, expect) in cases {
            assert_eq!(error.to_string(), expect);
        }
    }
}
