//! The callback's checks, in the order a sign-in meets them: the `state`
//! the browser brings back is the one this session started (and not too
//! old); the code is exchanged with the PKCE verifier (a code used once, or
//! stolen into another session, is refused by the provider); the ID token's
//! signature, issuer, audience, expiry and issue time (within
//! [`CLOCK_SKEW`]) and nonce are checked by `openidconnect`. A token signed
//! by a key id Gantry does not know makes it fetch the provider's keys once
//! more (rate-limited) and check again: how a key rotation is picked up.

use super::{describe, identity_from_claims, Oidc, Pending, CLOCK_SKEW, JWKS_REFETCH_EVERY, PENDING_TTL_SECS};
use crate::sso::ExternalIdentity;
use base64::Engine as _;
use openidconnect::{
    core::{CoreIdToken, CoreJsonWebKeySet},
    AuthorizationCode, ClaimsVerificationError, Nonce, PkceCodeVerifier, RequestTokenError, SignatureVerificationError,
    TokenResponse as _,
};
use std::time::Instant;

/// Why a callback did not sign anyone in. None of them says whether an
/// account exists; the page shows a fixed text per [`Failure::code`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// No sign-in under way in this session (used already, never started,
    /// or started too long ago), or a `state` that is not its own.
    Stale,
    /// The provider could not be reached, or did not answer in time.
    Unreachable(String),
    /// The provider or its token said no (a refused or replayed code, a bad
    /// signature, an expired token, a wrong nonce, a missing claim).
    Refused(String),
}

impl Failure {
    /// The word the sign-in page turns into its message.
    pub fn code(&self) -> &'static str {
        match self {
            Failure::Stale => "stale",
            Failure::Unreachable(_) => "unreachable",
            Failure::Refused(_) => "refused",
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Stale => write!(f, "no sign-in of this session matches this answer (state)"),
            Failure::Unreachable(why) => write!(f, "the provider could not be reached: {why}"),
            Failure::Refused(why) => write!(f, "{why}"),
        }
    }
}

/// A signed-in identity, and the ID token (kept for the end-session hint).
#[derive(Clone, Debug)]
pub struct Verified {
    pub identity: ExternalIdentity,
    pub id_token: String,
}

/// Compares the two states without stopping at the first differing byte.
fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Oidc {
    /// The callback: `state` and `code` as the provider sent them back,
    /// `pending` taken (once) from the session.
    pub async fn finish(&self, pending: Pending, state: &str, code: &str, now: i64) -> Result<Verified, Failure> {
        if now.saturating_sub(pending.started) > PENDING_TTL_SECS || !same_secret(state, &pending.state) {
            return Err(Failure::Stale);
        }
        let client = self.client();
        let exchange = client
            .exchange_code(AuthorizationCode::new(code.to_string()))
            .map_err(|e| Failure::Refused(format!("the provider names no token endpoint: {e}")))?
            .set_pkce_verifier(PkceCodeVerifier::new(pending.pkce_verifier));
        let response = exchange.request_async(&self.http).await.map_err(|e| match e {
            RequestTokenError::ServerResponse(r) => {
                Failure::Refused(format!("the provider refused the code: {}", r.error().as_ref()))
            }
            RequestTokenError::Request(e) => Failure::Unreachable(describe(&e)),
            other => Failure::Refused(format!("the provider's token answer: {}", describe(&other))),
        })?;
        let id_token =
            response.id_token().ok_or_else(|| Failure::Refused("the provider's answer has no ID token".into()))?;
        let nonce = Nonce::new(pending.nonce);
        if let Err(e) = self.check(id_token, &nonce) {
            let unknown_key =
                matches!(e, ClaimsVerificationError::SignatureVerification(SignatureVerificationError::NoMatchingKey));
            if !(unknown_key && self.refetch_jwks().await?) {
                return Err(Failure::Refused(format!("the ID token was refused: {}", describe(&e))));
            }
            self.check(id_token, &nonce)
                .map_err(|e| Failure::Refused(format!("the ID token was refused: {}", describe(&e))))?;
        }
        let token = id_token.to_string();
        let claims = payload(&token)?;
        let identity = identity_from_claims(&claims, &self.settings.username_claim, &self.settings.groups_claim)
            .map_err(Failure::Refused)?;
        Ok(Verified { identity, id_token: token })
    }

    /// The ID token's checks against the keys known now. Expiry is checked
    /// against a clock [`CLOCK_SKEW`] behind ours, the issue time against one
    /// as far ahead: the provider's clock may differ by that much, no more.
    fn check(&self, token: &CoreIdToken, nonce: &Nonce) -> Result<(), ClaimsVerificationError> {
        let client = self.client();
        let skew = chrono::Duration::from_std(CLOCK_SKEW).unwrap_or_default();
        let verifier = client
            .id_token_verifier()
            .set_time_fn(move || chrono::Utc::now() - skew)
            .set_issue_time_verifier_fn(move |issued| {
                if issued > chrono::Utc::now() + skew {
                    Err(format!("issued in the future ({issued})"))
                } else {
                    Ok(())
                }
            });
        token.claims(&verifier, nonce).map(|_| ())
    }

    /// Fetches the provider's keys again, unless that was done less than
    /// [`JWKS_REFETCH_EVERY`] ago (then `false`: nothing new to try).
    async fn refetch_jwks(&self) -> Result<bool, Failure> {
        {
            let mut last = self.last_jwks_fetch.lock().unwrap_or_else(|e| e.into_inner());
            if last.is_some_and(|t| t.elapsed() < JWKS_REFETCH_EVERY) {
                return Ok(false);
            }
            *last = Some(Instant::now());
        }
        let uri = self.metadata.read().unwrap_or_else(|e| e.into_inner()).jwks_uri().clone();
        let keys = CoreJsonWebKeySet::fetch_async(&uri, &self.http)
            .await
            .map_err(|e| Failure::Unreachable(format!("fetching its keys: {}", describe(&e))))?;
        tracing::info!(keys = keys.keys().len(), "OpenID Connect: the provider's keys fetched again (unknown key id)");
        let mut metadata = self.metadata.write().unwrap_or_else(|e| e.into_inner());
        *metadata = metadata.clone().set_jwks(keys);
        Ok(true)
    }
}

/// The claims of a token whose signature has been checked: its middle part.
fn payload(token: &str) -> Result<serde_json::Value, Failure> {
    let unreadable = || Failure::Refused("the ID token's claims are unreadable".into());
    let middle = token.split('.').nth(1).ok_or_else(unreadable)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(middle).map_err(|_| unreadable())?;
    serde_json::from_slice(&bytes).map_err(|_| unreadable())
}

#[cfg(test)]
mod tests {
    use super::same_secret;

    #[test]
    fn states_compare_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "ab"));
        assert!(!same_secret("", "a"));
    }
}
