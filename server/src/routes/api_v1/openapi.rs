//! The API's OpenAPI 3 document, generated from the handlers and served at
//! `GET /api/v1/openapi.json`; the portal's API page lists it.
//!
//! Each route is registered together with its documentation: a handler
//! carries `#[utoipa::path(method, path = "/api/v1/…", tag = "…",
//! responses(…), security(("token" = ["read" | "write" | "admin"])))]` and
//! is added with `routes!(handler, …)` to the `OpenApiRouter` in
//! [`super::routes`] — one table, so a route cannot exist undocumented and
//! a documented path cannot lack its route. The security scope names the
//! token scope the route needs (the API page shows it); a route without a
//! token (login, this document) has no `security`.
//!
//! A route family in its own file outside `api_v1/` (e.g. `api_login.rs`)
//! does the same: annotate its handler with `#[utoipa::path(…)]` and
//! export `pub fn api() -> utoipa_axum::router::OpenApiRouter<AppState>`
//! (`OpenApiRouter::new().routes(routes!(handler))`), then merge that in
//! [`super::routes`] (`.merge(crate::routes::api_login::api())`) instead of
//! merging a plain router in `router.rs`. The OpenAPI test
//! (`server/tests/suite/api_openapi.rs`) probes every documented path and
//! fails for a route family it expects but the document lacks.

use app::pages::api_docs::ApiEndpoint;
use axum::{
    http::{header, HeaderValue},
    response::{IntoResponse, Response},
};
use std::sync::OnceLock;
use utoipa::{
    openapi::{
        security::{Http, HttpAuthScheme, SecurityScheme},
        OpenApi,
    },
    Modify,
};

/// The document's head: title, version, the bearer token scheme.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(title = "Gantry API", description = "Personal API tokens (`Authorization: Bearer gnt_…`) from the Tokens page; errors are `{\"error\": \"…\", \"code\": \"…\"}`."),
    modifiers(&TokenScheme),
    components(schemas(super::errors::ErrorBody))
)]
pub struct ApiDoc;

struct TokenScheme;

impl Modify for TokenScheme {
    fn modify(&self, openapi: &mut OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme("token", SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)));
    }
}

static DOCUMENT: OnceLock<String> = OnceLock::new();

/// Keeps the finished document (the same for every router this process
/// builds) and hands its endpoint list to the API page.
pub fn publish(doc: &OpenApi) {
    let json = doc.to_pretty_json().unwrap_or_else(|_| "{}".into());
    let value: serde_json::Value = serde_json::from_str(&json).unwrap_or_default();
    app::pages::api_docs::publish(endpoints(&value));
    let _ = DOCUMENT.set(json);
}

/// Every documented operation: method, path, summary, token scope.
pub fn endpoints(doc: &serde_json::Value) -> Vec<ApiEndpoint> {
    let mut list = Vec::new();
    let Some(paths) = doc["paths"].as_object() else { return list };
    for (path, item) in paths {
        let Some(ops) = item.as_object() else { continue };
        for (method, op) in ops {
            if !matches!(method.as_str(), "get" | "put" | "post" | "delete" | "patch" | "head" | "options") {
                continue;
            }
            let scope = op["security"][0]["token"][0].as_str().unwrap_or("none").to_string();
            list.push(ApiEndpoint {
                method: method.to_uppercase(),
                path: path.clone(),
                summary: op["summary"].as_str().unwrap_or("").to_string(),
                tag: op["tags"][0].as_str().unwrap_or("").to_string(),
                scope,
            });
        }
    }
    list.sort_by(|a, b| (&a.tag, &a.path, &a.method).cmp(&(&b.tag, &b.path, &b.method)));
    list
}

/// This document, as JSON (no token needed: it names no one's data).
#[utoipa::path(get, path = "/api/v1/openapi.json", tag = "meta",
    responses((status = 200, description = "the OpenAPI 3 document", content_type = "application/json")))]
pub async fn document() -> Response {
    let json = DOCUMENT.get().cloned().unwrap_or_else(|| "{}".into());
    let mut res = json.into_response();
    res.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    res
}
