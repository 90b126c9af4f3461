//! Who a checked ID token names: its subject (with the issuer: two
//! providers' `sub` values may collide), the username from the configured
//! claim (`--oidc-username-claim`), the email, and the groups from the
//! configured claim (`--oidc-groups-claim`). A claim may be a dotted path
//! into nested objects (Keycloak's `realm_access.roles`); groups may be a
//! list of strings or one string.

use crate::sso::ExternalIdentity;
use serde_json::Value;

fn claim<'a>(claims: &'a Value, path: &str) -> Option<&'a Value> {
    // A claim whose own name has a dot (`https://example.org/groups`, as
    // Auth0 names them) is read as it is first.
    if let Some(v) = claims.get(path) {
        return Some(v);
    }
    path.split('.').try_fold(claims, |v, part| v.get(part))
}

/// The identity in `claims`, or why the token cannot sign anyone in (said
/// to the administrator in the log; the person sees a fixed text).
pub fn identity_from_claims(
    claims: &Value,
    username_claim: &str,
    groups_claim: &str,
) -> Result<ExternalIdentity, String> {
    fn text(v: Option<&Value>) -> Option<&str> {
        v.and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty())
    }
    let issuer = text(claims.get("iss")).ok_or("the ID token has no issuer (iss)")?;
    let sub = text(claims.get("sub")).ok_or("the ID token has no subject (sub)")?;
    let username = text(claim(claims, username_claim))
        .ok_or_else(|| format!("the ID token has no `{username_claim}` claim (see --oidc-username-claim)"))?;
    let email = text(claims.get("email")).map(str::to_string);
    let groups = match claim(claims, groups_claim) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(one)) => vec![one.trim().to_string()],
        Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).map(|g| g.trim().to_string()).collect(),
        Some(_) => return Err(format!("the ID token's `{groups_claim}` claim is neither a string nor a list")),
    };
    let mut groups: Vec<String> = groups.into_iter().filter(|g| !g.is_empty()).collect();
    groups.sort();
    groups.dedup();
    Ok(ExternalIdentity {
        provider: "oidc".into(),
        subject: format!("{issuer}|{sub}"),
        username: username.to_string(),
        email,
        groups,
    })
}

#[cfg(test)]
mod tests {
    use super::identity_from_claims;
    use serde_json::json;

    #[test]
    fn reads_subject_username_email_and_groups() {
        let claims = json!({"iss": "https://idp.example", "sub": "42", "preferred_username": " alice ",
            "email": "alice@example.org", "groups": ["gpu", "ml", "gpu", ""]});
        let id = identity_from_claims(&claims, "preferred_username", "groups").unwrap();
        assert_eq!(id.provider, "oidc");
        assert_eq!(id.subject, "https://idp.example|42");
        assert_eq!(id.username, "alice");
        assert_eq!(id.email.as_deref(), Some("alice@example.org"));
        assert_eq!(id.groups, ["gpu", "ml"]);
    }

    #[test]
    fn nested_and_single_string_groups_and_none() {
        let claims = json!({"iss": "i", "sub": "s", "upn": "bob@corp", "realm_access": {"roles": ["admins"]},
            "https://example.org/groups": "team"});
        assert_eq!(identity_from_claims(&claims, "upn", "realm_access.roles").unwrap().groups, ["admins"]);
        assert_eq!(identity_from_claims(&claims, "upn", "https://example.org/groups").unwrap().groups, ["team"]);
        let none = identity_from_claims(&claims, "upn", "groups").unwrap();
        assert!(none.groups.is_empty() && none.email.is_none());
    }

    #[test]
    fn missing_or_odd_claims_are_refused_with_the_claim_named() {
        let claims = json!({"iss": "i", "sub": "s", "groups": 7});
        let err = identity_from_claims(&claims, "preferred_username", "groups").unwrap_err();
        assert!(err.contains("preferred_username") && err.contains("--oidc-username-claim"), "{err}");
        let claims = json!({"iss": "i", "sub": "s", "name": "x", "groups": 7});
        assert!(identity_from_claims(&claims, "name", "groups").unwrap_err().contains("groups"));
        assert!(identity_from_claims(&json!({"iss": "i", "name": "x"}), "name", "groups").unwrap_err().contains("sub"));
    }
}
