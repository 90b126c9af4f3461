//! What an API token may do: its scope, chosen when it is made. A `read`
//! token only reads (GET/HEAD), a `write` token does what its owner may
//! except the admin console's routes, an `admin` token is an admin's, for
//! those too. A scope never adds to its owner's rights: the owner's role
//! is checked as well, on every request (a demotion revokes the tokens
//! anyway, in the demotion's commit).

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenScope {
    Read,
    Write,
    Admin,
}

/// Why a request is refused for its token's scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScopeRefusal {
    /// A `read` token asked to change something.
    ReadOnly,
    /// An admin route with a token that is not `admin`.
    NotAdminToken,
    /// An admin route (or an `admin` token) for an account that is not an admin.
    NotAdmin,
}

impl TokenScope {
    pub const ALL: [TokenScope; 3] = [TokenScope::Read, TokenScope::Write, TokenScope::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            TokenScope::Read => "read",
            TokenScope::Write => "write",
            TokenScope::Admin => "admin",
        }
    }

    pub fn parse(s: &str) -> Option<TokenScope> {
        TokenScope::ALL.into_iter().find(|t| t.as_str() == s.trim())
    }

    /// Whether a token of this scope, held by an account that is (or is
    /// not) an admin, may make a request that `writes` (any method but
    /// GET and HEAD) on an `admin_route` or not.
    pub fn allows(self, owner_is_admin: bool, writes: bool, admin_route: bool) -> Result<(), ScopeRefusal> {
        if admin_route && !owner_is_admin {
            return Err(ScopeRefusal::NotAdmin);
        }
        if admin_route && self != TokenScope::Admin {
            return Err(ScopeRefusal::NotAdminToken);
        }
        if writes && self == TokenScope::Read {
            return Err(ScopeRefusal::ReadOnly);
        }
        Ok(())
    }

    /// Whether an account may make a token of this scope: `admin` only
    /// for an admin.
    pub fn may_be_made_by(self, owner_is_admin: bool) -> bool {
        self != TokenScope::Admin || owner_is_admin
    }
}

impl fmt::Display for TokenScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ScopeRefusal {
    pub fn message(&self) -> &'static str {
        match self {
            ScopeRefusal::ReadOnly => {
                "this token's scope is read: it may only read (GET); make a write token to change things"
            }
            ScopeRefusal::NotAdminToken => "the admin routes need a token of scope admin",
            ScopeRefusal::NotAdmin => "the admin routes are for administrators",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ScopeRefusal::*, TokenScope::*, *};

    #[test]
    fn each_scope_allows_what_it_names_and_never_more_than_its_owner() {
        // (scope, owner admin, writes, admin route) -> answer
        let cases = [
            (Read, false, false, false, Ok(())),
            (Read, false, true, false, Err(ReadOnly)),
            (Read, true, true, false, Err(ReadOnly)),
            (Read, true, false, true, Err(NotAdminToken)),
            (Write, false, true, false, Ok(())),
            (Write, true, true, true, Err(NotAdminToken)),
            (Write, false, false, true, Err(NotAdmin)),
            (Admin, true, true, true, Ok(())),
            (Admin, true, false, false, Ok(())),
            (Admin, false, true, true, Err(NotAdmin)),
            (Admin, false, true, false, Ok(())),
        ];
        for (scope, admin, writes, route, want) in cases {
            assert_eq!(scope.allows(admin, writes, route), want, "{scope} admin={admin} writes={writes} route={route}");
        }
    }

    #[test]
    fn only_admins_make_admin_tokens_and_scopes_read_back() {
        assert!(!Admin.may_be_made_by(false));
        assert!(Admin.may_be_made_by(true) && Read.may_be_made_by(false) && Write.may_be_made_by(false));
        for s in TokenScope::ALL {
            assert_eq!(TokenScope::parse(s.as_str()), Some(s));
        }
        assert_eq!(TokenScope::parse("root"), None);
    }
}
