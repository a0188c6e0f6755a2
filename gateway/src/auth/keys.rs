//! The public keys of a JWKS file, and the task that picks up a changed file.

use anyhow::{bail, Context};
use jsonwebtoken::jwk::{
    AlgorithmParameters, EllipticCurve, Jwk, JwkSet, KeyAlgorithm, PublicKeyUse,
};
use jsonwebtoken::{Algorithm, DecodingKey};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often the file is read and compared with the keys in use.
pub const RELOAD_EVERY: Duration = Duration::from_millis(500);

/// One verification key: the only algorithm it verifies, and the key.
pub struct Key {
    pub alg: Algorithm,
    pub key: DecodingKey,
}

/// The keys by `kid`.
pub type Keys = HashMap<String, Arc<Key>>;

/// The keys of a JWKS file. Readers take the current set; [`JwksFile::watch`] swaps in a new
/// one when the file's content changes, and keeps the old one (with an error logged) if the
/// new content does not parse, so a bad deploy of the file never locks every buyer out.
pub struct JwksFile {
    path: PathBuf,
    keys: RwLock<Arc<Keys>>,
    /// The content last seen (a JWKS file is a few KiB): a change is a change of content,
    /// whatever the file's timestamps and size say.
    seen: Mutex<Vec<u8>>,
}

impl JwksFile {
    /// Reads the file; it must hold at least one usable key.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let bytes = read_bytes(path)?;
        let keys =
            parse_bytes(&bytes).with_context(|| format!("the JWKS file {}", path.display()))?;
        Ok(Self {
            path: path.to_owned(),
            keys: RwLock::new(Arc::new(keys)),
            seen: Mutex::new(bytes),
        })
    }

    /// The key named `kid`.
    pub fn get(&self, kid: &str) -> Option<Arc<Key>> {
        self.keys.read().expect("keys lock").get(kid).cloned()
    }

    /// Reloads the file if its content changed. Returns whether it did.
    pub fn reload_if_changed(&self) -> bool {
        let mut seen = self.seen.lock().expect("seen lock");
        let bytes = match read_bytes(&self.path) {
            Ok(b) => b,
            Err(e) => {
                // Once per disappearance, not at every check.
                if !seen.is_empty() {
                    tracing::warn!(
                        error = format!("{e:#}"),
                        "cannot read the JWKS file; keeping the keys in use"
                    );
                    seen.clear();
                }
                return false;
            }
        };
        if *seen == bytes {
            return false;
        }
        let parsed = parse_bytes(&bytes);
        *seen = bytes;
        match parsed {
            Ok(keys) => {
                tracing::info!(path = %self.path.display(), keys = keys.len(), "reloaded the JWKS file");
                *self.keys.write().expect("keys lock") = Arc::new(keys);
                true
            }
            Err(e) => {
                tracing::error!(path = %self.path.display(), error = format!("{e:#}"), "the changed JWKS file is unusable; keeping the previous keys");
                false
            }
        }
    }

    /// Checks the file every `RELOAD_EVERY` until `stop`.
    pub async fn watch(self: Arc<Self>, stop: CancellationToken) {
        let mut tick = tokio::time::interval(RELOAD_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            let me = self.clone();
            // A small file read: off the runtime's threads all the same.
            let _ = tokio::task::spawn_blocking(move || me.reload_if_changed()).await;
        }
    }
}

fn read_bytes(path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading the JWKS file {}", path.display()))
}

fn parse_bytes(bytes: &[u8]) -> anyhow::Result<Keys> {
    parse(std::str::from_utf8(bytes).context("not UTF-8")?)
}

/// The usable keys of a JWKS document. A key without a `kid`, meant for encryption, of
/// another type, or whose `alg` is not the one its type implies is an error: the file is the
/// operator's, and a key silently ignored would lock its buyers out.
pub fn parse(text: &str) -> anyhow::Result<Keys> {
    let set: JwkSet = serde_json::from_str(text).context("not a JWKS document")?;
    let mut keys = Keys::new();
    for jwk in &set.keys {
        let kid = jwk.common.key_id.clone().context("a key has no kid")?;
        let key = key(jwk).with_context(|| format!("key {kid:?}"))?;
        if keys.insert(kid.clone(), Arc::new(key)).is_some() {
            bail!("two keys have the kid {kid:?}");
        }
    }
    if keys.is_empty() {
        bail!("no keys");
    }
    Ok(keys)
}

/// A key's algorithm follows from its type and curve: Ed25519 → EdDSA, P-256 → ES256,
/// RSA → RS256. Nothing else is accepted, and a symmetric (`oct`) key never is.
fn key(jwk: &Jwk) -> anyhow::Result<Key> {
    if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
        bail!("is meant for encryption (use: enc)");
    }
    let alg = match &jwk.algorithm {
        AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => {
            Algorithm::EdDSA
        }
        AlgorithmParameters::EllipticCurve(p) if p.curve == EllipticCurve::P256 => Algorithm::ES256,
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::OctetKey(_) => {
            bail!("is a shared secret (kty oct); use SECKILL_AUTH_HS256_SECRET")
        }
        _ => bail!("is not an Ed25519, P-256 or RSA public key"),
    };
    let declared = jwk.common.key_algorithm;
    let implied = match alg {
        Algorithm::EdDSA => KeyAlgorithm::EdDSA,
        Algorithm::ES256 => KeyAlgorithm::ES256,
        _ => KeyAlgorithm::RS256,
    };
    if declared.is_some_and(|d| d != implied) {
        bail!("declares alg {declared:?}, but only {implied:?} is accepted for its type");
    }
    let key = DecodingKey::from_jwk(jwk).context("unusable key material")?;
    Ok(Key { alg, key })
}
