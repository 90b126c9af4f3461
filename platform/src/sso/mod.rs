//! Single sign-on (issue #37): accounts that sign in through the
//! organisation's directory (LDAP) or identity provider (OpenID Connect).
//! Both end in [`sign_in_external`], which applies the admin's group
//! mappings (`mapping`, decided by `gantry_core::sso_mapping`) at every
//! sign-in; `settings` holds whether local passwords still sign in.

mod external;
pub mod ldap;
pub mod mapping;
pub mod oidc;
mod password;
pub mod settings;

pub use external::{sign_in_external, NO_GROUP_MESSAGE, SSO_PASSWORD_HASH};
pub use password::password_sign_in;

use serde::{Deserialize, Serialize};

/// Who the directory or provider says signed in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalIdentity {
    /// "ldap" or "oidc".
    pub provider: String,
    /// The stable id: the LDAP DN, or the OIDC issuer and subject. The
    /// Gantry account is found again by provider and subject only.
    pub subject: String,
    /// The user name the directory gives (lowercased for a new account).
    pub username: String,
    pub email: Option<String>,
    /// Directory group names or DNs, matched against the mappings.
    pub groups: Vec<String>,
}
