//! Content keys: the SHA-256 of some bytes, for everything prgate names by its content (a
//! recipe's hash in provenance and the job plan, a cache entry's file, an install's log, a
//! run's id).
//!
//! A [`Key`] is shown as `sha256:` and 64 hex digits; [`Key::short`] is its first
//! [`SHORT_DIGITS`] hex digits, for names that must stay short (container and run ids, log
//! files); [`Key::hex`] is all 64, for a file named by its key. The hash is stable across runs,
//! machines and Rust versions (std's hashers are not). Nothing here is a secret or a signature:
//! a key only tells contents apart.

use std::fmt;

use sha2::{Digest as _, Sha256};

/// How many hex digits [`Key::short`] keeps (48 bits).
pub const SHORT_DIGITS: usize = 12;

/// The SHA-256 of some bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key([u8; 32]);

impl Key {
    /// The key of `bytes`.
    pub fn of(bytes: &[u8]) -> Key {
        Key(Sha256::digest(bytes).into())
    }

    /// All 64 hex digits, without the `sha256:` prefix.
    pub fn hex(&self) -> String {
        self.0.iter().map(|byte| format!("{byte:02x}")).collect()
    }

    /// The first [`SHORT_DIGITS`] hex digits.
    pub fn short(&self) -> String {
        let mut hex = self.hex();
        hex.truncate(SHORT_DIGITS);
        hex
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_sha256() {
        // FIPS 180-2's test vectors.
        let cases = [
            ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ];
        for (text, expect) in cases {
            let key = Key::of(text.as_bytes());
            assert_eq!(key.to_string(), format!("sha256:{expect}"), "{text:?}");
            assert_eq!(key.hex(), expect, "{text:?}");
            assert_eq!(key.short(), expect[..SHORT_DIGITS], "{text:?}");
        }
    }
}
