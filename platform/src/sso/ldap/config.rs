//! The LDAP flags, checked once at start so that a bad one stops the start
//! with what is wrong, and the TLS settings made from them.

use ldap3::LdapConnSettings;
use rustls::pki_types::{pem::PemObject, CertificateDer};
use std::{path::PathBuf, sync::Arc, time::Duration};

/// The flags as given (`--ldap-*`, see the README's "Single sign-on").
#[derive(Clone, Debug)]
pub struct LdapSettings {
    pub url: String,
    pub starttls: bool,
    pub bind_dn: Option<String>,
    pub bind_password: Option<String>,
    pub user_base: String,
    /// With `{username}`, e.g. `(uid={username})`.
    pub user_filter: String,
    /// None: the groups are the user entry's `memberOf` values.
    pub group_base: Option<String>,
    /// With `{dn}` and/or `{username}`, e.g. `(member={dn})`.
    pub group_filter: String,
    pub ca_file: Option<PathBuf>,
    pub username_attr: String,
    /// The most one connection or operation may take.
    pub timeout: Duration,
}

/// Checked settings, ready to connect.
#[derive(Clone)]
pub struct LdapConfig {
    pub(super) url: url::Url,
    pub(super) starttls: bool,
    pub(super) service: Option<(String, String)>,
    pub(super) user_base: String,
    pub(super) user_filter: String,
    pub(super) group_base: Option<String>,
    pub(super) group_filter: String,
    pub(super) username_attr: String,
    pub(super) timeout: Duration,
    tls: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for LdapConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the service account's password.
        f.debug_struct("LdapConfig").field("url", &self.url.as_str()).field("starttls", &self.starttls).finish()
    }
}

fn check_filter(flag: &str, filter: &str, needs: &[&str]) -> Result<(), String> {
    if !needs.iter().any(|n| filter.contains(n)) {
        return Err(format!("{flag} must contain {}, e.g. (uid={{username}})", needs.join(" or ")));
    }
    let sample = super::search::fill(filter, "x", "cn=x");
    ldap3::parse_filter(&sample).map_err(|_| format!("{flag} is not an LDAP filter (RFC 4515): {filter}"))?;
    Ok(())
}

impl LdapSettings {
    /// Checks every flag; the error names the flag and what is wrong.
    pub fn check(self) -> Result<LdapConfig, String> {
        let url = url::Url::parse(&self.url).map_err(|e| format!("--ldap-url {:?} is not a URL: {e}", self.url))?;
        match (url.scheme(), self.starttls) {
            ("ldaps", false) | ("ldap", true) => {}
            ("ldaps", true) => return Err("--ldap-starttls is for ldap:// URLs; ldaps:// is TLS already".into()),
            ("ldap", false) => {
                return Err(
                    "--ldap-url ldap:// would send passwords in clear: use ldaps:// or add --ldap-starttls".into()
                )
            }
            (other, _) => return Err(format!("--ldap-url must start with ldaps:// or ldap://, not {other}://")),
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(format!("--ldap-url {:?} names no host", self.url));
        }
        if self.user_base.trim().is_empty() {
            return Err("--ldap-user-base is required, e.g. ou=people,dc=example,dc=org".into());
        }
        check_filter("--ldap-user-filter", &self.user_filter, &["{username}"])?;
        if self.group_base.is_some() {
            check_filter("--ldap-group-filter", &self.group_filter, &["{dn}", "{username}"])?;
        }
        let service = match (self.bind_dn, self.bind_password) {
            (Some(dn), Some(pw)) if !dn.is_empty() && !pw.is_empty() => Some((dn, pw)),
            (None, None) => None,
            _ => {
                return Err(
                    "--ldap-bind-dn and --ldap-bind-password go together (both, or neither for anonymous search)"
                        .into(),
                )
            }
        };
        if self.username_attr.trim().is_empty() {
            return Err("--ldap-username-attr must name an attribute, e.g. uid or sAMAccountName".into());
        }
        let tls = tls_config(self.ca_file.as_ref())?;
        Ok(LdapConfig {
            url,
            starttls: self.starttls,
            service,
            user_base: self.user_base,
            user_filter: self.user_filter,
            group_base: self.group_base.filter(|b| !b.trim().is_empty()),
            group_filter: self.group_filter,
            username_attr: self.username_attr,
            timeout: self.timeout,
            tls,
        })
    }
}

/// TLS with ring, trusting the CA file's certificates, or the system's.
fn tls_config(ca_file: Option<&PathBuf>) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    match ca_file {
        Some(path) => {
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
                .map_err(|e| format!("--ldap-ca-file {}: {e}", path.display()))?
                .collect::<Result<_, _>>()
                .map_err(|e| format!("--ldap-ca-file {}: {e}", path.display()))?;
            if certs.is_empty() {
                return Err(format!("--ldap-ca-file {} holds no PEM certificate", path.display()));
            }
            for c in certs {
                roots.add(c).map_err(|e| format!("--ldap-ca-file {}: {e}", path.display()))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
        }
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS set-up: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

impl LdapConfig {
    pub(super) fn conn_settings(&self) -> LdapConnSettings {
        LdapConnSettings::new().set_conn_timeout(self.timeout).set_starttls(self.starttls).set_config(self.tls.clone())
    }

    /// The directory's URL, for the log line at start.
    pub fn url(&self) -> &str {
        self.url.as_str()
    }
}
