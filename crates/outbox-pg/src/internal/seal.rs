//! Sealing what must not be read at rest (webhook secrets and header values, SPEC §7.6).
//!
//! A [`SealKey`] is 32 random bytes, given as base64 (`[webhooks] seal_key`, env
//! `OUTBOX_WEBHOOK_SEAL_KEY`). [`SealKey::seal`] encrypts with ChaCha20-Poly1305 under a
//! fresh random 96-bit nonce and binds the result to a context (the row's id), so a sealed
//! value copied into another row does not open there. The sealed form is one version
//! byte, the nonce and the ciphertext with its tag. [`SealKey::open`] refuses anything
//! altered, sealed under another key, or for another context.
//!
//! A key seals at most a few values per subscription and rotation, far below the 2³²
//! messages under which random 96-bit nonces stay safe.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};

/// The first byte of every sealed value: the format (ChaCha20-Poly1305, random nonce).
const VERSION: u8 = 1;

/// The key that seals and opens; its bytes are never printed.
pub struct SealKey {
    key: LessSafeKey,
}

/// A seal key that cannot be used, or a sealed value that does not open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SealError(String);

impl SealKey {
    /// The key whose base64 is `text`: exactly 32 bytes.
    pub fn parse(text: &str) -> Result<SealKey, SealError> {
        let bytes = BASE64
            .decode(text.trim())
            .map_err(|_| SealError("a seal key is the base64 of 32 random bytes; this is not base64".into()))?;
        if bytes.len() != 32 {
            return Err(SealError(format!("a seal key is the base64 of 32 random bytes, this has {}", bytes.len())));
        }
        let key = UnboundKey::new(&CHACHA20_POLY1305, &bytes).map_err(|_| SealError("a key ring refused".into()))?;
        Ok(SealKey { key: LessSafeKey::new(key) })
    }

    /// A new random key, as base64 (what `outbox dev` makes and keeps).
    pub fn generate() -> Result<String, SealError> {
        Ok(BASE64.encode(random::<32>()?))
    }

    /// `plain` sealed for `context`.
    pub fn seal(&self, context: &str, plain: &[u8]) -> Result<Vec<u8>, SealError> {
        let nonce = random::<NONCE_LEN>()?;
        let mut sealed = Vec::with_capacity(1 + NONCE_LEN + plain.len() + CHACHA20_POLY1305.tag_len());
        sealed.push(VERSION);
        sealed.extend_from_slice(&nonce);
        let mut body = plain.to_vec();
        self.key
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(context.as_bytes()), &mut body)
            .map_err(|_| SealError("sealing failed".into()))?;
        sealed.extend_from_slice(&body);
        Ok(sealed)
    }

    /// What `sealed` holds, when it was sealed under this key for `context` and not altered.
    pub fn open(&self, context: &str, sealed: &[u8]) -> Result<Vec<u8>, SealError> {
        let refused = || SealError(format!("the sealed value of {context} does not open with this seal key"));
        let (&version, rest) = sealed.split_first().ok_or_else(refused)?;
        if version != VERSION || rest.len() < NONCE_LEN {
            return Err(refused());
        }
        let (nonce, body) = rest.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| refused())?;
        let mut body = body.to_vec();
        let plain = self.key.open_in_place(nonce, Aad::from(context.as_bytes()), &mut body).map_err(|_| refused())?;
        Ok(plain.to_vec())
    }
}

impl fmt::Debug for SealKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SealKey(<32 bytes>)")
    }
}

/// `N` bytes from the operating system's generator.
pub(crate) fn random<const N: usize>() -> Result<[u8; N], SealError> {
    let mut bytes = [0u8; N];
    SystemRandom::new().fill(&mut bytes).map_err(|_| SealError("the system's random generator failed".into()))?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_opens_only_with_its_key_and_context() {
        let key = SealKey::parse(&SealKey::generate().unwrap()).unwrap();
        let sealed = key.seal("wh_1", b"whsec_secret").unwrap();
        assert_eq!(key.open("wh_1", &sealed).unwrap(), b"whsec_secret");
        assert!(!sealed.windows(6).any(|w| w == b"secret"), "the plain text is not in the sealed form");
        assert_ne!(key.seal("wh_1", b"whsec_secret").unwrap(), sealed, "a fresh nonce each time");

        assert!(key.open("wh_2", &sealed).is_err(), "another row's context");
        let other = SealKey::parse(&SealKey::generate().unwrap()).unwrap();
        assert!(other.open("wh_1", &sealed).is_err(), "another key");
        let mut altered = sealed.clone();
        *altered.last_mut().unwrap() ^= 1;
        assert!(key.open("wh_1", &altered).is_err(), "an altered value");
        assert!(key.open("wh_1", &[]).is_err() && key.open("wh_1", &[2, 0, 0]).is_err());
    }

    #[test]
    fn a_key_is_the_base64_of_32_bytes() {
        assert!(SealKey::parse(&BASE64.encode([7u8; 32])).is_ok());
        assert!(SealKey::parse(&BASE64.encode([7u8; 16])).unwrap_err().to_string().contains("this has 16"));
        assert!(SealKey::parse("not base64!").is_err());
        assert!(!format!("{:?}", SealKey::parse(&BASE64.encode([7u8; 32])).unwrap()).contains("Bwc"));
    }
}
