//! The one layer that puts the security headers on every response: a
//! Content-Security-Policy whose script nonce is new for every request
//! (Leptos writes it on its inline hydration and resource scripts; the
//! router provides it to the page), framing refused, no MIME sniffing, the
//! referrer kept on this site, `no-store` for HTML and server-function
//! answers (so Back after signing out shows nothing private), and HSTS when
//! Gantry is served over HTTPS. Other responses (hashed assets, streamed
//! downloads, metrics) keep their own caching headers.

use axum::{
    extract::{Request, State},
    http::{header, HeaderMap, HeaderName, HeaderValue},
    middleware::Next,
    response::Response,
};
use rand::RngCore;

/// This request's CSP nonce.
#[derive(Clone, Debug)]
pub struct CspNonce(pub String);

#[derive(Clone, Copy, Debug, Default)]
pub struct HeaderPolicy {
    /// Send Strict-Transport-Security (set with `--secure-cookies`).
    pub hsts: bool,
}

/// Styles: Leptos components and xterm.js set `style` attributes and
/// insert style elements, which a nonce cannot cover; styles cannot run code.
/// `wasm-unsafe-eval` lets the page compile its own WebAssembly, nothing else.
pub fn csp(nonce: &str) -> String {
    format!(
        "default-src 'self'; script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'; style-src 'self' 'unsafe-inline'; \
         img-src 'self' data:; font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'self'; \
         form-action 'self'; frame-ancestors 'none'"
    )
}

fn new_nonce() -> String {
    let mut bytes = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub async fn security_headers(State(policy): State<HeaderPolicy>, mut req: Request, next: Next) -> Response {
    let nonce = new_nonce();
    let api = req.uri().path().starts_with("/api/");
    req.extensions_mut().insert(CspNonce(nonce.clone()));
    let mut res = next.run(req).await;
    apply(res.headers_mut(), &nonce, api, policy);
    res
}

fn apply(h: &mut HeaderMap, nonce: &str, api: bool, policy: HeaderPolicy) {
    // The page cache's marker (a render met an internal error) is for this
    // server only; server functions set it too.
    h.remove(crate::page_cache::NOT_KEPT);
    let mut set_default = |name: HeaderName, value: &str| {
        if let (false, Ok(v)) = (h.contains_key(&name), HeaderValue::from_str(value)) {
            h.insert(name, v);
        }
    };
    set_default(header::CONTENT_SECURITY_POLICY, &csp(nonce));
    set_default(header::X_FRAME_OPTIONS, "DENY");
    set_default(header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set_default(header::REFERRER_POLICY, "same-origin");
    if policy.hsts {
        set_default(header::STRICT_TRANSPORT_SECURITY, "max-age=31536000");
    }
    let html = h.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|t| t.starts_with("text/html"));
    if html || api {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_and_api_are_not_stored_other_answers_keep_theirs() {
        let mut page = HeaderMap::new();
        page.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
        page.insert(crate::page_cache::NOT_KEPT, HeaderValue::from_static("1"));
        apply(&mut page, "n1", false, HeaderPolicy { hsts: true });
        assert!(!page.contains_key(crate::page_cache::NOT_KEPT), "the page cache's marker never leaves the server");
        assert_eq!(page[header::CACHE_CONTROL], "no-store");
        assert!(page[header::CONTENT_SECURITY_POLICY].to_str().unwrap().contains("'nonce-n1'"));
        assert_eq!(page[header::STRICT_TRANSPORT_SECURITY], "max-age=31536000");

        let mut asset = HeaderMap::new();
        asset.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/css"));
        asset.insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=31536000, immutable"));
        apply(&mut asset, "n2", false, HeaderPolicy::default());
        assert_eq!(asset[header::CACHE_CONTROL], "public, max-age=31536000, immutable");
        assert_eq!(asset[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert!(!asset.contains_key(header::STRICT_TRANSPORT_SECURITY));
    }
}
