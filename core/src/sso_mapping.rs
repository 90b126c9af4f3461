//! Which Gantry group and role a directory account gets, from the groups
//! its identity provider (LDAP, OpenID Connect) says it is in and the
//! admin's mappings. Applied at every sign-in, so a move in the directory
//! is a move in Gantry at the next sign-in.
//!
//! The rule, written once here:
//! - A mapping matches when its directory group equals one of the account's
//!   groups, compared without surrounding spaces and ignoring ASCII case
//!   (LDAP DNs and AD group names are case-insensitive; an OIDC provider's
//!   group names practically always are too).
//! - The Gantry **group** is the one of the matching mapping with the
//!   lowest `priority` number; equal priorities go to the mapping added
//!   first (lowest `id`).
//! - The **role** is `admin` when any matching mapping grants admin: the
//!   admin role is not tied to a group, and an administrators' directory
//!   group mapped with a low precedence must still make its members admins.
//! - No matching mapping: no access (`None`).

use crate::Role;
use serde::{Deserialize, Serialize};

/// One admin-made mapping: members of `directory_group` belong to
/// `gantry_group` with `role`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mapping {
    pub id: i64,
    pub directory_group: String,
    pub gantry_group: String,
    pub role: Role,
    /// Lower wins when an account is in several mapped groups.
    pub priority: i64,
}

/// Where a directory account lands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub group: String,
    pub role: Role,
    /// The directory group whose mapping chose the group (for the audit).
    pub via: String,
}

/// The longest directory group string a mapping may hold (a long AD DN
/// fits; a pasted paragraph does not).
pub const DIRECTORY_GROUP_MAX: usize = 512;

/// Whether two directory group strings name the same group.
pub fn same_group(a: &str, b: &str) -> bool {
    a.trim().eq_ignore_ascii_case(b.trim())
}

/// Checks the directory group string of a new mapping.
pub fn check_directory_group(value: &str) -> Result<String, String> {
    let v = value.trim();
    if v.is_empty() {
        return Err("the directory group is required".into());
    }
    if v.chars().count() > DIRECTORY_GROUP_MAX {
        return Err(format!("the directory group is longer than {DIRECTORY_GROUP_MAX} characters"));
    }
    if v.chars().any(char::is_control) {
        return Err("the directory group contains control characters".into());
    }
    Ok(v.to_string())
}

/// The account's group and role, or `None` when none of its groups is
/// mapped (see the module's rule).
pub fn decide(mappings: &[Mapping], account_groups: &[String]) -> Option<Decision> {
    let matching: Vec<&Mapping> =
        mappings.iter().filter(|m| account_groups.iter().any(|g| same_group(g, &m.directory_group))).collect();
    let first = matching.iter().min_by_key(|m| (m.priority, m.id))?;
    let role = if matching.iter().any(|m| m.role.is_admin()) { Role::Admin } else { Role::User };
    Some(Decision { group: first.gantry_group.clone(), role, via: first.directory_group.clone() })
}

#[cfg(test)]
mod tests;
