//! The gate: turns a plan and the evidence from the GPU nodes into a verdict.
//!
//! It will own the rules (CODEOWNERS policy, PR title), the statistics that compare base and PR
//! (paired speed tests, accuracy tolerances) and the verdict format. It does no I/O: the binary
//! reads files and hands it plain data. Nothing here yet; see issue 3.
