//! A profile's keys given on a command line: [`Overrides`] holds what each flag gave (a flag is
//! `--` and the key of a profile file: `--ttft-ms` is `ttft-ms`), and [`Profile::overridden`]
//! sets them, each checked by the same rule as the key in a file (a time in milliseconds, a
//! probability, a coefficient of variation, a port, one word), so a flag and a file can never
//! disagree on what is valid. An error names the flag.
//!
//! What it leaves to others: parsing the command line (the binary's clap flags fill
//! [`Overrides`]), reading a profile file ([`Profile::load`]).

use std::path::PathBuf;

use crate::disaggregation::{Disaggregation, DisaggregationError, Mode};
use crate::profile::{MemoryApi, Profile, ProfileError, bounded, milliseconds};

/// What a command line gives of a profile: `None` (or `false`) leaves the key as it is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    pub model: Option<String>,
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub noise_cv: Option<f64>,
    pub seed: Option<u64>,
    pub accuracy: Option<f64>,
    pub startup_delay_ms: Option<f64>,
    pub wake_delay_ms: Option<f64>,
    pub memory_api: Option<MemoryApi>,
    pub vram_dir: Option<PathBuf>,
    pub vram_bytes: Option<u64>,
    /// `true` sets `release-keeps-memory`; `false` leaves it.
    pub release_keeps_memory: bool,
    pub retake_memory_after_ms: Option<f64>,
    pub busy_after_release_ms: Option<f64>,
    /// `true` sets `never-healthy`; `false` leaves it.
    pub never_healthy: bool,
    pub die_after_requests: Option<u64>,
    pub eos_after_tokens: Option<usize>,
    pub error_rate: Option<f64>,
    /// `true` sets `monokernel` (the flag is `--enable-amd-monokernel`, as SGLang's).
    pub monokernel: bool,
    pub log_file: Option<PathBuf>,
    /// The `[disaggregation]` table's keys, each flag `--disaggregation-` and the key.
    pub disaggregation: DisaggregationOverrides,
}

/// The `[disaggregation]` table's keys given on a command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DisaggregationOverrides {
    /// Makes the server one half of a disaggregated model (a table with the defaults when the
    /// profile has none).
    pub mode: Option<Mode>,
    pub bootstrap_port: Option<u16>,
    pub transfer_backend: Option<String>,
    pub transport: Option<String>,
}

/// A flag whose value its key's rule refuses.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OverrideError {
    #[error("--{}: {}", .0.key(), .0.problem())]
    Value(ProfileError),
    #[error("--disaggregation-{}: {}", .0.key(), .0.problem())]
    Disaggregation(DisaggregationError),
    #[error(
        "the --disaggregation-* flags need --disaggregation-mode (or a profile's [disaggregation] table)"
    )]
    NoDisaggregation,
}

impl From<ProfileError> for OverrideError {
    fn from(error: ProfileError) -> OverrideError {
        OverrideError::Value(error)
    }
}

impl Profile {
    /// This profile with `overrides` set, each checked as its key in a file is.
    pub fn overridden(mut self, overrides: &Overrides) -> Result<Profile, OverrideError> {
        let given = overrides.clone();
        set(given.model, &mut self.model);
        let millis = |key, value: Option<f64>| value.map(|ms| milliseconds(key, ms)).transpose();
        set(millis("ttft-ms", given.ttft_ms)?, &mut self.time_to_first_token);
        set(millis("tpot-ms", given.tpot_ms)?, &mut self.time_per_output_token);
        set(given.noise_cv.map(|cv| bounded("noise-cv", cv)).transpose()?, &mut self.noise);
        set(given.seed, &mut self.seed);
        set(given.accuracy.map(|p| bounded("accuracy", p)).transpose()?, &mut self.accuracy);
        set(millis("startup-delay-ms", given.startup_delay_ms)?, &mut self.startup_delay);
        set(millis("wake-delay-ms", given.wake_delay_ms)?, &mut self.wake_delay);
        set(given.memory_api, &mut self.memory_api);
        self.vram_dir = given.vram_dir.or(self.vram_dir);
        set(given.vram_bytes, &mut self.vram_bytes);
        self.release_keeps_memory |= given.release_keeps_memory;
        let retake = millis("retake-memory-after-ms", given.retake_memory_after_ms)?;
        self.retake_memory_after = retake.or(self.retake_memory_after);
        let busy = millis("busy-after-release-ms", given.busy_after_release_ms)?;
        self.busy_after_release = busy.or(self.busy_after_release);
        self.never_healthy |= given.never_healthy;
        self.die_after_requests = given.die_after_requests.or(self.die_after_requests);
        self.eos_after_tokens = given.eos_after_tokens.or(self.eos_after_tokens);
        set(given.error_rate.map(|p| bounded("error-rate", p)).transpose()?, &mut self.error_rate);
        self.monokernel |= given.monokernel;
        self.log_file = given.log_file.or(self.log_file);
        self.disaggregation = disaggregation(self.disaggregation, given.disaggregation)?;
        Ok(self)
    }
}

/// Sets `to` to `value` when there is one.
fn set<T>(value: Option<T>, to: &mut T) {
    if let Some(value) = value {
        *to = value;
    }
}

/// The profile's `[disaggregation]` table (`table`) with the flags' values set.
fn disaggregation(
    table: Option<Disaggregation>,
    given: DisaggregationOverrides,
) -> Result<Option<Disaggregation>, OverrideError> {
    let table = match (table, given.mode) {
        (Some(mut table), Some(mode)) => {
            table.mode = mode;
            Some(table)
        }
        (None, Some(mode)) => Some(Disaggregation::new(mode)),
        (table, None) => table,
    };
    let values = (given.bootstrap_port, given.transfer_backend, given.transport);
    let Some(mut table) = table else {
        return match values {
            (None, None, None) => Ok(None),
            _ => Err(OverrideError::NoDisaggregation),
        };
    };
    table.set(values.0, values.1, values.2).map_err(OverrideError::Disaggregation)?;
    Ok(Some(table))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{DisaggregationOverrides, OverrideError, Overrides};
    use crate::Profile;
    use crate::disaggregation::Mode;

    fn refused(overrides: &Overrides) -> String {
        match Profile::default().overridden(overrides) {
            Ok(profile) => panic!("accepted: {profile:?}"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn a_flag_is_checked_as_its_key_in_a_file_is_and_named() {
        let cases: [(Overrides, &str, &str); 6] = [
            (Overrides { ttft_ms: Some(-1.0), ..Overrides::default() }, "ttft-ms = -1", "-1"),
            (Overrides { tpot_ms: Some(f64::NAN), ..Overrides::default() }, "tpot-ms = nan", "NaN"),
            (Overrides { noise_cv: Some(-0.5), ..Overrides::default() }, "noise-cv = -0.5", "-0.5"),
            (Overrides { accuracy: Some(1.5), ..Overrides::default() }, "accuracy = 1.5", "1.5"),
            (
                Overrides { error_rate: Some(-0.1), ..Overrides::default() },
                "error-rate = -0.1",
                "-0.1",
            ),
            (
                Overrides { wake_delay_ms: Some(f64::INFINITY), ..Overrides::default() },
                "wake-delay-ms = inf",
                "inf",
            ),
        ];
        for (overrides, file, value) in cases {
            let flag = refused(&overrides);
            let in_file = Profile::from_toml_str(file).expect_err(file).to_string();
            let key = file.split(' ').next().unwrap_or_default();
            // The same problem, named by the flag instead of the key.
            let problem = flag.strip_prefix(&format!("--{key}: ")).expect(&flag);
            assert!(problem.starts_with(value), "{flag}");
            assert!(in_file.contains(problem), "{flag} ~ {in_file}");
        }
    }

    #[test]
    fn the_disaggregation_flags_are_checked_as_the_tables_keys_are() {
        let pd = |port, backend: &str| Overrides {
            disaggregation: DisaggregationOverrides {
                mode: Some(Mode::Prefill),
                bootstrap_port: port,
                transfer_backend: Some(backend.to_owned()),
                transport: None,
            },
            ..Overrides::default()
        };
        assert_eq!(
            refused(&pd(Some(0), "nixl")),
            "--disaggregation-bootstrap-port: 0 is not a port"
        );
        assert_eq!(
            refused(&pd(None, "two words")),
            "--disaggregation-transfer-backend: \"two words\" is not one word of letters, digits, '-' and '_'"
        );
        let file = "[disaggregation]\nmode = \"prefill\"\ntransfer-backend = \"two words\"\n";
        let in_file = Profile::from_toml_str(file).expect_err("a bad word").to_string();
        assert!(
            in_file.contains("'disaggregation.transfer-backend': \"two words\" is not one word"),
            "{in_file}"
        );
        let served = Profile::default().overridden(&pd(Some(9000), "nixl")).expect("valid");
        let table = served.disaggregation.expect("a table");
        assert_eq!((table.mode, table.bootstrap_port), (Mode::Prefill, 9000));
        assert_eq!((table.transfer_backend.as_str(), table.transport.as_str()), ("nixl", "rdma"));
        // Without a mode, from neither the flags nor the profile, the other flags are refused.
        let no_mode = Overrides {
            disaggregation: DisaggregationOverrides {
                transport: Some("tcp".to_owned()),
                ..DisaggregationOverrides::default()
            },
            ..Overrides::default()
        };
        assert_eq!(Profile::default().overridden(&no_mode), Err(OverrideError::NoDisaggregation));
    }

    #[test]
    fn what_no_flag_gives_is_the_profiles() {
        let file = "ttft-ms = 120\nnoise-cv = 0.02\nnever-healthy = true\ndie-after-requests = 3\n";
        let profile = Profile::from_toml_str(file).expect("a profile");
        assert_eq!(profile.clone().overridden(&Overrides::default()), Ok(profile.clone()));
        let given = Overrides { tpot_ms: Some(2.5), seed: Some(7), ..Overrides::default() };
        let overridden = profile.clone().overridden(&given).expect("valid");
        assert_eq!(overridden.time_per_output_token, Duration::from_micros(2500));
        assert_eq!(overridden.seed, 7);
        assert_eq!(overridden.time_to_first_token, Duration::from_millis(120));
        assert_eq!((overridden.never_healthy, overridden.die_after_requests), (true, Some(3)));
    }
}
