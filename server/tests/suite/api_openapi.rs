//! The OpenAPI document against the router, over real HTTP: every path and
//! method the document lists is a route (probed: never the API's
//! `no_such_path` 404 nor a 405), every route family the API has is in the
//! document (and the routes are registered with their documentation, one
//! table: `api_v1::api`), the document needs no token; the portal's API page
//! lists the same operations with their scope.

use crate::common;

use common::{login, TestServer, ADMIN_PASSWORD};
use gantry_platform::{accounts, tokens};
use reqwest::StatusCode;
use serde_json::Value;

/// Every path parameter filled with something that names nothing.
fn concrete(path: &str) -> String {
    path.split('/')
        .map(|seg| {
            if seg.starts_with('{') {
                if seg == "{id}" {
                    "999999"
                } else {
                    "nothing"
                }
            } else {
                seg
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

gantry_testkit::timed_test! {
    async fn every_documented_route_exists_and_every_route_family_is_documented() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let http = reqwest::Client::new();
        let res = http.get(server.url("/api/v1/openapi.json")).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "no token needed");
        let doc: Value = res.json().await.unwrap();
        assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")), "OpenAPI 3");
        let paths = doc["paths"].as_object().expect("paths");

        // Every route family is documented (the CLI's login included).
        for (method, path) in [
            ("get", "/api/v1/machines"),
            ("post", "/api/v1/machines"),
            ("delete", "/api/v1/machines/{id}"),
            ("post", "/api/v1/machines/{id}/stop"),
            ("post", "/api/v1/machines/{id}/start"),
            ("get", "/api/v1/tasks/{id}"),
            ("get", "/api/v1/compute-tasks"),
            ("post", "/api/v1/compute-tasks/{id}/cancel"),
            ("get", "/api/v1/tokens"),
            ("get", "/api/v1/quota"),
            ("get", "/api/v1/admin/users"),
            ("put", "/api/v1/admin/groups/{id}"),
            ("get", "/api/v1/datasets"),
            ("patch", "/api/v1/datasets/{code}/versions/{version}/uploads/{name}"),
            ("get", "/api/v1/openapi.json"),
            ("post", "/api/v1/login"),
        ] {
            assert!(paths.get(path).and_then(|p| p.get(method)).is_some(), "{method} {path} is not documented");
        }

        // Every documented operation is a route: probed with an admin token
        // (ids that name nothing, so nothing is changed), the answer is never
        // "no such API path" nor "does not take this method".
        let admin_id: i64 = sqlx::query_scalar("SELECT id FROM users WHERE username = 'admin'").fetch_one(&server.pool).await.unwrap();
        let admin = accounts::user_by_id(&server.pool, admin_id).await.unwrap().unwrap();
        let (_, token) = tokens::create_scoped(&server.pool, &admin, "probe", tokens::TokenScope::Admin).await.unwrap();
        let mut probed = 0;
        for (path, item) in paths {
            assert!(path.starts_with("/api/v1/"), "{path}");
            for (method, op) in item.as_object().unwrap() {
                if !["get", "put", "post", "delete", "patch", "head"].contains(&method.as_str()) {
                    continue;
                }
                assert!(op["summary"].as_str().is_some_and(|s| !s.is_empty()), "{method} {path} has a summary");
                let url = server.url(&concrete(path));
                let res = http.request(method.to_uppercase().parse().unwrap(), &url).bearer_auth(&token).json(&serde_json::json!({})).send().await.unwrap();
                let status = res.status();
                let body: Value = res.json().await.unwrap_or(Value::Null);
                assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}: {body}");
                assert!(!(status == StatusCode::NOT_FOUND && body["code"] == "no_such_path"), "{method} {path} is documented but no route: {body}");
                probed += 1;
            }
        }
        assert!(probed >= 40, "{probed} operations");
        // The other way: a path that no route has is "no such API path".
        let res = http.get(server.url("/api/v1/machines/1/nope")).bearer_auth(&token).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::NOT_FOUND);
        assert_eq!(res.json::<Value>().await.unwrap()["code"], "no_such_path");

        // The portal's API page lists the document's operations, with scopes.
        let browser = server.client();
        assert_eq!(login(&server, &browser, "admin", ADMIN_PASSWORD).await.status(), StatusCode::OK);
        let page = browser.get(server.url("/api-docs")).send().await.unwrap().text().await.unwrap();
        assert!(page.contains(r#"data-method="POST" data-path="/api/v1/machines/{id}/stop""#), "the API page lists the stop");
        assert_eq!(page.matches(r#"data-testid="api-endpoint""#).count(), probed, "every operation once");
        let tokens_page = browser.get(server.url("/tokens")).send().await.unwrap().text().await.unwrap();
        assert!(tokens_page.contains(r#"href="/api-docs""#), "the Tokens page links to it");
    }
}
