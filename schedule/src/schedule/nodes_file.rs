//! The nodes file: the fleet a PR's jobs are scheduled onto (`prgate ci --stage start --nodes`,
//! and the workflow's `nodes.toml` that `prgate node filter` prints without its drained nodes).
//!
//! One `[[node]]` table per node: `name` and `hardware` required, `gpus` and `checkpoints`
//! optional (unknown to the schedule when left out). It is prgate's own format, so an unknown
//! key is refused, named with the file (a `hardwre` typo fails the filter that first reads the
//! file, not a later stage); a name given twice is refused too. Both readers use
//! [`parse`], so they agree on what a nodes file is.
//!
//! What it leaves to others: scheduling ([`super::schedule`]), the health ledger that says which
//! nodes are drained (`prgate_runner::health`).

use std::collections::BTreeSet;

use serde::Deserialize;

use super::Node;

/// Why a nodes file cannot be used; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum NodesFileError {
    #[error("the nodes {path}: {message}")]
    Toml { path: String, message: String },
    #[error("the nodes {path}: it has no [[node]] tables")]
    NoNodes { path: String },
    #[error("the nodes {path}: the node {name:?} is listed twice")]
    Twice { path: String, name: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    node: Vec<RawNode>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    name: String,
    hardware: String,
    gpus: Option<u32>,
    checkpoints: Option<BTreeSet<String>>,
}

/// The nodes of the nodes file `text` (at `path`, for errors), in the file's order; their
/// hardware lowercase.
pub fn parse(text: &str, path: &str) -> Result<Vec<Node>, NodesFileError> {
    read(text, path).map(|(_, nodes)| nodes)
}

/// The nodes file `text` (at `path`) as its TOML table, for a reader that writes it out again
/// (`prgate node filter`), and its nodes, checked as [`parse`] checks them; read once.
pub fn read(text: &str, path: &str) -> Result<(toml::Table, Vec<Node>), NodesFileError> {
    let toml_error = |error: toml::de::Error| NodesFileError::Toml {
        path: path.to_owned(),
        message: error.message().to_owned()
            + &error.span().map(|span| format!(" (at byte {})", span.start)).unwrap_or_default(),
    };
    let table: toml::Table = toml::from_str(text).map_err(toml_error)?;
    let file: RawFile = toml::Value::Table(table.clone()).try_into().map_err(toml_error)?;
    if file.node.is_empty() {
        return Err(NodesFileError::NoNodes { path: path.to_owned() });
    }
    let mut seen = BTreeSet::new();
    let mut nodes = Vec::with_capacity(file.node.len());
    for raw in file.node {
        if !seen.insert(raw.name.clone()) {
            return Err(NodesFileError::Twice { path: path.to_owned(), name: raw.name });
        }
        nodes.push(Node {
            name: raw.name,
            hardware: raw.hardware.to_lowercase(),
            gpus: raw.gpus,
            checkpoints: raw.checkpoints,
        });
    }
    Ok((table, nodes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nodes_file_is_read_and_its_mistakes_are_named_with_the_file() {
        let nodes = parse(
            "[[node]]\nname = \"a\"\nhardware = \"MI355X\"\ngpus = 8\ncheckpoints = [\"k\"]\n\n[[node]]\nname = \"b\"\nhardware = \"mi300x\"\n",
            "nodes.toml",
        )
        .expect("a nodes file");
        assert_eq!(nodes.len(), 2);
        assert_eq!((nodes[0].hardware.as_str(), nodes[0].gpus), ("mi355x", Some(8)));
        assert_eq!(nodes[1].checkpoints, None);
        let cases = [
            ("[[node]]\nname = \"a\"\nhardwre = \"mi355x\"\n", "unknown field `hardwre`"),
            ("[[node]]\nname = \"a\"\n", "missing field `hardware`"),
            ("x = 1\n", "unknown field `x`"),
            ("", "it has no [[node]] tables"),
            (
                "[[node]]\nname = \"a\"\nhardware = \"h\"\n[[node]]\nname = \"a\"\nhardware = \"h\"\n",
                "the node \"a\" is listed twice",
            ),
            ("[[node]\n", "the nodes nodes.toml: "),
        ];
        for (text, expected) in cases {
            let error = parse(text, "nodes.toml").expect_err(text).to_string();
            assert!(error.starts_with("the nodes nodes.toml: "), "{error}");
            assert!(error.contains(expected), "{text:?}: {error}");
        }
    }
}
