//! Static files: the wasm bundle, CSS and public assets, served compressed
//! (precompressed files when the build made them) with cache headers.
//! Hashed files never change, so after their first use they are answered
//! from memory ([`memory`]); everything else — and ranges, `HEAD`, odd
//! paths — goes through `ServeDir` and the file system.

pub mod memory;

use axum::{
    body::Body,
    http::{header, HeaderValue, Method, Request, Response},
};
use std::path::Path;
use tower::ServiceExt;
use tower_http::services::ServeDir;

/// Files named `name.<hash>.ext` never change: cache them for a year.
/// Anything else is revalidated (Last-Modified) on each use.
pub fn cache_control(path: &str) -> &'static str {
    if is_hashed(path) {
        IMMUTABLE
    } else {
        "public, no-cache"
    }
}

pub(crate) const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// `name.<hash>.ext`: a content hash of at least 8 URL-safe characters.
pub(crate) fn is_hashed(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or("");
    let parts: Vec<&str> = file.split('.').collect();
    parts.len() >= 3
        && parts[parts.len() - 2].len() >= 8
        && parts[parts.len() - 2].chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Serves `req` from `root` if a file exists there, else returns `None`.
pub async fn try_serve(root: &Path, req: Request<Body>) -> Option<Response<Body>> {
    let path = req.uri().path().to_owned();
    if req.method() == Method::GET && !req.headers().contains_key(header::RANGE) {
        if let Some(file) = memory::get(root, &path).await {
            return Some(file.respond(req.headers()));
        }
    }
    let dir = ServeDir::new(root).precompressed_br().precompressed_gzip().append_index_html_on_directories(false);
    let res = dir.oneshot(req).await.ok()?;
    if res.status().is_success() || res.status() == axum::http::StatusCode::NOT_MODIFIED {
        let mut res = res.map(Body::new);
        res.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static(cache_control(&path)));
        Some(res)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::cache_control;

    #[test]
    fn hashed_names_are_immutable() {
        assert_eq!(cache_control("/pkg/gantry.3f9a1c2b7d.js"), "public, max-age=31536000, immutable");
        assert_eq!(cache_control("/pkg/gantry.js"), "public, no-cache");
        assert_eq!(cache_control("/favicon.svg"), "public, no-cache");
    }
}
