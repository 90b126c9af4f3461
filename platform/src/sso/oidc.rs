//! Sign-in through an OpenID Connect provider (Keycloak, Entra ID, Google,
//! ...): the authorization code flow with PKCE, `state` and `nonce`, the ID
//! token checked by the `openidconnect` crate against the provider's JWKS.
//!
//! The provider is discovered once at start ([`Oidc::discover`]: a bad URL or
//! an unreachable issuer stops the start with the reason). Its keys are
//! fetched again when a token names a key (`kid`) Gantry does not know — the
//! provider rotated them — at most once per [`JWKS_REFETCH_EVERY`], so tokens
//! with made-up key ids cannot make Gantry hammer the provider.
//! `verify` holds the token checks; `claims` reads who the token names.

mod claims;
mod verify;

pub use claims::identity_from_claims;
pub use verify::Failure;

use crate::PlatformError;
use openidconnect::{
    core::{CoreAuthenticationFlow, CoreClient},
    reqwest, ClientId, ClientSecret, CsrfToken, EndSessionUrl, IssuerUrl, LogoutRequest, Nonce, PkceCodeChallenge,
    PostLogoutRedirectUrl, ProviderMetadataWithLogout, RedirectUrl, Scope,
};
use serde::{Deserialize, Serialize};
use std::{
    sync::{Mutex, RwLock},
    time::{Duration, Instant},
};

/// The least time between two JWKS fetches caused by unknown key ids.
pub const JWKS_REFETCH_EVERY: Duration = Duration::from_secs(30);
/// How far the provider's clock may be from ours (token expiry and issue time).
pub const CLOCK_SKEW: Duration = Duration::from_secs(60);
/// How long a started sign-in may take at the provider before its callback.
pub const PENDING_TTL_SECS: i64 = 600;
/// Session keys: the sign-in under way (one-shot), the ID token kept for
/// the provider's end-session (`id_token_hint`), and that hint once the
/// Gantry session has ended.
pub const SESSION_PENDING_KEY: &str = "oidc_pending";
pub const SESSION_ID_TOKEN_KEY: &str = "oidc_id_token";
pub const SESSION_LOGOUT_HINT_KEY: &str = "oidc_logout_hint";

/// The `--oidc-*` flags, read.
#[derive(Clone, Debug)]
pub struct OidcSettings {
    pub issuer: String,
    pub client_id: String,
    pub client_secret: Option<String>,
    pub scopes: Vec<String>,
    pub username_claim: String,
    pub groups_claim: String,
    /// Where the provider sends the browser back: `<public URL>/auth/oidc/callback`.
    pub redirect_url: String,
    /// Where the provider's end-session sends the browser afterwards.
    pub post_logout_url: String,
    /// PEM of extra CAs the provider's certificate may chain to.
    pub ca_pem: Option<Vec<u8>>,
    pub display_name: String,
}

/// What the sign-in page needs to offer this way in (a request extension).
#[derive(Clone, Debug)]
pub struct SignInOffer {
    pub display_name: String,
    /// The provider's discovery names an end-session endpoint.
    pub end_session: bool,
}

/// A sign-in under way, kept in the browser's session until its callback.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Pending {
    pub state: String,
    pub nonce: String,
    pub pkce_verifier: String,
    /// Where to go once signed in (already checked to stay on this site).
    pub next: String,
    pub started: i64,
}

pub struct Oidc {
    settings: OidcSettings,
    http: reqwest::Client,
    metadata: RwLock<ProviderMetadataWithLogout>,
    last_jwks_fetch: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for Oidc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oidc").field("issuer", &self.settings.issuer).finish_non_exhaustive()
    }
}

/// An error with its causes, one after another (reqwest's top-level message
/// alone says "error sending request", not why).
pub(crate) fn describe(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        source = s.source();
    }
    text
}

fn bad_setting(flag: &str, why: String) -> PlatformError {
    PlatformError::BadRequest(format!("{flag}: {why}"))
}

impl Oidc {
    /// Reads the provider's discovery document and keys; what is wrong is
    /// said with the flag it comes from.
    pub async fn discover(settings: OidcSettings) -> Result<Oidc, PlatformError> {
        let issuer = IssuerUrl::new(settings.issuer.clone())
            .map_err(|e| bad_setting("--oidc-issuer", format!("{:?} is not a URL ({e})", settings.issuer)))?;
        if !matches!(issuer.url().scheme(), "https" | "http") {
            return Err(bad_setting("--oidc-issuer", format!("{:?} is not an http(s) URL", settings.issuer)));
        }
        RedirectUrl::new(settings.redirect_url.clone()).map_err(|e| {
            bad_setting("--oidc-redirect-url", format!("{:?} is not a URL ({e})", settings.redirect_url))
        })?;
        PostLogoutRedirectUrl::new(settings.post_logout_url.clone())
            .map_err(|e| bad_setting("--oidc-redirect-url", format!("{:?}: {e}", settings.post_logout_url)))?;
        if settings.client_id.trim().is_empty() {
            return Err(bad_setting("--oidc-client-id", "is required with --oidc-issuer".into()));
        }
        let http = http_client(settings.ca_pem.as_deref())?;
        let metadata = ProviderMetadataWithLogout::discover_async(issuer.clone(), &http).await.map_err(|e| {
            PlatformError::BadRequest(format!(
                "--oidc-issuer: cannot read the OpenID Connect discovery document of {} ({}/.well-known/openid-configuration): {}",
                issuer.as_str(),
                issuer.as_str().trim_end_matches('/'),
                describe(&e)
            ))
        })?;
        tracing::info!(
            issuer = issuer.as_str(),
            keys = metadata.jwks().keys().len(),
            "OpenID Connect provider discovered"
        );
        Ok(Oidc { settings, http, metadata: RwLock::new(metadata), last_jwks_fetch: Mutex::new(None) })
    }

    pub fn settings(&self) -> &OidcSettings {
        &self.settings
    }

    pub fn offer(&self) -> SignInOffer {
        let metadata = self.metadata.read().unwrap_or_else(|e| e.into_inner());
        SignInOffer {
            display_name: self.settings.display_name.clone(),
            end_session: metadata.additional_metadata().end_session_endpoint.is_some(),
        }
    }

    /// Whether the provider answers at all (any HTTP status will do) at its
    /// authorization endpoint, where the browser is about to be sent.
    pub async fn reachable(&self) -> Result<(), String> {
        let url = self.metadata.read().unwrap_or_else(|e| e.into_inner()).authorization_endpoint().url().clone();
        let probe = self.http.get(url).timeout(Duration::from_secs(5)).send();
        probe.await.map(|_| ()).map_err(|e| describe(&e))
    }

    fn client(
        &self,
    ) -> CoreClient<
        openidconnect::EndpointSet,
        openidconnect::EndpointNotSet,
        openidconnect::EndpointNotSet,
        openidconnect::EndpointNotSet,
        openidconnect::EndpointMaybeSet,
        openidconnect::EndpointMaybeSet,
    > {
        let metadata = self.metadata.read().unwrap_or_else(|e| e.into_inner()).clone();
        // Checked in `discover`.
        let redirect = RedirectUrl::new(self.settings.redirect_url.clone()).expect("checked at start");
        CoreClient::from_provider_metadata(
            metadata,
            ClientId::new(self.settings.client_id.clone()),
            self.settings.client_secret.clone().map(ClientSecret::new),
        )
        .set_redirect_uri(redirect)
    }

    /// The provider's authorization URL for a new sign-in, and what its
    /// callback must match (kept in the session meanwhile).
    pub fn begin(&self, next: String, now: i64) -> (String, Pending) {
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let client = self.client();
        let mut request =
            client.authorize_url(CoreAuthenticationFlow::AuthorizationCode, CsrfToken::new_random, Nonce::new_random);
        for scope in self.settings.scopes.iter().filter(|s| s.as_str() != "openid") {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        let (url, state, nonce) = request.set_pkce_challenge(challenge).url();
        let pending = Pending {
            state: state.secret().clone(),
            nonce: nonce.secret().clone(),
            pkce_verifier: verifier.secret().clone(),
            next,
            started: now,
        };
        (url.to_string(), pending)
    }

    /// The provider's end-session URL, when its discovery names one.
    pub fn end_session_url(&self, id_token_hint: Option<&str>) -> Option<String> {
        let metadata = self.metadata.read().unwrap_or_else(|e| e.into_inner());
        let endpoint: EndSessionUrl = metadata.additional_metadata().end_session_endpoint.clone()?;
        let mut request = LogoutRequest::from(endpoint)
            .set_client_id(ClientId::new(self.settings.client_id.clone()))
            .set_post_logout_redirect_uri(PostLogoutRedirectUrl::new(self.settings.post_logout_url.clone()).ok()?);
        if let Some(hint) = id_token_hint.and_then(|h| h.parse::<openidconnect::core::CoreIdToken>().ok()) {
            request = request.set_id_token_hint(&hint);
        }
        Some(request.http_get_url().to_string())
    }
}

/// The HTTP client for the provider: its own CAs added, no redirects
/// followed (a token endpoint that redirects is not followed with the code),
/// bounded waits so an unreachable provider gives a clear page soon.
fn http_client(ca_pem: Option<&[u8]>) -> Result<reqwest::Client, PlatformError> {
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(15));
    if let Some(pem) = ca_pem {
        let certs = reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|e| bad_setting("--oidc-ca-file", format!("not PEM certificates ({e})")))?;
        if certs.is_empty() {
            return Err(bad_setting("--oidc-ca-file", "holds no certificate".into()));
        }
        for cert in certs {
            builder = builder.add_root_certificate(cert);
        }
    }
    builder.build().map_err(|e| PlatformError::Internal(format!("OpenID Connect HTTP client: {}", describe(&e))))
}
