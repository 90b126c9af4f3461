//! Sign-in through an LDAP directory (OpenLDAP, Active Directory): search
//! the user with the service account, bind as the DN found with the
//! password given, read the account's groups, then
//! [`super::sign_in_external`] applies the mappings.
//!
//! Passwords only travel over TLS: `ldaps://`, or `ldap://` with StartTLS;
//! a plain `ldap://` URL is refused at start. An empty password is refused
//! before any bind: an LDAP server takes a simple bind with a DN and no
//! password as an *unauthenticated* bind and answers success.
//! `config` checks the flags and makes the TLS settings.

mod config;
mod search;

pub use config::{LdapConfig, LdapSettings};

use super::ExternalIdentity;
use crate::PlatformError;
use ldap3::{LdapConnAsync, LdapError};

/// What a directory sign-in can end in besides an identity.
#[derive(Debug, thiserror::Error)]
pub enum LdapFailure {
    /// Wrong password, unknown user, or a name that matched several
    /// entries: told apart in the logs only.
    #[error("wrong username or password")]
    BadCredentials,
    /// The directory could not be reached or did not answer in time.
    #[error(
        "the directory does not answer ({0}); try again later — administrators can still sign in with a local password"
    )]
    Unreachable(String),
    /// TLS failed: most often a certificate the CA file does not vouch for.
    #[error("the directory's TLS connection failed: {0} — check --ldap-ca-file and the name in --ldap-url")]
    Tls(String),
    /// The directory answered with an error other than a wrong password
    /// (the service account refused, a bad search base or filter).
    #[error("the directory refused the sign-in: {0}")]
    Directory(String),
}

impl From<LdapFailure> for PlatformError {
    fn from(f: LdapFailure) -> Self {
        match f {
            LdapFailure::BadCredentials => PlatformError::BadCredentials,
            other => PlatformError::Refused(other.to_string()),
        }
    }
}

/// The result code of a simple bind with a wrong password (RFC 4511).
const INVALID_CREDENTIALS: u32 = 49;

/// Sorts a connection or operation error of `ldap3`.
pub(crate) fn failure(e: LdapError) -> LdapFailure {
    match e {
        LdapError::LdapResult { result } if result.rc == INVALID_CREDENTIALS => LdapFailure::BadCredentials,
        LdapError::LdapResult { result } => LdapFailure::Directory(format!(
            "result code {} {}",
            result.rc,
            result.text.chars().take(200).collect::<String>()
        )),
        LdapError::Rustls { source } => LdapFailure::Tls(source.to_string()),
        LdapError::DNSName { source } => LdapFailure::Tls(source.to_string()),
        // A TLS handshake failure reaches ldap3 as an I/O error wrapping
        // rustls's own.
        LdapError::Io { source } => match source.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
            Some(tls) => LdapFailure::Tls(tls.to_string()),
            None => LdapFailure::Unreachable(source.to_string()),
        },
        LdapError::Timeout { .. } => LdapFailure::Unreachable("no answer in time".into()),
        other => LdapFailure::Unreachable(other.to_string()),
    }
}

impl LdapConfig {
    /// One connection, its driver spawned; every operation on it is bounded
    /// by the configured timeout.
    pub(crate) async fn connect(&self) -> Result<ldap3::Ldap, LdapFailure> {
        let (conn, mut ldap) =
            LdapConnAsync::with_settings(self.conn_settings(), self.url.as_str()).await.map_err(failure)?;
        ldap3::drive!(conn);
        ldap.with_timeout(self.timeout);
        Ok(ldap)
    }

    /// Checks `username` and `password` against the directory and answers
    /// who it is, with its groups. Does not touch Gantry's accounts.
    pub async fn authenticate(&self, username: &str, password: &str) -> Result<ExternalIdentity, LdapFailure> {
        let username = username.trim();
        if password.is_empty() || username.is_empty() || username.chars().count() > 256 {
            return Err(LdapFailure::BadCredentials);
        }
        let mut service = self.connect().await?;
        if let Some((dn, pw)) = &self.service {
            service.simple_bind(dn, pw).await.map_err(failure)?.success().map_err(|e| match failure(e) {
                LdapFailure::BadCredentials => {
                    LdapFailure::Directory("the directory refused Gantry's service account (--ldap-bind-dn)".into())
                }
                other => other,
            })?;
        }
        let found = search::find_user(self, &mut service, username).await;
        let entry = match found {
            Ok(e) => e,
            Err(e) => {
                let _ = service.unbind().await;
                return Err(e);
            }
        };
        // The user's bind on a connection of its own: the group search
        // stays with the service account, whatever the user may read.
        let bound = async {
            let mut user = self.connect().await?;
            let r = user.simple_bind(&entry.dn, password).await.map_err(failure)?.success().map_err(failure);
            let _ = user.unbind().await;
            r
        }
        .await;
        let groups = match bound {
            Ok(_) => search::groups_of(self, &mut service, &entry).await,
            Err(e) => Err(e),
        };
        let _ = service.unbind().await;
        let groups = groups?;
        let name = entry.attrs.get(&self.username_attr).and_then(|v| v.first()).cloned();
        Ok(ExternalIdentity {
            provider: "ldap".into(),
            subject: entry.dn.clone(),
            username: name.unwrap_or_else(|| username.to_string()),
            email: entry.attrs.get("mail").and_then(|v| v.first()).cloned(),
            groups,
        })
    }
}
