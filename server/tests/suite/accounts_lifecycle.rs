//! Account lifecycle through the admin console's server functions (issue
//! 11): a temporary password the user must change before anything else,
//! role and group changes (the quota follows the group), the last admin
//! kept, ids never reused, every change audited, and the audit log
//! filtered by actor, action and time, newest first, in pages.

use crate::security_support;

use gantry_core::Role;
use gantry_platform::accounts;
use gantry_server::security::Security;
use security_support::{gate, start, Secured, ADMIN_PASSWORD};
use serde_json::Value;

async fn call(server: &Secured, c: &reqwest::Client, endpoint: &str, form: &[(&str, &str)]) -> (u16, Value) {
    let res = c.post(server.url(&format!("/api/{endpoint}"))).form(form).send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

gantry_testkit::timed_test! {
    async fn a_reset_password_must_be_changed_before_anything_else() {
        let dir = tempfile::tempdir().unwrap();
        let server = start(&dir, Security { gate: gate(2), ..Security::default() }, false).await;
        let erin = server.add_user("erin", "erin-password-1", Role::User).await.to_string();
        let (admin, user) = (server.client(), server.client());
        server.login(&admin, "admin", ADMIN_PASSWORD).await;
        let (status, row) = call(&server, &admin, "admin/reset_password", &[("user_id", &erin), ("password", "temporary-1")]).await;
        assert_eq!(status, 200, "{row}");
        assert_eq!(row["must_change_password"], true);

        assert_eq!(server.login(&user, "erin", "erin-password-1").await.status(), 401, "the old password is gone");
        let signed_in: Value = server.login(&user, "erin", "temporary-1").await.json().await.unwrap();
        assert_eq!(signed_in["must_change_password"], true);
        let page = user.get(server.url("/machines")).send().await.unwrap();
        assert_eq!(page.headers()["location"], "/account/password", "pages wait for the new password");
        let (status, body) = call(&server, &user, "my_quota", &[]).await;
        assert_eq!(status, 403, "{body}");
        assert_eq!(user.get(server.url("/account/password")).send().await.unwrap().status(), 200);

        let (status, body) = call(&server, &user, "change_password", &[("current", "temporary-1"), ("new", "erin-own-2"), ("repeat", "erin-own-3")]).await;
        assert_eq!((status, body["Invalid"].as_str()), (400, Some("the two new passwords differ")));
        let (status, body) = call(&server, &user, "change_password", &[("current", "temporary-1"), ("new", "erin-own-2"), ("repeat", "erin-own-2")]).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(call(&server, &user, "my_quota", &[]).await.0, 200, "this session goes on");
        assert_eq!(user.get(server.url("/machines")).send().await.unwrap().status(), 200);
        assert_eq!(server.login(&server.client(), "erin", "erin-own-2").await.status(), 200);
    }
}

gantry_testkit::timed_test! {
    async fn role_and_group_changes_the_last_admin_and_ids() {
        let dir = tempfile::tempdir().unwrap();
        let server = start(&dir, Security { gate: gate(2), ..Security::default() }, false).await;
        accounts::create_group(&server.pool, None, "ml-team", 8).await.unwrap();
        let fay = server.add_user("fay", "fay-password-1", Role::User).await;
        let admin = server.client();
        server.login(&admin, "admin", ADMIN_PASSWORD).await;
        let me: i64 = sqlx::query_scalar("SELECT id FROM users WHERE username = 'admin'").fetch_one(&server.pool).await.unwrap();

        let (status, row) = call(&server, &admin, "admin/set_user_group", &[("user_id", &fay.to_string()), ("group", "ml-team")]).await;
        assert_eq!((status, row["group_name"].as_str()), (200, Some("ml-team")));
        let fay_now = accounts::user_by_id(&server.pool, fay).await.unwrap().unwrap();
        assert_eq!(fay_now.group_quota.gpu_quota, 8, "the quota is the new group's");
        let (status, body) = call(&server, &admin, "admin/set_user_group", &[("user_id", &fay.to_string()), ("group", "nope")]).await;
        assert_eq!(status, 404, "{body}");

        for (endpoint, form) in [
            ("admin/set_user_role", vec![("user_id", me.to_string()), ("role", "user".to_string())]),
            ("admin/set_user_enabled", vec![("user_id", me.to_string()), ("action", "disable".to_string())]),
        ] {
            let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let (status, body) = call(&server, &admin, endpoint, &form).await;
            assert_eq!(status, 409, "{endpoint}: {body}");
        }
        let (status, _) = call(&server, &admin, "admin/set_user_role", &[("user_id", &fay.to_string()), ("role", "root")]).await;
        assert_eq!(status, 400);

        // Ids are never handed out twice, even after a delete.
        let gone = server.add_user("temp", "temp-password-1", Role::User).await;
        sqlx::query("DELETE FROM users WHERE id = ?").bind(gone).execute(&server.pool).await.unwrap();
        assert!(server.add_user("next", "next-password-1", Role::User).await > gone);
    }
}

gantry_testkit::timed_test! {
    async fn the_audit_log_filters_and_pages_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let server = start(&dir, Security { gate: gate(2), ..Security::default() }, false).await;
        let gus = server.add_user("gus", "gus-password-1", Role::User).await.to_string();
        let admin = server.client();
        server.login(&admin, "admin", ADMIN_PASSWORD).await;
        for i in 0..60 {
            let action = if i % 2 == 0 { "disable" } else { "enable" };
            assert_eq!(call(&server, &admin, "admin/set_user_enabled", &[("user_id", &gus), ("action", action)]).await.0, 200);
        }
        call(&server, &admin, "admin/set_user_role", &[("user_id", &gus), ("role", "admin")]).await;

        let (status, page) = call(&server, &admin, "admin/audit_page", &[("actor", "admin"), ("action", "user.disable")]).await;
        assert_eq!(status, 200, "{page}");
        let rows = page["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 30);
        assert!(rows.iter().all(|r| r["action"] == "user.disable" && r["actor"] == "admin"));
        let ids: Vec<i64> = rows.iter().map(|r| r["id"].as_i64().unwrap()).collect();
        assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first");

        let (_, family) = call(&server, &admin, "admin/audit_page", &[("action", "user.")]).await;
        let first = family["rows"].as_array().unwrap();
        assert_eq!(first.len(), 50, "one page");
        assert_eq!(first[0]["action"], "user.role", "the newest change comes first");
        let before = family["next_before"].as_i64().unwrap().to_string();
        let (_, next) = call(&server, &admin, "admin/audit_page", &[("action", "user."), ("before", &before)]).await;
        let rest = next["rows"].as_array().unwrap();
        assert!(rest.len() >= 11 && rest.iter().all(|r| r["id"].as_i64().unwrap() < before.parse::<i64>().unwrap()));

        let (_, none) = call(&server, &admin, "admin/audit_page", &[("until", "2000-01-01")]).await;
        assert!(none["rows"].as_array().unwrap().is_empty(), "nothing before 2000");
        let (status, _) = call(&server, &admin, "admin/audit_page", &[("since", "yesterday")]).await;
        assert_eq!(status, 400);
    }
}

gantry_testkit::timed_test! {
    async fn a_bad_audit_page_position_is_refused_not_shown_as_an_empty_log() {
        let dir = tempfile::tempdir().unwrap();
        let server = start(&dir, Security { gate: gate(2), ..Security::default() }, false).await;
        let admin = server.client();
        server.login(&admin, "admin", ADMIN_PASSWORD).await;
        // The log is not empty: the sign-in above is in it.
        let (status, page) = call(&server, &admin, "admin/audit_page", &[]).await;
        assert_eq!(status, 200, "{page}");

        // The server function refuses a position no entry can have.
        for before in ["-5", "0"] {
            let (status, body) = call(&server, &admin, "admin/audit_page", &[("before", before)]).await;
            assert_eq!(status, 400, "before={before}: {body}");
            assert!(body["Invalid"].as_str().is_some_and(|m| m.contains("before")), "before={before}: {body}");
        }
        let (status, _) = call(&server, &admin, "admin/audit_page", &[("before", "abc")]).await;
        assert_eq!(status, 400);

        // The page says so, rather than "Nothing in the log matches.".
        for before in ["abc", "-5"] {
            let res = admin.get(server.url(&format!("/admin/audit?before={before}"))).send().await.unwrap();
            let html = res.text().await.unwrap();
            assert!(!html.contains(r#"data-testid="audit-empty""#), "before={before}: shown as an empty log");
            assert!(html.contains(r#"data-testid="form-error""#) && html.contains("must be an audit entry id"), "before={before}: no error shown");
        }
    }
}
