//! What an OpenID Connect sign-in refuses: a `state` that is not the
//! session's, a code used twice, an ID token signed by a key the provider
//! never published, an expired one; an unreachable provider gets the
//! sign-in page saying so with the password form still there; a bad
//! issuer stops the start with the reason. None of them makes a session,
//! and the page says nothing about whether an account exists.

use crate::{
    common::ADMIN_PASSWORD,
    oidc_support::{self, location, signed_in_as},
};
use gantry_platform::sso::oidc::Oidc;
use gantry_testkit::oidc::Tokens;
use reqwest::StatusCode;

fn with_query(url: &reqwest::Url, key: &str, value: &str) -> reqwest::Url {
    let mut out = url.clone();
    let pairs: Vec<(String, String)> = url
        .query_pairs()
        .map(|(k, v)| (k.to_string(), if k == key { value.to_string() } else { v.to_string() }))
        .collect();
    out.query_pairs_mut().clear().extend_pairs(pairs);
    out
}

async fn refusals(s: &oidc_support::OidcServer) -> i64 {
    sqlx::query_as::<_, (i64,)>("SELECT COUNT(*) FROM audit_log WHERE action = 'auth.sign_in_failed'")
        .fetch_one(&s.pool)
        .await
        .unwrap()
        .0
}

gantry_testkit::timed_test! {
    limit = 60;
    async fn a_tampered_state_and_a_replayed_code_are_refused() {
        let s = oidc_support::start().await;
        let client = s.browser();
        let back = s.through_provider(&client, "alice").await;
        let res = client.get(with_query(&back, "state", "forged-state")).send().await.unwrap();
        assert_eq!(location(&res), "/login?sso=stale");
        assert_eq!(signed_in_as(&s, &client).await, None);
        // The started sign-in was used up by that answer: the real one is refused too.
        assert_eq!(location(&client.get(back.clone()).send().await.unwrap()), "/login?sso=stale");
        assert_eq!(refusals(&s).await, 2);

        // A good sign-in, then its code again: in the same session (no
        // sign-in awaits it) and slipped into another session's sign-in.
        let victim = s.browser();
        let back = s.through_provider(&victim, "alice").await;
        assert_eq!(location(&victim.get(back.clone()).send().await.unwrap()), "/machines");
        assert_eq!(location(&victim.get(back.clone()).send().await.unwrap()), "/login?sso=stale");
        let attacker = s.browser();
        let own = s.through_provider(&attacker, "carol").await;
        let code = back.query_pairs().find(|(k, _)| k == "code").unwrap().1.to_string();
        let res = attacker.get(with_query(&own, "code", &code)).send().await.unwrap();
        assert_eq!(location(&res), "/login?sso=refused");
        assert_eq!(signed_in_as(&s, &attacker).await, None);
        let page = attacker.get(s.url("/login?sso=refused")).send().await.unwrap().text().await.unwrap();
        assert!(page.contains("did not succeed") && page.contains(r#"name="password""#), "{page}");
    }
}

gantry_testkit::timed_test! {
    limit = 60;
    async fn tokens_signed_by_another_key_or_expired_are_refused() {
        let s = oidc_support::start().await;
        for tokens in [Tokens::Rogue, Tokens::Expired] {
            s.provider.set_tokens(tokens).await;
            let client = s.browser();
            let res = s.sign_in(&client, "alice").await;
            assert_eq!(location(&res), "/login?sso=refused", "{tokens:?}");
            assert_eq!(signed_in_as(&s, &client).await, None, "{tokens:?}");
        }
        let (rogue, expired): (String, String) = sqlx::query_as(
            "SELECT (SELECT detail FROM audit_log WHERE action = 'auth.sign_in_failed' ORDER BY id LIMIT 1),
                    (SELECT detail FROM audit_log WHERE action = 'auth.sign_in_failed' ORDER BY id DESC LIMIT 1)",
        )
        .fetch_one(&s.pool)
        .await
        .unwrap();
        assert!(rogue.contains("Signature verification failed"), "{rogue}");
        assert!(expired.contains("Expired"), "{expired}");
        let (accounts,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM users WHERE username = 'alice'").fetch_one(&s.pool).await.unwrap();
        assert_eq!(accounts, 0, "no account made from a refused token");
        // Good tokens again: signed in.
        s.provider.set_tokens(Tokens::Normal).await;
        assert_eq!(location(&s.sign_in(&s.browser(), "alice").await), "/machines");
    }
}

gantry_testkit::timed_test! {
    limit = 60;
    async fn an_unreachable_provider_gets_a_clear_page_and_passwords_still_work() {
        let mut s = oidc_support::start().await;
        // The provider goes away after Gantry discovered it.
        let port = s.provider.port;
        s.provider.stop();
        let client = s.browser();
        let res = client.get(s.url("/auth/oidc/start")).send().await.unwrap();
        assert_eq!(location(&res), "/login?sso=unreachable", "provider was on {port}");
        let page = client.get(s.url("/login?sso=unreachable")).send().await.unwrap();
        assert_eq!(page.status(), StatusCode::OK);
        let page = page.text().await.unwrap();
        assert!(page.contains("cannot be reached just now"), "{page}");
        assert!(page.contains(r#"name="password""#), "the password form is still there: {page}");
        let res = gantry_testkit::serve::sign_in(&client, s.addr, "admin", ADMIN_PASSWORD).await;
        assert!(res.status().is_success() || res.status().is_redirection(), "{}", res.status());
        assert_eq!(signed_in_as(&s, &client).await.as_deref(), Some("admin"));
    }
}

gantry_testkit::timed_test! {
    async fn a_bad_issuer_stops_the_start_with_the_reason() {
        let origin = "http://127.0.0.1:3000";
        let err = Oidc::discover(oidc_support::settings("not a url", origin)).await.unwrap_err().to_string();
        assert!(err.contains("--oidc-issuer") && err.contains("not a URL"), "{err}");
        // Nothing listens on port 1.
        let err = Oidc::discover(oidc_support::settings("http://127.0.0.1:1/realms/x", origin)).await.unwrap_err().to_string();
        assert!(err.contains("--oidc-issuer") && err.contains("cannot read the OpenID Connect discovery document"), "{err}");
        let mut settings = oidc_support::settings("http://127.0.0.1:1", origin);
        settings.client_id = " ".into();
        let err = Oidc::discover(settings).await.unwrap_err().to_string();
        assert!(err.contains("--oidc-client-id"), "{err}");
    }
}
