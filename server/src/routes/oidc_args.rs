//! The `--oidc-*` flags of `gantry serve`, and the provider's discovery at
//! start: a bad URL, a missing client id or an issuer that does not answer
//! stops the start with what is wrong (a sign-in button that can only fail
//! is worse than a server that says why it did not start).

use crate::config::ServeArgs;
use clap::Args;
use gantry_platform::{
    sso::oidc::{Oidc, OidcSettings},
    PlatformError,
};
use std::{path::PathBuf, sync::Arc};

#[derive(Debug, Clone, Args)]
pub struct OidcArgs {
    /// OpenID Connect: the provider's issuer URL (its discovery document is
    /// <issuer>/.well-known/openid-configuration). Sign-in through it is
    /// offered only when this is set.
    #[arg(long, env = "GANTRY_OIDC_ISSUER")]
    pub oidc_issuer: Option<String>,
    /// OpenID Connect: this client's id at the provider.
    #[arg(long, env = "GANTRY_OIDC_CLIENT_ID", default_value = "")]
    pub oidc_client_id: String,
    /// OpenID Connect: this client's secret (best given through the environment).
    #[arg(long, env = "GANTRY_OIDC_CLIENT_SECRET", hide_env_values = true)]
    pub oidc_client_secret: Option<String>,
    /// OpenID Connect: the scopes asked for, separated by spaces.
    #[arg(long, env = "GANTRY_OIDC_SCOPES", default_value = "openid profile email")]
    pub oidc_scopes: String,
    /// OpenID Connect: the ID token claim that names the Gantry user.
    #[arg(long, env = "GANTRY_OIDC_USERNAME_CLAIM", default_value = "preferred_username")]
    pub oidc_username_claim: String,
    /// OpenID Connect: the ID token claim that lists the user's groups (a
    /// dotted path reaches into objects, e.g. realm_access.roles).
    #[arg(long, env = "GANTRY_OIDC_GROUPS_CLAIM", default_value = "groups")]
    pub oidc_groups_claim: String,
    /// OpenID Connect: the redirect URL registered at the provider; default
    /// <public origin or http://listen address>/auth/oidc/callback.
    #[arg(long, env = "GANTRY_OIDC_REDIRECT_URL")]
    pub oidc_redirect_url: Option<String>,
    /// OpenID Connect: a PEM file of extra CAs the provider's certificate
    /// may chain to (a private provider).
    #[arg(long, env = "GANTRY_OIDC_CA_FILE")]
    pub oidc_ca_file: Option<PathBuf>,
    /// OpenID Connect: the provider's name on the sign-in button.
    #[arg(long, env = "GANTRY_OIDC_DISPLAY_NAME", default_value = "single sign-on")]
    pub oidc_display_name: String,
}

impl OidcArgs {
    /// The settings, with the redirect and post-sign-out URLs made from
    /// the site's public address unless given.
    pub fn settings(&self, serve: &ServeArgs) -> Result<Option<OidcSettings>, PlatformError> {
        let Some(issuer) = self.oidc_issuer.clone() else { return Ok(None) };
        let origin = match &serve.public_origin {
            Some(origin) => origin.clone(),
            None if serve.listen.ip().is_unspecified() && self.oidc_redirect_url.is_none() => {
                return Err(PlatformError::BadRequest(format!(
                    "--oidc-redirect-url: Gantry listens on {}, which is no address a browser can come back to: \
                     set --oidc-redirect-url or --public-origin",
                    serve.listen
                )))
            }
            None => format!("{}://{}", if serve.secure_cookies { "https" } else { "http" }, serve.listen),
        };
        let redirect_url = self.oidc_redirect_url.clone().unwrap_or_else(|| format!("{origin}/auth/oidc/callback"));
        // Back to the sign-in page, on the same site as the callback.
        let post_logout_url = match redirect_url.find("/auth/oidc/callback") {
            Some(at) => format!("{}/login", &redirect_url[..at]),
            None => format!("{origin}/login"),
        };
        let ca_pem = match &self.oidc_ca_file {
            None => None,
            Some(path) => Some(std::fs::read(path).map_err(|e| {
                PlatformError::BadRequest(format!("--oidc-ca-file: cannot read {}: {e}", path.display()))
            })?),
        };
        Ok(Some(OidcSettings {
            issuer,
            client_id: self.oidc_client_id.clone(),
            client_secret: self.oidc_client_secret.clone().filter(|s| !s.is_empty()),
            scopes: self.oidc_scopes.split_whitespace().map(str::to_string).collect(),
            username_claim: self.oidc_username_claim.clone(),
            groups_claim: self.oidc_groups_claim.clone(),
            redirect_url,
            post_logout_url,
            ca_pem,
            display_name: self.oidc_display_name.clone(),
        }))
    }
}

/// The provider, discovered, when one is configured.
pub async fn discover(serve: &ServeArgs) -> Result<Option<Arc<Oidc>>, PlatformError> {
    match serve.oidc.settings(serve)? {
        None => Ok(None),
        Some(settings) => Ok(Some(Arc::new(Oidc::discover(settings).await?))),
    }
}
