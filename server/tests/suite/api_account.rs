//! The account's other API routes over real HTTP, answering as their pages
//! do: SSH keys (added from `ssh-keygen`'s line, listed with the same
//! fingerprint, a bad key refused with nothing stored, another account's
//! key 404, removed), notifications (listed with the unread count, marked
//! read; another's 404) and a machine's schedule (set, read back; a bad
//! time 400 and nothing changed; another group's machine 404).

use crate::common;

use common::{count, TestServer};
use gantry_core::Role;
use gantry_platform::{accounts, notifications, tokens};
use reqwest::StatusCode;
use serde_json::{json, Value};

async fn call(server: &TestServer, method: &str, path: &str, token: &str, body: Option<Value>) -> (StatusCode, Value) {
    let mut req = reqwest::Client::new().request(method.parse().unwrap(), server.url(path)).bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().await.unwrap();
    let status = res.status();
    (status, res.json().await.unwrap_or(Value::Null))
}

fn refused(answer: &(StatusCode, Value), status: StatusCode, code: &str) {
    assert_eq!((answer.0, answer.1["code"].as_str()), (status, Some(code)), "{}", answer.1);
}

/// A fresh ed25519 key's public line and its fingerprint, from `ssh-keygen`.
fn keygen(dir: &std::path::Path) -> (String, String) {
    let file = dir.join("id_test");
    let made = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "t@test", "-f"])
        .arg(&file)
        .status();
    assert!(made.expect("ssh-keygen (openssh-client) is installed").success());
    let public = std::fs::read_to_string(file.with_extension("pub")).unwrap();
    let listed = std::process::Command::new("ssh-keygen").arg("-lf").arg(file.with_extension("pub")).output().unwrap();
    (public, String::from_utf8_lossy(&listed.stdout).split_whitespace().nth(1).unwrap().to_string())
}

gantry_testkit::timed_test! {
    async fn ssh_keys_notifications_and_schedules_through_the_api() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        accounts::create_group(&server.pool, None, "other", 4).await.unwrap();
        let new = |name, group| accounts::NewUser { username: name, password: "a-good-password", role: Role::User, group: Some(group) };
        let alice = accounts::create_user(&server.pool, None, new("alice", "default")).await.unwrap();
        let carol = accounts::create_user(&server.pool, None, new("carol", "other")).await.unwrap();
        let (_, a) = tokens::create(&server.pool, &alice, "a").await.unwrap();
        let (_, c) = tokens::create(&server.pool, &carol, "c").await.unwrap();

        // SSH keys.
        let (public, fingerprint) = keygen(dir.path());
        refused(&call(&server, "POST", "/api/v1/ssh-keys", &a, Some(json!({"public_key": "ssh-ed25519 not-a-key"}))).await, StatusCode::BAD_REQUEST, "bad_request");
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM ssh_keys").await, 0);
        let (status, added) = call(&server, "POST", "/api/v1/ssh-keys", &a, Some(json!({"name": "laptop", "public_key": public}))).await;
        assert_eq!(status, StatusCode::CREATED, "{added}");
        assert_eq!(added["key"]["fingerprint"], fingerprint.as_str());
        let (_, list) = call(&server, "GET", "/api/v1/ssh-keys", &a, None).await;
        assert_eq!(list["keys"][0]["name"], "laptop", "{list}");
        assert_eq!(call(&server, "GET", "/api/v1/ssh-keys", &c, None).await.1, json!({"keys": []}));
        let key = added["key"]["id"].as_i64().unwrap();
        refused(&call(&server, "DELETE", &format!("/api/v1/ssh-keys/{key}"), &c, None).await, StatusCode::NOT_FOUND, "not_found");
        assert_eq!(call(&server, "DELETE", &format!("/api/v1/ssh-keys/{key}"), &a, None).await.0, StatusCode::NO_CONTENT);
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM ssh_keys").await, 0);

        // Notifications.
        let mut conn = server.pool.acquire().await.unwrap();
        let id = notifications::notify(&mut conn, alice.id, notifications::Kind::ScheduleStop, "box-1 stopped", "its schedule stopped it").await.unwrap();
        drop(conn);
        let (_, page) = call(&server, "GET", "/api/v1/notifications", &a, None).await;
        assert_eq!((page["unread"].as_i64(), page["items"][0]["subject"].as_str()), (Some(1), Some("box-1 stopped")), "{page}");
        assert_eq!(call(&server, "GET", "/api/v1/notifications", &c, None).await.1["total"], 0);
        refused(&call(&server, "POST", &format!("/api/v1/notifications/{id}/read"), &c, None).await, StatusCode::NOT_FOUND, "not_found");
        assert_eq!(call(&server, "POST", &format!("/api/v1/notifications/{id}/read"), &a, None).await.0, StatusCode::NO_CONTENT);
        assert_eq!(call(&server, "GET", "/api/v1/notifications", &a, None).await.1["unread"], 0);
        assert_eq!(call(&server, "POST", "/api/v1/notifications/read", &a, None).await.0, StatusCode::NO_CONTENT);

        // A machine's schedule (a machine row as a create leaves it).
        let image = gantry_platform::images::create_image(&server.pool, None, "devbox", "gantry/devbox:latest", "demo", true).await.unwrap();
        let machine: i64 = sqlx::query_scalar(
            "INSERT INTO machines (name, owner_id, group_id, image_id, gpu_count, gpu_model, volume_name, volume_size_gb, state, created_at, updated_at)
             VALUES ('box-1', ?, ?, ?, 1, 'SIM', 'vol-1', 10, 'running', 0, 0) RETURNING id",
        )
        .bind(alice.id)
        .bind(alice.group_id)
        .bind(image.id)
        .fetch_one(&server.pool)
        .await
        .unwrap();
        let path = format!("/api/v1/machines/{machine}/schedule");
        refused(&call(&server, "PUT", &path, &a, Some(json!({"stop_at": "25:99"}))).await, StatusCode::BAD_REQUEST, "bad_request");
        let (status, set) = call(&server, "PUT", &path, &a, Some(json!({"stop_at": "19:00", "stop_after_hours": 8}))).await;
        assert_eq!(status, StatusCode::OK, "{set}");
        let (_, got) = call(&server, "GET", &path, &a, None).await;
        assert_eq!((got["stop_at"].as_str(), got["stop_after_hours"].as_i64(), got["start_at"].as_str()), (Some("19:00"), Some(8), None), "{got}");
        refused(&call(&server, "GET", &path, &c, None).await, StatusCode::NOT_FOUND, "not_found");
        refused(&call(&server, "PUT", &path, &c, Some(json!({"stop_at": "01:00"}))).await, StatusCode::NOT_FOUND, "not_found");
        assert_eq!(call(&server, "GET", &path, &a, None).await.1["stop_at"], "19:00", "unchanged by the refusals");
    }
}
