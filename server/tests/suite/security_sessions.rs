//! Sessions (issue 11): renewed on use — cheaply, a write only once per
//! renewal period — and ended after inactivity, measured by an injected
//! clock; an account that is disabled, demoted or deleted loses its open
//! sessions at once (the next request answers 401).

use crate::security_support;

use gantry_core::Role;
use gantry_server::{
    router,
    security::{Clock, Security},
};
use security_support::{gate, start, ADMIN_PASSWORD};

async fn quota(server: &security_support::Secured, c: &reqwest::Client) -> reqwest::Response {
    c.post(server.url("/api/my_quota")).send().await.unwrap()
}

gantry_testkit::timed_test! {
    async fn sessions_are_renewed_on_use_and_end_after_inactivity() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Clock::manual(1_800_000_000);
        let security = Security { session_idle_secs: 3600, clock: clock.clone(), gate: gate(2), ..Security::default() };
        let renew = security.renew_after_secs();
        let server = start(&dir, security, false).await;
        server.add_user("dana", "dana-password-1", Role::User).await;
        let c = server.client();
        assert_eq!(server.login(&c, "dana", "dana-password-1").await.status(), 200);
        assert_eq!(quota(&server, &c).await.status(), 200, "first use stamps the session");
        // Within the renewal period nothing is written (no new cookie).
        let quiet = quota(&server, &c).await;
        assert_eq!(quiet.status(), 200);
        assert!(quiet.headers().get("set-cookie").is_none(), "no session write on every request");

        clock.advance(3000);
        let renewed = quota(&server, &c).await;
        assert_eq!(renewed.status(), 200);
        assert!(renewed.headers().get("set-cookie").is_some(), "used after {renew}s or more: renewed");
        clock.advance(3000); // 6000 s after sign-in, 3000 s after last use
        assert_eq!(quota(&server, &c).await.status(), 200, "activity keeps the session");

        clock.advance(3601);
        assert_eq!(quota(&server, &c).await.status(), 401, "idle longer than the limit");
        let page = c.get(server.url("/machines")).send().await.unwrap();
        assert_eq!(page.headers()["location"], "/login?next=/machines");
    }
}

gantry_testkit::timed_test! {
    async fn disabled_demoted_and_deleted_accounts_lose_their_open_sessions() {
        let dir = tempfile::tempdir().unwrap();
        let server = start(&dir, Security { gate: gate(2), ..Security::default() }, false).await;
        let bob = server.add_user("bob", "bob-password-1", Role::User).await;
        let second = server.add_user("second", "second-password-1", Role::Admin).await;
        let carol = server.add_user("carol", "carol-password-1", Role::User).await;
        let (admin, b, s, k) = (server.client(), server.client(), server.client(), server.client());
        assert_eq!(server.login(&admin, "admin", ADMIN_PASSWORD).await.status(), 200);
        assert_eq!(server.login(&b, "bob", "bob-password-1").await.status(), 200);
        assert_eq!(server.login(&s, "second", "second-password-1").await.status(), 200);
        assert_eq!(server.login(&k, "carol", "carol-password-1").await.status(), 200);
        assert_eq!(quota(&server, &b).await.status(), 200);
        assert_eq!(s.post(server.url("/api/admin/users")).send().await.unwrap().status(), 200);

        let off = admin.post(server.url("/api/admin/set_user_enabled")).form(&[("user_id", bob.to_string().as_str()), ("action", "disable")]).send().await.unwrap();
        assert_eq!(off.status(), 200, "{}", off.text().await.unwrap());
        assert_eq!(quota(&server, &b).await.status(), 401, "a disabled user's open session ends");
        let refused = server.login(&b, "bob", "bob-password-1").await;
        assert_eq!(refused.status(), 409);
        assert!(refused.text().await.unwrap().contains("disabled"));
        admin.post(server.url("/api/admin/set_user_enabled")).form(&[("user_id", bob.to_string().as_str()), ("action", "enable")]).send().await.unwrap();
        assert_eq!(server.login(&b, "bob", "bob-password-1").await.status(), 200);

        let demote = admin.post(server.url("/api/admin/set_user_role")).form(&[("user_id", second.to_string().as_str()), ("role", "user")]).send().await.unwrap();
        assert_eq!(demote.status(), 200);
        assert_eq!(s.post(server.url("/api/admin/users")).send().await.unwrap().status(), 401, "a demoted admin's session ends");

        // Her sign-in is in the audit log: the trail stays, without its actor.
        sqlx::query("UPDATE audit_log SET actor_id = NULL WHERE actor_id = ?").bind(carol).execute(&server.pool).await.unwrap();
        sqlx::query("DELETE FROM users WHERE id = ?").bind(carol).execute(&server.pool).await.unwrap();
        assert_eq!(quota(&server, &k).await.status(), 401, "a deleted account's session ends");
    }
}

gantry_testkit::timed_test! {
    async fn expired_sessions_are_still_deleted_after_a_failed_or_panicking_pass() {
        use std::sync::{
            atomic::{AtomicUsize, Ordering},
            Arc,
        };
        use tower_sessions_core::ExpiredDeletion;
        let dir = tempfile::tempdir().unwrap();
        let server = start(&dir, Security { gate: gate(2), ..Security::default() }, false).await;
        // As the store writes expiry dates (text).
        sqlx::query("INSERT INTO tower_sessions (id, data, expiry_date) VALUES ('long-expired', x'80', '2000-01-01 00:00:00'), ('live', x'80', '2999-01-01 00:00:00')")
            .execute(&server.pool)
            .await
            .unwrap();
        // The real store, behind a first pass that fails (a locked
        // database) and a second that panics.
        let store = tower_sessions_sqlx_store::SqliteStore::new(server.pool.clone());
        let calls = Arc::new(AtomicUsize::new(0));
        let (done, mut passes) = tokio::sync::mpsc::unbounded_channel::<usize>();
        let cleanup = tokio::spawn(router::delete_expired_sessions(std::time::Duration::from_millis(1), move || {
            let (n, store, done) = (calls.fetch_add(1, Ordering::SeqCst), store.clone(), done.clone());
            async move {
                let result = match n {
                    0 => Err(tower_sessions_core::session_store::Error::Backend("database is locked".into())),
                    1 => panic!("a bug in one pass"),
                    _ => store.delete_expired().await,
                };
                let _ = done.send(n);
                result
            }
        }));
        // Pass 0 failed, pass 1 panicked (it reports nothing); pass 2 ran.
        assert_eq!(passes.recv().await, Some(0));
        assert_eq!(passes.recv().await, Some(2), "the loop ended after a failed or panicking pass");
        let left: Vec<String> = sqlx::query_scalar("SELECT id FROM tower_sessions WHERE id IN ('long-expired', 'live')").fetch_all(&server.pool).await.unwrap();
        assert_eq!(left, vec!["live".to_string()], "the third pass deleted the expired session, and only it");
        cleanup.abort();
    }
}

gantry_testkit::timed_test! {
    async fn a_request_still_running_when_its_session_signs_out_does_not_bring_it_back() {
        // The first request after sign-in renews "last seen", so its session
        // is written back when it ends — after a sign-out in another tab.
        let dir = tempfile::tempdir().unwrap();
        let server = start(&dir, Security::default(), false).await;
        server.add_user("dana", "dana-password-1", Role::User).await;
        let res = server.login(&server.client(), "dana", "dana-password-1").await;
        assert_eq!(res.status(), 200);
        let cookie = gantry_testkit::session_cookie(res.headers().get_all("set-cookie").iter().filter_map(|v| v.to_str().ok())).expect("a session cookie");
        let origin = format!("http://{}", server.addr);
        let headers = [("Cookie", cookie.clone()), ("Origin", origin.clone()), ("Content-Type", "application/x-www-form-urlencoded".to_string())];
        let mut running = gantry_testkit::raw_http::body_wanted(server.addr, "POST", "/api/my_quota", &headers, 3).await;

        let signed_out = reqwest::Client::new().post(server.url("/api/logout")).header("Cookie", &cookie).header("Origin", &origin).send().await.unwrap();
        assert!(signed_out.status().is_success(), "{}", signed_out.status());
        tokio::io::AsyncWriteExt::write_all(&mut running, b"a=1").await.unwrap();
        let answered = gantry_testkit::raw_http::reply(running).await;
        assert!(answered.status < 500, "{answered:?}");

        let again = reqwest::Client::new().post(server.url("/api/my_quota")).header("Cookie", &cookie).header("Origin", &origin).send().await.unwrap();
        assert_eq!(again.status(), 401, "the signed-out session came back");
    }
}
