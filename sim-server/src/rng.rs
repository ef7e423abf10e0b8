//! The simulated server's random draws: a seeded SplitMix64 generator, normal noise, and a
//! uniform number fixed by a prompt.
//!
//! Small and deterministic on purpose: the same seed gives the same draws on every platform,
//! so a profile reproduces a run. Nothing here is for cryptography or statistics beyond noise.

/// The smallest factor noise may put on a request's times, so a time never becomes zero or
/// negative however large the coefficient of variation.
pub(super) const MIN_NOISE_FACTOR: f64 = 0.05;

/// SplitMix64 (Steele, Lea and Flood, 2014): one 64-bit state, a good spread from any seed.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The generator of one request: its own stream, from the profile's seed and the request's
    /// number (its order of arrival).
    pub(super) fn for_request(seed: u64, request: u64) -> SplitMix64 {
        SplitMix64::new(mix(seed ^ mix(request)))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        mix(self.state)
    }

    /// A uniform number in [0, 1), with 53 random bits.
    pub(super) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1_u64 << 53) as f64
    }

    /// A standard normal number (Box-Muller).
    pub(super) fn standard_normal(&mut self) -> f64 {
        // 1 - u is in (0, 1], so its logarithm is finite.
        let radius = (-2.0 * (1.0 - self.next_f64()).ln()).sqrt();
        let angle = std::f64::consts::TAU * self.next_f64();
        radius * angle.cos()
    }

    /// The factor noise puts on one request's times: normal with mean 1 and standard deviation
    /// `cv`, at least [`MIN_NOISE_FACTOR`].
    pub(super) fn noise_factor(&mut self, cv: f64) -> f64 {
        if cv == 0.0 {
            return 1.0;
        }
        (1.0 + cv * self.standard_normal()).max(MIN_NOISE_FACTOR)
    }
}

/// The seed of a request's own `seed` under the profile's: a different stream for every
/// request seed, never the profile's own (the unseeded draw).
pub(super) fn seeded(profile_seed: u64, request_seed: u64) -> u64 {
    mix(profile_seed ^ mix(request_seed.wrapping_add(GOLDEN_GAMMA)))
}

/// A uniform number in [0, 1) fixed by the seed and the prompt's text: the same prompt always
/// draws the same number, whatever else the server was asked.
pub(super) fn prompt_uniform(seed: u64, prompt: &str) -> f64 {
    // FNV-1a over the bytes, then SplitMix64's finaliser for the spread.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in prompt.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    SplitMix64::new(seed ^ hash).next_f64()
}

const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

fn mix(value: u64) -> u64 {
    let mut z = value;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
