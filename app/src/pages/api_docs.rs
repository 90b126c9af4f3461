//! The API page (`/api-docs`, linked from the Tokens page): every route of
//! the JSON API — method, path, what it does, the token scope it needs —
//! read from the server's OpenAPI document (`/api/v1/openapi.json`, which
//! the server generates from its handlers and hands here when it builds
//! its router). Server-rendered, no script of its own.

use crate::error::AppError;
use leptos::prelude::*;
use leptos_meta::Title;
use serde::{Deserialize, Serialize};

/// One documented operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiEndpoint {
    pub method: String,
    pub path: String,
    pub summary: String,
    /// The route family (`machines`, `compute`, `admin`, …).
    pub tag: String,
    /// `read`, `write`, `admin`, or `none` (no token needed).
    pub scope: String,
}

#[cfg(feature = "ssr")]
static ENDPOINTS: std::sync::OnceLock<Vec<ApiEndpoint>> = std::sync::OnceLock::new();

/// The server's document, once per process (it is the same for every
/// router the process builds).
#[cfg(feature = "ssr")]
pub fn publish(endpoints: Vec<ApiEndpoint>) {
    let _ = ENDPOINTS.set(endpoints);
}

#[server(prefix = "/api", endpoint = "api_endpoints")]
pub async fn api_endpoints() -> Result<Vec<ApiEndpoint>, AppError> {
    crate::state::auth()?;
    Ok(ENDPOINTS.get().cloned().unwrap_or_default())
}

#[component]
pub fn ApiDocsPage() -> impl IntoView {
    let endpoints = Resource::new(|| (), |_| api_endpoints());
    view! {
        <Title text="API"/>
        <h1>"API"</h1>
        <section class="card stack">
            <p>"Scripts call these routes with a personal API token from the "<a href="/tokens">"Tokens page"</a>
               ": " <code>"Authorization: Bearer gnt_…"</code>". A token's scope limits it: "
               <strong>"read"</strong>" only reads (GET), "<strong>"write"</strong>" does what you may, "
               <strong>"admin"</strong>" also the admin console. Errors are "
               <code>"{\"error\": \"…\", \"code\": \"…\"}"</code>"; the machine-readable document is "
               <a href="/api/v1/openapi.json">"/api/v1/openapi.json"</a>" (OpenAPI 3)."</p>
            <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || endpoints.get().map(|r| match r {
                    Ok(list) => view! { <EndpointTable endpoints=list/> }.into_any(),
                    Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
                })}
            </Suspense>
        </section>
    }
}

#[component]
fn EndpointTable(endpoints: Vec<ApiEndpoint>) -> impl IntoView {
    view! {
        <div class="table-scroll" role="region" aria-label="API routes" tabindex="0">
            <table class="table" data-testid="api-endpoints">
                <thead><tr><th>"Method"</th><th>"Path"</th><th>"What it does"</th><th>"Scope"</th><th>"Family"</th></tr></thead>
                <tbody>
                    {endpoints.into_iter().map(|e| {
                        let (method, path) = (e.method.clone(), e.path.clone());
                        view! {
                        <tr data-testid="api-endpoint" data-method=method data-path=path>
                            <td><code>{e.method}</code></td>
                            <td><code>{e.path}</code></td>
                            <td>{e.summary}</td>
                            <td>{e.scope}</td>
                            <td>{e.tag}</td>
                        </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
        </div>
    }
}
