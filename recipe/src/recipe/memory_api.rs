//! The recipe's `server.memory-api` key: which engine memory API the model's server speaks, so
//! a one-at-a-time node switches its servers without reloading them (docs/recipe.md).
//!
//! `probe` (the default) leaves it to the runner to find out at the first release; `sglang` and
//! `vllm` name the API (no probe); `none` says the server has neither (it is stopped and loaded
//! again, no probe). It is base's contract like the rest of the server's keys.
//!
//! What it leaves to others: the requests themselves and what a switch does
//! (`prgate_runner::run::memory`).

use std::fmt;

/// What `server.memory-api` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MemoryApiKey {
    /// Not said: the runner probes SGLang's API, then vLLM's, at the first release.
    #[default]
    Probe,
    /// SGLang's `/release_memory_occupation` and `/resume_memory_occupation`.
    Sglang,
    /// vLLM's sleep mode: `/sleep` and `/wake_up`.
    Vllm,
    /// Neither: the server is stopped to make room, and loaded again.
    None,
}

/// The values the key takes, in the order the docs list them.
pub const VALUES: [(&str, MemoryApiKey); 4] = [
    ("probe", MemoryApiKey::Probe),
    ("sglang", MemoryApiKey::Sglang),
    ("vllm", MemoryApiKey::Vllm),
    ("none", MemoryApiKey::None),
];

impl MemoryApiKey {
    /// The value named `text`, if it is one of [`VALUES`].
    pub fn parse(text: &str) -> Option<Self> {
        VALUES.iter().find(|(name, _)| *name == text).map(|(_, key)| *key)
    }

    /// The value as the recipe writes it.
    pub fn name(self) -> &'static str {
        VALUES.iter().find(|(_, key)| *key == self).map_or("probe", |(name, _)| name)
    }
}

impl fmt::Display for MemoryApiKey {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}
