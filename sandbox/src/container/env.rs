//! A container's environment: the variables a step hands the command in the container, given
//! one by one, with the node's secrets kept out unless a benchmark asks for one by name.

use std::collections::{BTreeMap, BTreeSet};

use prgate_recipe::node::{NodeProfile, SECRET_ENV_PREFIX, secret_env_var};

/// The variables the launcher sets itself; a step cannot set or override them.
pub const RESERVED_VARIABLES: &[&str] = &[
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
];

/// The environment of a container, on top of what the launcher sets ([`RESERVED_VARIABLES`])
/// and what the image itself defines. Nothing of the runner's environment is in it unless it
/// is set here.
///
/// It is built for one node, and refuses, in [`ContainerEnv::set`], any variable named like one
/// of the node's secrets (`HF_TOKEN`) or like the runner's variable that holds one
/// (`PRGATE_SECRET_HF_TOKEN`), and any value that contains a secret's value. The one way a
/// secret reaches a container is [`ContainerEnv::allow_secret`], by name, for the benchmark
/// that needs it; the launcher then passes it as `-e NAME` with the value in the engine
/// client's environment, so the value is never on a command line or in a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerEnv {
    /// The node's name, for errors.
    node: String,
    /// The names of the node's secrets.
    node_secrets: BTreeSet<String>,
    vars: BTreeMap<String, String>,
    /// The secrets a caller let in, by name.
    secrets: BTreeSet<String>,
}

/// Why a variable was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    #[error(
        "the environment variable name {name:?} is not a plain name: letters, digits and _, not starting with a digit"
    )]
    Name { name: String },
    #[error("{name} is set by the launcher itself; a step cannot set it")]
    Reserved { name: String },
    #[error(
        "{name} is the name of one of the node's secrets: a secret is never set as a plain variable\nhint: a benchmark that needs it asks for it with allow_secret(\"{name}\")"
    )]
    SecretName { name: String },
    #[error(
        "{name} is the runner's variable of a secret ({SECRET_ENV_PREFIX}*): it never reaches a container"
    )]
    SecretVariable { name: String },
    #[error(
        "the value of {name} contains the value of the node's secret {secret}: a secret never reaches a container as a plain variable"
    )]
    SecretValue { name: String, secret: String },
    #[error("the value of {name} contains a NUL byte")]
    Nul { name: String },
    #[error("node {node} has no secret {name}")]
    UnknownSecret { name: String, node: String },
    #[error("the node's secret {name} is not set: the runner has no variable {variable}")]
    UnsetSecret { name: String, variable: String },
}

impl ContainerEnv {
    /// No variables yet, for a container on `node`.
    pub fn new(node: &NodeProfile) -> ContainerEnv {
        ContainerEnv {
            node: node.name().to_owned(),
            node_secrets: node.secrets().clone(),
            vars: BTreeMap::new(),
            secrets: BTreeSet::new(),
        }
    }

    /// Sets `name` to `value`, unless the name is [reserved](RESERVED_VARIABLES) or a secret's,
    /// or the value holds a secret's value (as the runner's environment has it now).
    pub fn set(mut self, name: &str, value: &str) -> Result<ContainerEnv, EnvError> {
        check_name(name)?;
        if RESERVED_VARIABLES.contains(&name) {
            return Err(EnvError::Reserved { name: name.to_owned() });
        }
        if self.node_secrets.contains(name) {
            return Err(EnvError::SecretName { name: name.to_owned() });
        }
        if name.starts_with(SECRET_ENV_PREFIX) {
            return Err(EnvError::SecretVariable { name: name.to_owned() });
        }
        if value.contains('\0') {
            return Err(EnvError::Nul { name: name.to_owned() });
        }
        if let Some(secret) = self.secret_in(value) {
            return Err(EnvError::SecretValue { name: name.to_owned(), secret });
        }
        self.vars.insert(name.to_owned(), value.to_owned());
        Ok(self)
    }

    /// Lets the node's secret `name` into the container as variable `name`: for the one
    /// benchmark that needs it. The secret must be the node's and set in the runner's
    /// environment (`PRGATE_SECRET_<NAME>`).
    pub fn allow_secret(mut self, name: &str) -> Result<ContainerEnv, EnvError> {
        if !self.node_secrets.contains(name) {
            return Err(EnvError::UnknownSecret { name: name.to_owned(), node: self.node.clone() });
        }
        let variable = secret_env_var(name);
        if std::env::var_os(&variable).is_none_or(|value| value.is_empty()) {
            return Err(EnvError::UnsetSecret { name: name.to_owned(), variable });
        }
        self.secrets.insert(name.to_owned());
        Ok(self)
    }

    /// The plain variables, sorted by name.
    pub fn vars(&self) -> impl Iterator<Item = (&str, &str)> {
        self.vars.iter().map(|(name, value)| (name.as_str(), value.as_str()))
    }

    /// The secrets let in, by name, sorted.
    pub fn secrets(&self) -> impl Iterator<Item = &str> {
        self.secrets.iter().map(String::as_str)
    }

    /// Checks the plain variables again against the secrets' values as they are now: a
    /// secret set after a variable was must not ride in with it.
    pub(super) fn recheck(&self) -> Result<(), EnvError> {
        for (name, value) in &self.vars {
            if let Some(secret) = self.secret_in(value) {
                return Err(EnvError::SecretValue { name: name.clone(), secret });
            }
        }
        Ok(())
    }

    /// The names of the node's secrets, as the env was built with them.
    pub(super) fn node_secrets(&self) -> &BTreeSet<String> {
        &self.node_secrets
    }

    /// The secret whose value (non-empty, as the runner's environment has it) is in `value`.
    fn secret_in(&self, value: &str) -> Option<String> {
        self.node_secrets
            .iter()
            .find(|secret| {
                std::env::var_os(secret_env_var(secret)).is_some_and(|held| {
                    !held.is_empty() && value.contains(&*held.to_string_lossy())
                })
            })
            .cloned()
    }
}

/// A variable's name: ASCII letters, digits and `_`, not starting with a digit.
fn check_name(name: &str) -> Result<(), EnvError> {
    let fits = name.starts_with(|char: char| char.is_ascii_alphabetic() || char == '_')
        && name.chars().all(|char| char.is_ascii_alphanumeric() || char == '_');
    if fits { Ok(()) } else { Err(EnvError::Name { name: name.to_owned() }) }
}
