//! End-to-end tests of the `prgate` binary: the real program on real git repositories that the
//! tests build in temporary directories.

mod demo;
mod plan;
mod support;
