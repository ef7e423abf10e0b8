//! The output of a kernel timing script: the one JSON format the runner reads from it.
//!
//! A script named in a recipe's `[[kernel-timing]]` writes one JSON object to the file its
//! `{output}` placeholder names:
//!
//! ```json
//! {
//!   "kernels": [
//!     { "name": "k1_ring", "samples_us": [12.4, 12.1, 12.6] },
//!     { "name": "k2_moe bs=8", "samples_us": [40.2, 39.8] }
//!   ]
//! }
//! ```
//!
//! - `kernels`: one entry per timed kernel (or kernel and shape), at least one;
//! - `name`: the kernel's name, unique in the file; base and PR are paired by it;
//! - `samples_us`: every timed repetition in microseconds, each a positive number, at least one.
//!
//! Other fields are ignored, so a script may add its own (the device, the shapes). The file is
//! written by PR code, so it is read as untrusted data: it is checked, and its names are text
//! to escape wherever they are shown. Comparing the samples is the gate's business.

use std::collections::BTreeSet;

use prgate_gate::evidence::KernelSamples;
use serde::Deserialize;

/// Why a timing script's output was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {problem}")]
pub struct TimingError {
    pub file: String,
    pub problem: String,
}

/// Reads a timing script's JSON. `file` names it in errors.
pub fn parse_timing_output(text: &str, file: &str) -> Result<Vec<KernelSamples>, TimingError> {
    let error = |problem: String| TimingError { file: file.to_owned(), problem };
    let raw: RawOutput = serde_json::from_str(text).map_err(|e| error(e.to_string()))?;
    if raw.kernels.is_empty() {
        return Err(error("kernels is empty: the script timed no kernel".to_owned()));
    }
    let mut names = BTreeSet::new();
    for (index, kernel) in raw.kernels.iter().enumerate() {
        if kernel.name.trim().is_empty() {
            return Err(error(format!("kernels[{index}].name is empty")));
        }
        if !names.insert(kernel.name.as_str()) {
            return Err(error(format!("kernels[{index}].name {:?} is used twice", kernel.name)));
        }
        if kernel.samples_us.is_empty() {
            return Err(error(format!("kernels[{index}].samples_us is empty")));
        }
        if let Some(bad) =
            kernel.samples_us.iter().find(|sample| !(sample.is_finite() && **sample > 0.0))
        {
            return Err(error(format!(
                "kernels[{index}].samples_us has {bad}, which is not a positive number of microseconds"
            )));
        }
    }
    Ok(raw
        .kernels
        .into_iter()
        .map(|kernel| KernelSamples { name: kernel.name, samples_us: kernel.samples_us })
        .collect())
}

#[derive(Deserialize)]
struct RawOutput {
    kernels: Vec<RawKernel>,
}

#[derive(Deserialize)]
struct RawKernel {
    name: String,
    samples_us: Vec<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> String {
        match parse_timing_output(text, "timing.json") {
            Ok(kernels) => kernels
                .iter()
                .map(|kernel| format!("{}: {:?}", kernel.name, kernel.samples_us))
                .collect::<Vec<_>>()
                .join("\n"),
            Err(error) => format!("error: {error}"),
        }
    }

    #[test]
    fn timing_outputs() {
        let cases = [
            r#"{"kernels": [{"name": "k1_ring", "samples_us": [12.4, 12.1]}, {"name": "k2", "samples_us": [3], "shape": "bs=8"}], "device": "MI355X"}"#,
            "not json",
            r#"{"kernels": []}"#,
            r#"{"kernels": [{"name": " ", "samples_us": [1.0]}]}"#,
            r#"{"kernels": [{"name": "a", "samples_us": [1.0]}, {"name": "a", "samples_us": [1.0]}]}"#,
            r#"{"kernels": [{"name": "a", "samples_us": []}]}"#,
            r#"{"kernels": [{"name": "a", "samples_us": [1.0, -2.0]}]}"#,
            r#"{"kernels": [{"name": "a", "samples_ms": [1.0]}]}"#,
        ];
        let rendered: Vec<String> =
            cases.iter().map(|text| format!("{text}\n=> {}", check(text))).collect();
        insta::assert_snapshot!(rendered.join("\n\n"));
    }
}
