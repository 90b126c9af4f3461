//! Token scopes, the tokens and quota API and the admin API over real
//! HTTP: a `read` token reads but may not change anything (403
//! `insufficient_scope`, nothing written); an account that is not an admin
//! cannot make an `admin` token (403 `forbidden`, API and platform alike)
//! nor reach the admin routes; an admin's `write` token is refused there
//! too; an admin token does what the admin pages do (a group made and its
//! quota set, a user made and disabled, a node drained) and is revoked
//! when its owner stops being an admin.

use crate::common;

use common::{count, TestServer, ADMIN_PASSWORD};
use gantry_core::Role;
use gantry_platform::{
    accounts,
    tokens::{self, TokenScope},
};
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

gantry_testkit::timed_test! {
    async fn scopes_limit_tokens_and_admin_tokens_run_the_console() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let admin_id: i64 = sqlx::query_scalar("SELECT id FROM users WHERE username = 'admin'").fetch_one(&server.pool).await.unwrap();
        let admin = accounts::user_by_id(&server.pool, admin_id).await.unwrap().unwrap();
        let alice = accounts::create_user(&server.pool, None, accounts::NewUser { username: "alice", password: "a-good-password", role: Role::User, group: None }).await.unwrap();
        let (_, read) = tokens::create_scoped(&server.pool, &alice, "look", TokenScope::Read).await.unwrap();
        let (_, write) = tokens::create(&server.pool, &alice, "do").await.unwrap();

        // A read token reads, and changes nothing.
        assert_eq!(call(&server, "GET", "/api/v1/machines", &read, None).await.0, StatusCode::OK);
        assert_eq!(call(&server, "GET", "/api/v1/quota", &read, None).await.1["group"], "default");
        let before = count(&server.pool, "SELECT COUNT(*) FROM api_tokens").await;
        refused(&call(&server, "POST", "/api/v1/machines", &read, Some(json!({"name": "box", "gpus": 1}))).await, StatusCode::FORBIDDEN, "insufficient_scope");
        refused(&call(&server, "POST", "/api/v1/tokens", &read, Some(json!({"name": "more", "password": "a-good-password"}))).await, StatusCode::FORBIDDEN, "insufficient_scope");
        refused(&call(&server, "DELETE", "/api/v1/tokens/1", &read, None).await, StatusCode::FORBIDDEN, "insufficient_scope");
        refused(&call(&server, "PUT", "/api/v1/datasets/coco/versions/v1/files/a.txt", &read, None).await, StatusCode::FORBIDDEN, "insufficient_scope");
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM api_tokens").await, before);
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM machines").await, 0);

        // The tokens API: listed with scope, expiry and last use; made with the password.
        let (status, list) = call(&server, "GET", "/api/v1/tokens", &write, None).await;
        assert_eq!(status, StatusCode::OK);
        let scopes: Vec<&str> = list["tokens"].as_array().unwrap().iter().map(|t| t["scope"].as_str().unwrap()).collect();
        assert_eq!(scopes, ["write", "read"], "{list}");
        assert!(list["tokens"][0]["expires_at"].as_i64().is_some() && list["tokens"][0]["last_used_at"].as_i64().is_some(), "{list}");
        assert!(list["tokens"][0].get("secret").is_none());
        refused(&call(&server, "POST", "/api/v1/tokens", &write, Some(json!({"name": "ci", "password": "wrong-password"}))).await, StatusCode::BAD_REQUEST, "bad_request");
        refused(&call(&server, "POST", "/api/v1/tokens", &write, Some(json!({"name": "ci", "password": "a-good-password", "scope": "root"}))).await, StatusCode::BAD_REQUEST, "bad_request");
        // Not an admin: no admin token, by the API or the platform; no admin route.
        refused(&call(&server, "POST", "/api/v1/tokens", &write, Some(json!({"name": "ci", "password": "a-good-password", "scope": "admin"}))).await, StatusCode::FORBIDDEN, "forbidden");
        assert!(tokens::create_scoped(&server.pool, &alice, "sneaky", TokenScope::Admin).await.is_err());
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM api_tokens").await, before);
        refused(&call(&server, "GET", "/api/v1/admin/users", &write, None).await, StatusCode::FORBIDDEN, "forbidden");
        let (status, made) = call(&server, "POST", "/api/v1/tokens", &write, Some(json!({"name": "ci", "password": "a-good-password", "scope": "read"}))).await;
        assert_eq!(status, StatusCode::CREATED, "{made}");
        assert_eq!(made["token"]["scope"], "read");
        let secret = made["secret"].as_str().unwrap().to_string();
        assert_eq!(call(&server, "GET", "/api/v1/machines", &secret, None).await.0, StatusCode::OK);
        let id = made["token"]["id"].as_i64().unwrap();
        assert_eq!(call(&server, "DELETE", &format!("/api/v1/tokens/{id}"), &write, None).await.0, StatusCode::NO_CONTENT);
        refused(&call(&server, "GET", "/api/v1/machines", &secret, None).await, StatusCode::UNAUTHORIZED, "unauthorized");

        // An admin's write token: not the console. Its admin token: the console.
        let (_, admin_write) = tokens::create(&server.pool, &admin, "w").await.unwrap();
        refused(&call(&server, "GET", "/api/v1/admin/users", &admin_write, None).await, StatusCode::FORBIDDEN, "insufficient_scope");
        let (status, made) = call(&server, "POST", "/api/v1/tokens", &admin_write, Some(json!({"name": "ops", "password": ADMIN_PASSWORD, "scope": "admin"}))).await;
        assert_eq!(status, StatusCode::CREATED, "{made}");
        let ops = made["secret"].as_str().unwrap().to_string();
        let (status, users) = call(&server, "GET", "/api/v1/admin/users", &ops, None).await;
        assert_eq!(status, StatusCode::OK);
        assert!(users["users"].as_array().unwrap().iter().any(|u| u["username"] == "alice"), "{users}");

        let (status, group) = call(&server, "POST", "/api/v1/admin/groups", &ops, Some(json!({"name": "ml", "gpu_quota": 4}))).await;
        assert_eq!(status, StatusCode::CREATED, "{group}");
        let group_id = group["group"]["id"].as_i64().unwrap();
        refused(&call(&server, "PUT", &format!("/api/v1/admin/groups/{group_id}"), &ops, Some(json!({"gpu_quota": -1, "max_gpus_per_machine": 2}))).await, StatusCode::BAD_REQUEST, "bad_request");
        let (status, updated) = call(&server, "PUT", &format!("/api/v1/admin/groups/{group_id}"), &ops, Some(json!({"gpu_quota": 8, "max_gpus_per_machine": 2, "allowed_models": ["SIM-A100"]}))).await;
        assert_eq!(status, StatusCode::OK, "{updated}");
        let quota: (i64, i64) = sqlx::query_as("SELECT gpu_quota, max_gpus_per_machine FROM groups WHERE id = ?").bind(group_id).fetch_one(&server.pool).await.unwrap();
        assert_eq!(quota, (8, 2), "the quota the Groups page shows");
        let (_, groups) = call(&server, "GET", "/api/v1/admin/groups", &ops, None).await;
        let ml = groups["groups"].as_array().unwrap().iter().find(|g| g["name"] == "ml").unwrap().clone();
        assert_eq!(ml["allowed_models"], json!(["SIM-A100"]));

        let (status, bob) = call(&server, "POST", "/api/v1/admin/users", &ops, Some(json!({"username": "bob", "password": "bob-password-1", "group": "ml"}))).await;
        assert_eq!(status, StatusCode::CREATED, "{bob}");
        let bob_id = bob["user"]["id"].as_i64().unwrap();
        let (status, off) = call(&server, "PUT", &format!("/api/v1/admin/users/{bob_id}/enabled"), &ops, Some(json!({"enabled": false}))).await;
        assert_eq!((status, off["user"]["disabled"].as_bool()), (StatusCode::OK, Some(true)), "{off}");
        refused(&call(&server, "PUT", "/api/v1/admin/users/x/enabled", &ops, Some(json!({"enabled": true}))).await, StatusCode::BAD_REQUEST, "bad_request");
        refused(&call(&server, "PUT", "/api/v1/admin/users/999999/role", &ops, Some(json!({"role": "admin"}))).await, StatusCode::NOT_FOUND, "not_found");

        let node = json!({"name": "sim-1", "region_code": "local", "endpoint": "simulated://sim-1", "gpu_count": 2, "gpu_model": "SIM-A100"});
        let (status, added) = call(&server, "POST", "/api/v1/admin/nodes", &ops, Some(node)).await;
        assert_eq!(status, StatusCode::CREATED, "{added}");
        let node_id = added["node_id"].as_i64().unwrap();
        let (status, _) = call(&server, "PUT", &format!("/api/v1/admin/nodes/{node_id}"), &ops, Some(json!({"state": "draining", "reason": "maintenance"}))).await;
        assert_eq!(status, StatusCode::NO_CONTENT);
        let (_, nodes) = call(&server, "GET", "/api/v1/admin/nodes", &ops, None).await;
        assert_eq!(nodes["nodes"][0]["state"], "draining", "{nodes}");
        refused(&call(&server, "PUT", &format!("/api/v1/admin/nodes/{node_id}"), &ops, Some(json!({"state": "lost"}))).await, StatusCode::BAD_REQUEST, "bad_request");
        assert_eq!(call(&server, "GET", "/api/v1/admin/regions", &ops, None).await.0, StatusCode::OK);
        let (status, image) = call(&server, "POST", "/api/v1/admin/images", &ops, Some(json!({"name": "devbox", "reference": "gantry/devbox:latest"}))).await;
        assert_eq!(status, StatusCode::CREATED, "{image}");
        let (_, images) = call(&server, "GET", "/api/v1/admin/images", &ops, None).await;
        assert_eq!(images["images"][0]["name"], "devbox");
        let (status, gone) = call(&server, "DELETE", &format!("/api/v1/admin/nodes/{node_id}"), &ops, None).await;
        assert_eq!((status, gone["removed"].as_str()), (StatusCode::OK, Some("sim-1")), "{gone}");

        // Demoted: every token of the account is revoked, the admin one included.
        let other = accounts::create_user(&server.pool, None, accounts::NewUser { username: "root2", password: "root2-password", role: Role::Admin, group: None }).await.unwrap();
        accounts::set_role(&server.pool, other.id, admin.id, Role::User).await.unwrap();
        refused(&call(&server, "GET", "/api/v1/admin/users", &ops, None).await, StatusCode::UNAUTHORIZED, "unauthorized");
    }
}
