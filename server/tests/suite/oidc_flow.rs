//! Signing in through a real OpenID Connect provider (oidc-provider on
//! loopback): the whole flow, the session it makes, sign-out with the
//! provider's end-session, a key rotation picked up without a restart.

use crate::oidc_support::{self, location, signed_in_as, DISPLAY_NAME};
use reqwest::{header, StatusCode};

gantry_testkit::timed_test! {
    limit = 60;
    async fn a_directory_user_signs_in_through_the_provider_and_out_again() {
        let s = oidc_support::start().await;
        let client = s.browser();
        // The sign-in page offers the provider as a plain link (no JavaScript needed).
        let page = client.get(s.url("/login?next=/machines")).send().await.unwrap().text().await.unwrap();
        assert!(page.contains(&format!("Sign in with {DISPLAY_NAME}")), "{page}");
        assert!(page.contains(r#"href="/auth/oidc/start?next=/machines""#), "{page}");

        // The start sends the browser to the provider with PKCE, state and nonce.
        let res = client.get(s.url("/auth/oidc/start?next=/machines")).send().await.unwrap();
        let to = location(&res);
        assert!(to.starts_with(&format!("{}/auth?", s.provider.issuer())), "{to}");
        for part in ["code_challenge_method=S256", "code_challenge=", "state=", "nonce=", "response_type=code", "scope=openid"] {
            assert!(to.contains(part), "{part} missing in {to}");
        }
        let before = res.headers().get(header::SET_COOKIE).map(|c| c.to_str().unwrap().to_string());

        let res = s.sign_in(&client, "alice").await;
        assert_eq!(location(&res), "/machines", "on to where the sign-in was asked from");
        let after = res.headers()[header::SET_COOKIE].to_str().unwrap().to_string();
        assert!(after.starts_with("gantry_session=") && after.contains("HttpOnly"), "{after}");
        assert_ne!(Some(after), before, "a new session id once signed in");
        assert_eq!(signed_in_as(&s, &client).await.as_deref(), Some("alice"));
        let (group,): (String,) = sqlx::query_as(
            "SELECT g.name FROM users u JOIN groups g ON g.id = u.group_id WHERE u.username = 'alice'",
        )
        .fetch_one(&s.pool)
        .await
        .unwrap();
        assert_eq!(group, "default", "the mapped directory group's Gantry group");
        let (what,): (String,) = sqlx::query_as("SELECT detail FROM audit_log WHERE action = 'auth.sign_in' ORDER BY id DESC LIMIT 1")
            .fetch_one(&s.pool)
            .await
            .unwrap();
        assert!(what.starts_with("alice signed in through OpenID Connect"), "{what}");

        // Sign-out ends the Gantry session and offers the provider's end-session.
        let res = client.post(s.url("/api/logout")).header(header::ACCEPT, "text/html").send().await.unwrap();
        assert_eq!(location(&res), "/login?signed_out=oidc");
        assert_eq!(signed_in_as(&s, &client).await, None);
        let page = client.get(s.url("/login?signed_out=oidc")).send().await.unwrap().text().await.unwrap();
        assert!(page.contains(&format!("Sign out of {DISPLAY_NAME} too")), "{page}");
        let res = client.get(s.url("/auth/oidc/end-session")).send().await.unwrap();
        let end = location(&res);
        assert!(end.starts_with(&format!("{}/session/end?", s.provider.issuer())), "{end}");
        assert!(end.contains("id_token_hint=") && end.contains("post_logout_redirect_uri="), "{end}");
        // The hint was the ended session's, once.
        let again = location(&client.get(s.url("/auth/oidc/end-session")).send().await.unwrap());
        assert!(!again.contains("id_token_hint="), "{again}");
    }
}

gantry_testkit::timed_test! {
    limit = 60;
    async fn a_key_rotation_at_the_provider_needs_no_restart() {
        let s = oidc_support::start().await;
        let first = s.browser();
        assert_eq!(location(&s.sign_in(&first, "alice").await), "/machines");
        let kid = s.provider.rotate_keys().await;
        let jwks = reqwest::get(format!("{}/jwks", s.provider.issuer())).await.unwrap().text().await.unwrap();
        assert!(jwks.contains(&kid) && jwks.matches("\"kid\"").count() == 1, "only the new key is published: {jwks}");
        let second = s.browser();
        assert_eq!(location(&s.sign_in(&second, "carol").await), "/machines", "signed by a key Gantry had not seen");
        assert_eq!(signed_in_as(&s, &second).await.as_deref(), Some("carol"));
    }
}

gantry_testkit::timed_test! {
    limit = 60;
    async fn a_user_in_no_mapped_group_is_told_so_and_gets_no_session() {
        let s = oidc_support::start().await;
        let client = s.browser();
        let res = s.sign_in(&client, "bob").await;
        assert_eq!(location(&res), "/login?sso=no_group");
        assert_eq!(signed_in_as(&s, &client).await, None);
        let page = client.get(s.url("/login?sso=no_group")).send().await.unwrap();
        assert_eq!(page.status(), StatusCode::OK);
        let page = page.text().await.unwrap();
        assert!(page.contains("Your account is in no group that may use Gantry — ask your administrator."), "{page}");
    }
}
