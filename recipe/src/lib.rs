//! The formats people write and the node's administrator writes, read from text and checked:
//! a model's recipe (from the PR's tree) and a node's profile (trusted, local to the node).
//!
//! Its contract: text in, checked values or an error naming the file, the key and the value
//! out ([`prgate_scope::ConfigError`], the one error shape of every config file). It opens no
//! file, starts no process or container, and touches no socket or cluster: the caller reads
//! the text (the runner from a commit's tree or the node's disk, `prgate plan --estimate` on a
//! laptop), and running what a recipe says is the runner's (`prgate-runner`, which re-exports
//! both modules at its root). It depends on `prgate-scope` for that error shape and the plan's
//! renames, and on `prgate-gate` for the wire types a recipe answers in (evidence's checks and
//! not-run reasons, the job plan's contract changes, the gate's accuracy-repeat settings).
//!
//! - [`recipe`]: a model's recipe (`test/e2e/<model>.toml`, `docs/recipe.md`): its server,
//!   tests, timing scripts, accuracy benchmarks and speed sweep, its topology, its time and
//!   stall limits, the commands split into argv without a shell, whether it runs on a node, and
//!   what each side runs by (the contract);
//! - [`node`]: the node profile (`docs/node-profile.md`): its hardware, GPUs, image,
//!   checkpoints, secrets, directories and the `[health]` table with its drain policy, and the
//!   checks of names and paths that the recipe shares.

pub mod node;
pub mod recipe;
