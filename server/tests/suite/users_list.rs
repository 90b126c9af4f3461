//! The admin console's users list is a window: 50 users a page, filtered by
//! part of the name, a group and a status, with counts per status; the
//! filter text is taken literally; only admins may ask; a status that is
//! none gets a 400 naming the choices.

use crate::common;

use common::{login, TestServer, ADMIN_PASSWORD};
use gantry_platform::accounts;
use reqwest::StatusCode;
use serde_json::Value;

gantry_testkit::timed_test! {
    async fn the_users_list_pages_and_filters() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        accounts::create_group(&server.pool, None, "ml", 4).await.unwrap();
        let ml: i64 = sqlx::query_scalar("SELECT id FROM groups WHERE name = 'ml'").fetch_one(&server.pool).await.unwrap();
        let default: i64 = sqlx::query_scalar("SELECT group_id FROM users WHERE username = 'admin'").fetch_one(&server.pool).await.unwrap();
        // 120 users written straight into the table (hashing 120 passwords
        // would test argon2, not the list): every third disabled, half in ml.
        let mut tx = server.pool.begin().await.unwrap();
        for i in 0..120 {
            sqlx::query("INSERT INTO users (username, password_hash, role, group_id, created_at, disabled) VALUES (?, 'x', 'user', ?, 0, ?)")
                .bind(format!("u{i:03}"))
                .bind(if i % 2 == 0 { ml } else { default })
                .bind((i % 3 == 0) as i64)
                .execute(&mut *tx)
                .await
                .unwrap();
        }
        sqlx::query("INSERT INTO users (username, password_hash, role, group_id, created_at) VALUES ('odd_name%', 'x', 'user', ?, 0)")
            .bind(default)
            .execute(&mut *tx)
            .await
            .unwrap();
        tx.commit().await.unwrap();

        let client = server.client();
        assert_eq!(login(&server, &client, "admin", ADMIN_PASSWORD).await.status(), StatusCode::OK);
        let window = |form: Vec<(&'static str, &'static str)>| {
            let req = client.post(server.url("/api/admin/users_window")).form(&form);
            async move {
                let res = req.send().await.unwrap();
                let status = res.status();
                (status, res.json::<Value>().await.unwrap_or(Value::Null))
            }
        };
        let names = |w: &Value| -> Vec<String> { w["rows"].as_array().unwrap().iter().map(|r| r["username"].as_str().unwrap().to_string()).collect() };

        // 122 users (admin, 120, odd_name%): 50 a page, by username.
        let (status, first) = window(vec![]).await;
        assert_eq!(status, StatusCode::OK, "{first}");
        assert_eq!((first["counts"]["total"].as_i64(), first["counts"]["pages"].as_i64()), (Some(122), Some(3)));
        assert_eq!(names(&first).len(), 50);
        assert_eq!(names(&first)[0], "admin");
        let (_, third) = window(vec![("page", "3")]).await;
        assert_eq!(names(&third).len(), 22);
        assert_eq!(names(&third).last().map(String::as_str), Some("u119"));

        // Filters: status with per-status counts, group, name taken literally.
        let (_, disabled) = window(vec![("state", "disabled")]).await;
        assert_eq!(disabled["counts"]["total"], 40);
        assert_eq!(disabled["counts"]["by_state"], serde_json::json!([["active", 82], ["disabled", 40]]));
        let (_, in_ml) = window(vec![("group", "ml"), ("state", "active")]).await;
        assert_eq!(in_ml["counts"]["total"], 40, "60 in ml, 20 of them disabled");
        let (_, percent) = window(vec![("user", "%")]).await;
        assert_eq!(names(&percent), ["odd_name%"], "'%' matches itself, not everything");
        let (_, some) = window(vec![("user", "u11")]).await;
        assert_eq!(names(&some), ["u110", "u111", "u112", "u113", "u114", "u115", "u116", "u117", "u118", "u119"]);

        let (status, bad) = window(vec![("state", "gone")]).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(bad.to_string().contains("active, disabled"), "{bad}");
        let user = server.client();
        server.add_user("erin", "erins-password", gantry_core::Role::User).await;
        assert_eq!(login(&server, &user, "erin", "erins-password").await.status(), StatusCode::OK);
        let res = user.post(server.url("/api/admin/users_window")).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::FORBIDDEN);
    }
}
