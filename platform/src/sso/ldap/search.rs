//! The two searches of a directory sign-in: the user's entry, and its
//! groups. Values put into a filter are escaped per RFC 4515 (`\`, `*`,
//! `(`, `)`, NUL), so a user name like `*)(uid=*` is a literal name and
//! cannot widen or change the filter.

use super::{failure, LdapConfig, LdapFailure};
use ldap3::{ldap_escape, Scope, SearchEntry};

/// Fills `{username}` and `{dn}` of a configured filter with escaped values.
/// One pass over the template, so a value holding `{dn}` is never filled
/// in again.
pub fn fill(template: &str, username: &str, dn: &str) -> String {
    let mut out = String::with_capacity(template.len() + username.len() + dn.len());
    let mut rest = template;
    while let Some(at) = rest.find('{') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("{username}") {
            out.push_str(&ldap_escape(username));
            rest = after;
        } else if let Some(after) = tail.strip_prefix("{dn}") {
            out.push_str(&ldap_escape(dn));
            rest = after;
        } else {
            out.push('{');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

/// The one entry `username` names under the user base. None, or several
/// (an ambiguous filter): a wrong sign-in, with the reason in the log.
pub(super) async fn find_user(
    cfg: &LdapConfig,
    ldap: &mut ldap3::Ldap,
    username: &str,
) -> Result<SearchEntry, LdapFailure> {
    let filter = fill(&cfg.user_filter, username, "");
    let attrs = [cfg.username_attr.as_str(), "mail", "memberOf"];
    let (entries, _) = ldap
        .search(&cfg.user_base, Scope::Subtree, &filter, attrs.to_vec())
        .await
        .map_err(failure)?
        .success()
        .map_err(failure)?;
    if entries.len() > 1 {
        tracing::warn!(count = entries.len(), "LDAP user filter matched several entries; sign-in refused");
        return Err(LdapFailure::BadCredentials);
    }
    entries.into_iter().next().map(SearchEntry::construct).ok_or(LdapFailure::BadCredentials)
}

/// The account's groups: with a group base, the DN and `cn` of each entry
/// the group filter finds (so a mapping may name either); without one, the
/// user entry's `memberOf` values (Active Directory, OpenLDAP's memberof
/// overlay).
pub(super) async fn groups_of(
    cfg: &LdapConfig,
    ldap: &mut ldap3::Ldap,
    user: &SearchEntry,
) -> Result<Vec<String>, LdapFailure> {
    let Some(base) = &cfg.group_base else {
        return Ok(user.attrs.get("memberOf").cloned().unwrap_or_default());
    };
    let username = user.attrs.get(&cfg.username_attr).and_then(|v| v.first()).map(String::as_str).unwrap_or("");
    let filter = fill(&cfg.group_filter, username, &user.dn);
    let (entries, _) =
        ldap.search(base, Scope::Subtree, &filter, vec!["cn"]).await.map_err(failure)?.success().map_err(failure)?;
    let mut groups = Vec::new();
    for e in entries.into_iter().map(SearchEntry::construct) {
        groups.extend(e.attrs.get("cn").into_iter().flatten().cloned());
        groups.push(e.dn);
    }
    Ok(groups)
}

#[cfg(test)]
mod tests {
    use super::fill;

    #[test]
    fn filter_values_are_escaped() {
        assert_eq!(fill("(uid={username})", "alice", ""), "(uid=alice)");
        assert_eq!(fill("(uid={username})", "*)(uid=*", ""), "(uid=\\2a\\29\\28uid=\\2a)");
        assert_eq!(fill("(member={dn})", "", "cn=a\\,b,dc=x"), "(member=cn=a\\5c,b,dc=x)");
        assert_eq!(fill("(uid={username})", "a\0b", ""), "(uid=a\\00b)");
        assert_eq!(fill("(&(member={dn})(x={username}))", "{dn}", "cn=u"), "(&(member=cn=u)(x={dn}))");
    }
}
