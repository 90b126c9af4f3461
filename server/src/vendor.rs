//! `/vendor/{file}`: browser libraries compiled into the binary — the
//! terminal's xterm.js and its fit add-on and Idiomorph (the DOM morph that
//! `public/live.js` imports), all from npm (copied by `build.rs`), and the
//! terminal's glue (`assets/workspace.js`). Revalidated by ETag.

use axum::{
    extract::Path,
    http::{header, HeaderMap, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
};
use std::sync::OnceLock;

static XTERM_JS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/xterm.js"));
static XTERM_CSS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/xterm.css"));
static FIT_JS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/addon-fit.js"));
static WORKSPACE_JS: &[u8] = include_bytes!("../assets/workspace.js");
static IDIOMORPH_JS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/idiomorph.js"));

fn file(name: &str) -> Option<(&'static [u8], &'static str, usize)> {
    Some(match name {
        "xterm.js" => (XTERM_JS, "text/javascript; charset=utf-8", 0),
        "xterm.css" => (XTERM_CSS, "text/css; charset=utf-8", 1),
        "addon-fit.js" => (FIT_JS, "text/javascript; charset=utf-8", 2),
        "gantry-workspace.js" => (WORKSPACE_JS, "text/javascript; charset=utf-8", 3),
        "idiomorph.js" => (IDIOMORPH_JS, "text/javascript; charset=utf-8", 4),
        _ => return None,
    })
}

/// FNV-1a of the contents, computed once per file.
fn etag(slot: usize, bytes: &[u8]) -> &'static str {
    static TAGS: [OnceLock<String>; 5] = [const { OnceLock::new() }; 5];
    TAGS[slot].get_or_init(|| {
        let mut h: u64 = 0xcbf29ce484222325;
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x100000001b3);
        }
        format!("\"{h:016x}\"")
    })
}

pub async fn serve(Path(name): Path<String>, headers: HeaderMap) -> Response {
    let Some((bytes, content_type, slot)) = file(&name) else {
        return (StatusCode::NOT_FOUND, "not found").into_response();
    };
    if bytes.is_empty() {
        return (
            StatusCode::NOT_FOUND,
            format!(
                "{name} was not bundled into this build of Gantry: run `npm ci` (scripts/setup.sh does) and rebuild"
            ),
        )
            .into_response();
    }
    let tag = etag(slot, bytes);
    if headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()) == Some(tag) {
        return (StatusCode::NOT_MODIFIED, [(header::ETAG, HeaderValue::from_static(tag))]).into_response();
    }
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (header::ETAG, HeaderValue::from_static(tag)),
        ],
        bytes,
    )
        .into_response()
}
