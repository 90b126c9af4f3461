//! The LDAP directory's flags (`gantry serve --ldap-*`) and the
//! break-glass admin's. Checked at start: a bad URL, filter or CA file
//! stops the start, naming the flag and what is wrong. The sign-in itself
//! is `gantry_platform::sso::password_sign_in`; see the README's "Single
//! sign-on" for examples (OpenLDAP, Active Directory).

use clap::Args;
use gantry_platform::{
    db::Pool,
    sso::ldap::{LdapConfig, LdapSettings},
    PlatformError,
};
use std::{path::PathBuf, sync::Arc, time::Duration};

#[derive(Debug, Clone, Args)]
pub struct LdapArgs {
    /// The directory: ldaps://host[:port], or ldap://host[:port] with
    /// --ldap-starttls. Unset: no LDAP sign-in.
    #[arg(long, env = "GANTRY_LDAP_URL")]
    pub ldap_url: Option<String>,
    /// Upgrade an ldap:// connection with StartTLS (required for ldap://).
    #[arg(long, env = "GANTRY_LDAP_STARTTLS")]
    pub ldap_starttls: bool,
    /// The service account that searches for users and groups (unset:
    /// anonymous search).
    #[arg(long, env = "GANTRY_LDAP_BIND_DN")]
    pub ldap_bind_dn: Option<String>,
    /// Its password (prefer the environment variable to the flag).
    #[arg(long, env = "GANTRY_LDAP_BIND_PASSWORD", hide_env_values = true)]
    pub ldap_bind_password: Option<String>,
    /// Where users are searched, e.g. ou=people,dc=example,dc=org.
    #[arg(long, env = "GANTRY_LDAP_USER_BASE", default_value = "")]
    pub ldap_user_base: String,
    /// The user search; {username} is replaced by the typed name, escaped
    /// per RFC 4515.
    #[arg(long, env = "GANTRY_LDAP_USER_FILTER", default_value = "(uid={username})")]
    pub ldap_user_filter: String,
    /// Where groups are searched; unset: the user entry's memberOf values
    /// are its groups (Active Directory).
    #[arg(long, env = "GANTRY_LDAP_GROUP_BASE")]
    pub ldap_group_base: Option<String>,
    /// The group search; {dn} is the user's DN, {username} its name.
    #[arg(long, env = "GANTRY_LDAP_GROUP_FILTER", default_value = "(member={dn})")]
    pub ldap_group_filter: String,
    /// PEM file of the CA(s) that signed the directory's certificate
    /// (unset: the system's CAs).
    #[arg(long, env = "GANTRY_LDAP_CA_FILE")]
    pub ldap_ca_file: Option<PathBuf>,
    /// The attribute that holds the user name (uid; sAMAccountName on AD).
    #[arg(long, env = "GANTRY_LDAP_USERNAME_ATTR", default_value = "uid")]
    pub ldap_username_attr: String,
    /// Seconds one connection or directory operation may take (1 to 120).
    #[arg(long, env = "GANTRY_LDAP_TIMEOUT_SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=120))]
    pub ldap_timeout_secs: u64,
    /// The local administrator who still signs in with a password when
    /// local passwords are turned off (Admin → Sign-in).
    #[arg(long, env = "GANTRY_BREAK_GLASS_ADMIN")]
    pub break_glass_admin: Option<String>,
}

impl LdapArgs {
    /// The checked directory settings, or None without --ldap-url.
    pub fn config(&self) -> Result<Option<Arc<LdapConfig>>, PlatformError> {
        let Some(url) = &self.ldap_url else { return Ok(None) };
        let settings = LdapSettings {
            url: url.clone(),
            starttls: self.ldap_starttls,
            bind_dn: self.ldap_bind_dn.clone(),
            bind_password: self.ldap_bind_password.clone(),
            user_base: self.ldap_user_base.clone(),
            user_filter: self.ldap_user_filter.clone(),
            group_base: self.ldap_group_base.clone(),
            group_filter: self.ldap_group_filter.clone(),
            ca_file: self.ldap_ca_file.clone(),
            username_attr: self.ldap_username_attr.clone(),
            timeout: Duration::from_secs(self.ldap_timeout_secs),
        };
        let config = settings.check().map_err(PlatformError::BadRequest)?;
        tracing::info!(url = config.url(), "LDAP sign-in on");
        Ok(Some(Arc::new(config)))
    }

    /// Names the break-glass admin given by flag (it must be an enabled
    /// local administrator, or the start stops saying so).
    pub async fn apply_break_glass(&self, pool: &Pool) -> Result<(), PlatformError> {
        match &self.break_glass_admin {
            Some(name) => gantry_platform::sso::settings::set_break_glass_admin(pool, name.trim()).await,
            None => Ok(()),
        }
    }
}

/// The router with the directory (or None) in each request's extensions,
/// where the sign-in (`app::api::sso_admin::ldap`) finds it.
pub fn layer(app: axum::Router, ldap: Option<Arc<LdapConfig>>) -> axum::Router {
    app.layer(axum::Extension(ldap))
}

#[cfg(test)]
mod tests {
    use super::LdapArgs;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        ldap: LdapArgs,
    }

    fn config(extra: &[&str]) -> Result<bool, String> {
        let args = Cli::try_parse_from(["gantry"].iter().chain(extra).copied()).map_err(|e| e.to_string())?.ldap;
        args.config().map(|c| c.is_some()).map_err(|e| e.to_string())
    }

    #[test]
    fn off_by_default_and_bad_flags_stop_the_start() {
        assert_eq!(config(&[]), Ok(false));
        let base = ["--ldap-user-base", "ou=people,dc=example,dc=org"];
        let with = |more: &[&'static str]| [&base[..], more].concat();
        assert_eq!(config(&with(&["--ldap-url", "ldaps://ldap.example.org"])), Ok(true));
        assert_eq!(config(&with(&["--ldap-url", "ldap://ldap.example.org", "--ldap-starttls"])), Ok(true));
        let e = config(&with(&["--ldap-url", "ldap://ldap.example.org"])).unwrap_err();
        assert!(e.contains("in clear"), "{e}");
        let e = config(&with(&["--ldap-url", "not a url"])).unwrap_err();
        assert!(e.contains("--ldap-url"), "{e}");
        let e = config(&["--ldap-url", "ldaps://ldap.example.org"]).unwrap_err();
        assert!(e.contains("--ldap-user-base"), "{e}");
    }
}
