//! The metadata endpoints a router asks a worker for before it registers it: SGLang's
//! `/server_info` and `/model_info` and their older names `/get_server_info` and
//! `/get_model_info`.
//!
//! sglang-router 0.3.2 calls all four once `/health` answers (measured: `docs/topology.md`); it
//! names the worker's model by `served_model_name` (else `model_path`), and loads a tokenizer
//! from `tokenizer_path` or `model_path` when either is given. So the simulated server gives its
//! model's name as `served_model_name` and no path: a router never tries to fetch a tokenizer of
//! a model that does not exist.

use serde_json::json;

use super::Profile;
use super::disaggregation::Mode;

/// `/server_info` and `/get_server_info`.
pub(crate) fn server_info_json(profile: &Profile) -> String {
    let mode = match profile.disaggregation.as_ref().map(|pd| pd.mode) {
        None => "null",
        Some(Mode::Prefill) => "prefill",
        Some(Mode::Decode) => "decode",
    };
    json!({
        "served_model_name": profile.model,
        "version": concat!("prgate-sim-server ", env!("CARGO_PKG_VERSION")),
        "disaggregation_mode": mode,
        "max_running_requests": profile.max_concurrency.map(std::num::NonZeroUsize::get),
    })
    .to_string()
}

/// `/model_info` and `/get_model_info`.
pub(crate) fn model_info_json() -> String {
    json!({
        "is_generation": true,
        "model_type": "prgate-sim",
        "architectures": ["PrgateSimForCausalLM"],
    })
    .to_string()
}
