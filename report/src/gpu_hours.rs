//! What a run cost in GPU time, by model and phase, against the plan's estimate: one line for
//! the comment's header and the job summary (docs/gpu-hours.md).
//!
//! Pure: the runner's measurements (`prgate_runner::gpu_time`, converted by the binary) in, a
//! line of words out; the comment escapes it where it shows it.

/// One model's (or the common checks') GPU time.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelTime {
    /// The model, or `None` for the common checks.
    pub model: Option<String>,
    /// The GPUs its run holds.
    pub gpus: u32,
    /// Its phases, in the runner's order (install, servers, tests, accuracy, speed).
    pub phases: Vec<PhaseTime>,
    /// How its two servers shared the node, what that took and why, in the runner's words
    /// (`prgate_runner::gpu_time::ServersUsed::words`), when its servers ran.
    pub servers: Option<String>,
}

/// One phase of a model's GPU time.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseTime {
    /// The phase's name (`install`, `servers`, `tests`, `accuracy`, `speed`).
    pub phase: String,
    /// GPU-seconds measured: wall time times the GPUs held.
    pub gpu_seconds: f64,
    /// GPU-seconds the plan's estimate gave it, when there is one.
    pub estimate_gpu_seconds: Option<u64>,
}

impl ModelTime {
    fn measured(&self) -> f64 {
        self.phases.iter().map(|phase| phase.gpu_seconds).sum()
    }

    fn estimated(&self) -> Option<u64> {
        self.phases.iter().map(|phase| phase.estimate_gpu_seconds).sum()
    }
}

/// The line: per model its GPU time against its estimate, its phases and how its servers shared
/// the node, then the total, e.g. `alpha (2 GPUs): 1.2 GPU-h of 3.0 estimated · install 0.1
/// GPU-h, servers 0.3 GPU-h, ... · one server at a time, switched by ...: 2 loads, ...`.
/// Models that held no GPU (the common checks) are left out; `None` when no model did.
pub fn words(models: &[ModelTime]) -> Option<String> {
    let holding: Vec<&ModelTime> = models.iter().filter(|model| model.gpus > 0).collect();
    if holding.is_empty() {
        return None;
    }
    let mut parts: Vec<String> = holding
        .iter()
        .map(|model| {
            let name = model.model.as_deref().unwrap_or("common");
            let estimate = model
                .estimated()
                .map(|seconds| format!(" of {} estimated", amount(seconds as f64)))
                .unwrap_or_default();
            let phases: Vec<String> = model
                .phases
                .iter()
                .filter(|phase| phase.gpu_seconds > 0.0)
                .map(|phase| format!("{} {}", phase.phase, amount(phase.gpu_seconds)))
                .collect();
            let gpus =
                if model.gpus == 1 { "1 GPU".to_owned() } else { format!("{} GPUs", model.gpus) };
            let phases = if phases.is_empty() {
                String::new()
            } else {
                format!(" · {}", phases.join(", "))
            };
            let servers =
                model.servers.as_ref().map(|words| format!(" · {words}")).unwrap_or_default();
            format!("{name} ({gpus}): {}{estimate}{phases}{servers}", amount(model.measured()))
        })
        .collect();
    if holding.len() > 1 {
        let measured: f64 = holding.iter().map(|model| model.measured()).sum();
        let estimated: Option<u64> = holding.iter().map(|model| model.estimated()).sum();
        let estimate = estimated
            .map(|seconds| format!(" of {} estimated", amount(seconds as f64)))
            .unwrap_or_default();
        parts.push(format!("total {}{estimate}", amount(measured)));
    }
    Some(parts.join("; "))
}

/// GPU-seconds in the unit that reads best: GPU-h from a tenth of an hour, GPU-min from a tenth
/// of a minute, else GPU-s.
fn amount(gpu_seconds: f64) -> String {
    if gpu_seconds >= 360.0 {
        format!("{:.1} GPU-h", gpu_seconds / 3600.0)
    } else if gpu_seconds >= 6.0 {
        format!("{:.1} GPU-min", gpu_seconds / 60.0)
    } else {
        format!("{gpu_seconds:.1} GPU-s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(name: Option<&str>, gpus: u32, phases: &[(&str, f64, Option<u64>)]) -> ModelTime {
        ModelTime {
            model: name.map(str::to_owned),
            gpus,
            phases: phases
                .iter()
                .map(|&(phase, gpu_seconds, estimate_gpu_seconds)| PhaseTime {
                    phase: phase.to_owned(),
                    gpu_seconds,
                    estimate_gpu_seconds,
                })
                .collect(),
            servers: None,
        }
    }

    #[test]
    fn one_line_per_model_with_its_estimate_and_a_total() {
        let check = |models: &[ModelTime], expect: Option<&str>| {
            assert_eq!(words(models).as_deref(), expect);
        };
        check(&[], None);
        check(&[model(None, 0, &[("tests", 0.0, Some(600))])], None);
        check(
            &[model(
                Some("kimi"),
                16,
                &[
                    ("install", 4800.0, Some(9600)),
                    ("servers", 0.0, Some(9600)),
                    ("speed", 28800.0, Some(144_000)),
                ],
            )],
            Some(
                "kimi (16 GPUs): 9.3 GPU-h of 45.3 GPU-h estimated · install 1.3 GPU-h, speed 8.0 GPU-h",
            ),
        );
        check(
            &[
                model(Some("a"), 1, &[("tests", 30.0, None)]),
                model(Some("b"), 2, &[("tests", 3.0, Some(1200))]),
                model(None, 0, &[("tests", 100.0, Some(600))]),
            ],
            Some(
                "a (1 GPU): 0.5 GPU-min · tests 0.5 GPU-min; b (2 GPUs): 3.0 GPU-s of 0.3 GPU-h estimated · tests 3.0 GPU-s; total 0.6 GPU-min",
            ),
        ); // The servers' design, after the phases.
        let blocked = ModelTime {
            servers: Some("one server at a time, blocked reloads (blocks of 2 runs): 6 loads, 0 wakes, 5 switches, because base's recipe says server.memory-api = \"none\"".to_owned()),
            ..model(Some("a"), 1, &[("speed", 30.0, None)])
        };
        check(
            &[blocked],
            Some(
                "a (1 GPU): 0.5 GPU-min · speed 0.5 GPU-min · one server at a time, blocked reloads (blocks of 2 runs): 6 loads, 0 wakes, 5 switches, because base's recipe says server.memory-api = \"none\"",
            ),
        );
    }
}
