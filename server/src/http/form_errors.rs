//! Errors carried in a URL. Without JavaScript, a form whose server
//! function fails is redirected back with the error in the query
//! (`__path`, `__err`: Leptos' progressive enhancement), and the page shows
//! it. Anyone could craft such a link and put their own text in a form's
//! error box ("your account is locked, call …"). So the server signs the
//! error it writes into that redirect (`__sig`, keyed per process), and a
//! page request carrying an error without a valid signature is redirected
//! to the same URL without it: the text shown is only ever the server's own.
//!
//! The no-JavaScript upload forms (a machine's files, a dataset version)
//! come back the same way with `upload_error` or `uploaded` in the query:
//! those are signed too (`__msig`, over the page's path and the pairs in
//! order) — only on the redirect of an upload form's own POST, so no other
//! redirect (a sign-in's `next`, say) can be made to carry signed text, and
//! a signature shows its text on the page it was written for only.

use axum::{
    extract::{Request, State},
    http::{header, HeaderValue, Method, StatusCode},
    middleware::Next,
    response::{IntoResponse, Response},
};
use rand::RngCore;
use sha2::{Digest, Sha256};
use std::sync::Arc;

#[derive(Clone)]
pub struct FormErrorKey(Arc<[u8; 32]>);

impl FormErrorKey {
    pub fn random() -> Self {
        let mut key = [0u8; 32];
        rand::thread_rng().fill_bytes(&mut key);
        FormErrorKey(Arc::new(key))
    }

    /// A keyed hash of the raw (still percent-encoded) query values,
    /// nested so that it cannot be extended.
    pub(crate) fn sign(&self, path: &str, err: &str) -> String {
        let inner =
            Sha256::new().chain_update(&self.0[..]).chain_update(path).chain_update([0]).chain_update(err).finalize();
        let outer = Sha256::new().chain_update(&self.0[..]).chain_update(inner).finalize();
        outer[..16].iter().map(|b| format!("{b:02x}")).collect()
    }
}

const KEYS: [&str; 3] = ["__path", "__err", "__sig"];

/// A query key as pages read it: percent-decoded, `+` a space (Leptos'
/// query map decodes keys, on the server and in the browser). Compared
/// raw, `%5F%5Ferr` or `%75pload_error` walked past every check here and
/// was read as `__err` or `upload_error` all the same.
pub(crate) fn decoded_key(raw: &str) -> String {
    gantry_core::url::decode_form(raw)
}

/// The query's pairs other than the error's, and the last of each error key.
fn split(query: &str) -> (Vec<&str>, [Option<&str>; 3], usize) {
    let mut rest = Vec::new();
    let mut found = [None; 3];
    let mut repeats = 0;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let raw = pair.split_once('=').map_or(pair, |(k, _)| k);
        let key = decoded_key(raw);
        match KEYS.iter().position(|k| *k == key) {
            Some(i) => {
                // The server writes these keys plain: an encoded one is a
                // crafted link's, and never part of a valid signature.
                repeats += usize::from(found[i].is_some() || raw != key);
                found[i] = Some(pair.split_once('=').map_or("", |(_, v)| v));
            }
            None => rest.push(pair),
        }
    }
    (rest, found, repeats)
}

fn with_query(path: &str, pairs: &[String]) -> String {
    if pairs.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{}", pairs.join("&"))
    }
}

/// Query keys whose text a page shows as the server's word on an upload.
const MESSAGE_KEYS: [&str; 2] = ["upload_error", "uploaded"];
const MESSAGE_SIG: &str = "__msig";

/// The query's message pairs (raw, in order), the other pairs, and the
/// message signature if one came.
fn split_messages(query: &str) -> (Vec<&str>, Vec<&str>, Option<&str>) {
    let (mut messages, mut rest, mut sig) = (Vec::new(), Vec::new(), None);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let key = decoded_key(pair.split_once('=').map_or(pair, |(k, _)| k));
        if MESSAGE_KEYS.contains(&key.as_str()) {
            messages.push(pair);
        } else if key == MESSAGE_SIG {
            sig = Some(pair.split_once('=').map_or("", |(_, v)| v));
        } else {
            rest.push(pair);
        }
    }
    (messages, rest, sig)
}

impl FormErrorKey {
    fn sign_messages(&self, path: &str, messages: &[&str]) -> String {
        self.sign(&format!("\0messages{path}"), &messages.join("&"))
    }
}

/// The no-JavaScript upload forms' own POSTs: the only responses whose
/// redirect may carry a signed upload message.
fn is_upload_form(method: &Method, path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').collect();
    method == Method::POST
        && matches!(segments.as_slice(), ["", "datasets", _, _, "upload"] | ["", "machines", _, "files"])
}

pub async fn signed_form_errors(State(key): State<FormErrorKey>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_owned();
    let api = path.starts_with("/api/");
    if !api && req.method() == Method::GET {
        if let Some(back) = req.uri().query().and_then(|q| crate::http::form_done::drop_forged_marker(&key, &path, q)) {
            return back;
        }
        if let Some(query) = req.uri().query() {
            let (messages, rest, sig) = split_messages(query);
            if (!messages.is_empty() || sig.is_some()) && sig != Some(key.sign_messages(&path, &messages).as_str()) {
                let rest: Vec<String> = rest.into_iter().map(str::to_string).collect();
                return (StatusCode::SEE_OTHER, [(header::LOCATION, with_query(&path, &rest))]).into_response();
            }
        }
        if let Some(query) = req.uri().query() {
            let (rest, [p, e, s], repeats) = split(query);
            let carries = p.is_some() || e.is_some() || s.is_some();
            let valid = matches!((p, e, s), (Some(p), Some(e), Some(s)) if repeats == 0 && key.sign(p, e) == s);
            if carries && !valid {
                let rest: Vec<String> = rest.into_iter().map(str::to_string).collect();
                return (StatusCode::SEE_OTHER, [(header::LOCATION, with_query(&path, &rest))]).into_response();
            }
        }
    }
    let upload_form = is_upload_form(req.method(), &path);
    // A form posted without JavaScript accepts HTML (server_fn's own test).
    let html_form =
        req.headers().get(header::ACCEPT).and_then(|a| a.to_str().ok()).is_some_and(|a| a.contains("text/html"));
    let mut res = next.run(req).await;
    if api {
        let endpoint = &path["/api/".len()..];
        sign_location(&key, &mut res);
        // A form that worked comes back with its function's answer, when
        // its page shows it (server_fn leaves the reply's JSON as the body).
        let mut answer = None;
        if html_form && res.status().is_redirection() && crate::http::form_done::answers(endpoint) {
            let (mut parts, body) = res.into_parts();
            parts.headers.remove(header::CONTENT_LENGTH);
            let bytes = axum::body::to_bytes(body, crate::http::form_done::ANSWER_MAX_BYTES + 1).await.ok();
            answer = bytes.and_then(|b| String::from_utf8(b.to_vec()).ok());
            res = Response::from_parts(parts, axum::body::Body::empty());
        }
        crate::http::form_done::mark_location(&key, endpoint, html_form, answer.as_deref(), &mut res);
    }
    if upload_form {
        sign_messages_in_location(&key, &mut res);
    }
    res
}

/// Signs the upload messages of a redirect the server itself wrote.
fn sign_messages_in_location(key: &FormErrorKey, res: &mut Response) {
    let Some(location) = res.headers().get(header::LOCATION).and_then(|v| v.to_str().ok()) else { return };
    let Some((base, query)) = location.split_once('?') else { return };
    // A fragment (`#files`) stays at the end.
    let (query, fragment) = query.split_once('#').map_or((query, None), |(q, f)| (q, Some(f)));
    let (messages, rest, _) = split_messages(query);
    if messages.is_empty() {
        return;
    }
    let sig = key.sign_messages(base, &messages);
    let mut pairs: Vec<String> = rest.into_iter().chain(messages).map(str::to_string).collect();
    pairs.push(format!("{MESSAGE_SIG}={sig}"));
    let signed = with_query(base, &pairs) + &fragment.map(|f| format!("#{f}")).unwrap_or_default();
    if let Ok(v) = HeaderValue::from_str(&signed) {
        res.headers_mut().insert(header::LOCATION, v);
    }
}

/// Rewrites a server function's redirect: the newest error, signed; an
/// old signature without an error is dropped.
fn sign_location(key: &FormErrorKey, res: &mut Response) {
    let Some(location) = res.headers().get(header::LOCATION).and_then(|v| v.to_str().ok()) else { return };
    let Some((base, query)) = location.split_once('?') else { return };
    let (rest, [p, e, _], _) = split(query);
    let mut pairs: Vec<String> = rest.into_iter().map(str::to_string).collect();
    if let (Some(p), Some(e)) = (p, e) {
        pairs.extend([format!("__path={p}"), format!("__err={e}"), format!("__sig={}", key.sign(p, e))]);
    }
    if let Ok(v) = HeaderValue::from_str(&with_query(base, &pairs)) {
        res.headers_mut().insert(header::LOCATION, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_bind_path_and_error_to_the_key() {
        let (a, b) = (FormErrorKey::random(), FormErrorKey::random());
        assert_eq!(a.sign("p", "e"), a.sign("p", "e"));
        assert_ne!(a.sign("p", "e"), a.sign("p", "f"));
        assert_ne!(a.sign("p", "e"), b.sign("p", "e"));
    }

    #[test]
    fn the_newest_error_wins_and_repeats_are_counted() {
        let (rest, [p, e, s], repeats) = split("next=%2F&__path=a&__err=old&__sig=x&__err=new");
        assert_eq!(rest, vec!["next=%2F"]);
        assert_eq!((p, e, s, repeats), (Some("a"), Some("new"), Some("x"), 1));
    }

    #[test]
    fn keys_are_read_as_the_pages_read_them() {
        assert_eq!(decoded_key("%5F%5Ferr"), "__err");
        assert_eq!(decoded_key("%75pload_error"), "upload_error");
        assert_eq!(decoded_key("a+b%2"), "a b%2");
        assert_eq!(decoded_key("%zz%"), "%zz%");
        // An encoded key is an error key, and spoils the signature.
        let (rest, [p, e, _], repeats) = split("%5F%5Fpath=a&%5F%5Ferr=x");
        assert!(rest.is_empty());
        assert_eq!((p, e), (Some("a"), Some("x")));
        assert_eq!(repeats, 2);
        let (messages, rest, _) = split_messages("%75ploaded=x&tab=files");
        assert_eq!((messages, rest), (vec!["%75ploaded=x"], vec!["tab=files"]));
    }
}
