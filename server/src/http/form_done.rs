//! "It worked", carried in a URL. Without JavaScript, a form whose server
//! function succeeds is redirected back to its page (the Referer), which
//! has no answer to show. So the server adds a marker naming the function
//! to that redirect (`done=<endpoint>`), and the page's frame shows the
//! function's fixed message (`app::components::nojs_done`).
//!
//! Where the page shows the function's own answer ("bob is now disabled",
//! the new machine's name), the redirect carries that answer too
//! (`answer=<its JSON>`, only for the endpoints listed in
//! `nojs_done::ANSWERED`, at most 2 KiB), and the page renders it as the
//! browser once did from the function's reply.
//!
//! The marker carries no text of the caller's, and it is signed
//! (`__dsig`, over the page's path and the key, with the form errors' key):
//! a link that carries a marker the server did not write for that page is
//! redirected to the same URL without it, so a page never says "saved" (or
//! anything) because a link asked it to.

use crate::http::form_errors::FormErrorKey;
use app::components::nojs_done::{done_message, ANSWERED, ANSWER_KEY, DONE_KEY};
use axum::{
    http::{header, HeaderValue, StatusCode, Uri},
    response::{IntoResponse, Response},
};

const SIG_KEY: &str = "__dsig";

fn key_of(pair: &str) -> &str {
    pair.split_once('=').map_or(pair, |(k, _)| k)
}

fn value_of(pair: &str) -> &str {
    pair.split_once('=').map_or("", |(_, v)| v)
}

/// Decoded as the page reads it (see `form_errors::decoded_key`): an
/// encoded `%64one` is a marker too, and never a genuine one (the server
/// writes the key plain).
fn is_marker(pair: &str) -> bool {
    matches!(crate::http::form_errors::decoded_key(key_of(pair)).as_str(), k if k == DONE_KEY || k == ANSWER_KEY || k == SIG_KEY)
}

/// The query's marker pairs (raw, in order) and the others.
fn split(query: &str) -> (Vec<&str>, Vec<&str>) {
    query.split('&').filter(|p| !p.is_empty()).partition(|p| is_marker(p))
}

fn with_query(base: &str, pairs: &[&str]) -> String {
    if pairs.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", pairs.join("&"))
    }
}

impl FormErrorKey {
    fn sign_done(&self, path: &str, endpoint: &str, answer: &str) -> String {
        self.sign(&format!("\0done{path}"), &format!("{endpoint}\0{answer}"))
    }
}

/// For a page request: the redirect to the same URL without its marker, when
/// the marker is not exactly one the server signed for this path.
pub fn drop_forged_marker(key: &FormErrorKey, path: &str, query: &str) -> Option<Response> {
    let (markers, rest) = split(query);
    let genuine = match markers.as_slice() {
        [] => return None,
        [done, sig] => {
            key_of(done) == DONE_KEY
                && key_of(sig) == SIG_KEY
                && value_of(sig) == key.sign_done(path, value_of(done), "")
        }
        [done, answer, sig] => {
            key_of(done) == DONE_KEY
                && key_of(answer) == ANSWER_KEY
                && key_of(sig) == SIG_KEY
                && value_of(sig) == key.sign_done(path, value_of(done), value_of(answer))
        }
        _ => false,
    };
    (!genuine).then(|| (StatusCode::SEE_OTHER, [(header::LOCATION, with_query(path, &rest))]).into_response())
}

/// Rewrites the redirect a server function answered with: the marker of the
/// page the form was on never travels on, and a form posted without
/// JavaScript (`html_form`) whose function succeeded and has a message gets
/// its own marker. A failure's redirect carries `__err`; a hydrated form's
/// answer is the data itself, with no redirect to mark.
/// The most of a function's answer a redirect carries.
pub const ANSWER_MAX_BYTES: usize = 2048;

/// Whether a redirect of `endpoint`'s should carry its answer (read the body).
pub fn answers(endpoint: &str) -> bool {
    ANSWERED.contains(&endpoint)
}

/// `text` percent-encoded for a query value (all but the unreserved).
fn encoded(text: &str) -> String {
    gantry_core::url::encode(text)
}

/// `answer`: the function's reply body (its JSON) when [`answers`] said so.
pub fn mark_location(key: &FormErrorKey, endpoint: &str, html_form: bool, answer: Option<&str>, res: &mut Response) {
    let Some(location) = res.headers().get(header::LOCATION).and_then(|v| v.to_str().ok()) else { return };
    let (location, fragment) = location.split_once('#').map_or((location, None), |(l, f)| (l, Some(f)));
    let (base, query) = location.split_once('?').unwrap_or((location, ""));
    let (markers, mut pairs) = split(query);
    let failed = pairs.iter().any(|p| key_of(p) == "__err");
    let done = (html_form && !failed && res.status().is_redirection()).then(|| done_message(endpoint)).flatten();
    if markers.is_empty() && done.is_none() {
        return;
    }
    let answer = answer.filter(|a| answers(endpoint) && a.len() <= ANSWER_MAX_BYTES).map(encoded);
    let marker = done.and_then(|_| {
        let path = base.parse::<Uri>().ok()?.path().to_owned();
        let sig = key.sign_done(&path, endpoint, answer.as_deref().unwrap_or(""));
        let answer = answer.as_ref().map(|a| format!("{ANSWER_KEY}={a}"));
        Some((format!("{DONE_KEY}={endpoint}"), answer, format!("{SIG_KEY}={sig}")))
    });
    if let Some((done, answer, sig)) = &marker {
        pairs.push(done.as_str());
        if let Some(answer) = answer {
            pairs.push(answer.as_str());
        }
        pairs.push(sig.as_str());
    }
    let rewritten = with_query(base, &pairs) + &fragment.map(|f| format!("#{f}")).unwrap_or_default();
    if let Ok(v) = HeaderValue::from_str(&rewritten) {
        res.headers_mut().insert(header::LOCATION, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redirect_to(location: &str) -> Response {
        (StatusCode::FOUND, [(header::LOCATION, location.to_string())]).into_response()
    }

    fn location(res: &Response) -> &str {
        res.headers()[header::LOCATION].to_str().unwrap()
    }

    #[test]
    fn a_success_is_marked_for_its_page_and_that_page_only() {
        let key = FormErrorKey::random();
        let mut res = redirect_to("http://h/admin/groups?page=2&done=admin/create_group&__dsig=old#g3");
        mark_location(&key, "admin/update_group", true, None, &mut res);
        let sig = key.sign_done("/admin/groups", "admin/update_group", "");
        assert_eq!(location(&res), format!("http://h/admin/groups?page=2&done=admin/update_group&__dsig={sig}#g3"));
        assert!(drop_forged_marker(&key, "/admin/groups", &format!("page=2&done=admin/update_group&__dsig={sig}"))
            .is_none());
        let moved =
            drop_forged_marker(&key, "/admin/nodes", &format!("page=2&done=admin/update_group&__dsig={sig}")).unwrap();
        assert_eq!(location(&moved), "/admin/nodes?page=2");
    }

    #[test]
    fn failures_hydrated_posts_and_functions_without_a_message_carry_no_marker() {
        let key = FormErrorKey::random();
        let cases = [
            (
                "admin/update_group",
                true,
                "/admin/groups?done=x&__path=p&__err=e&__sig=s",
                "/admin/groups?__path=p&__err=e&__sig=s",
            ),
            ("admin/update_group", false, "/admin/groups", "/admin/groups"),
            ("login", true, "/machines?done=admin/update_group", "/machines"),
        ];
        for (endpoint, html_form, from, to) in cases {
            let mut res = redirect_to(from);
            mark_location(&key, endpoint, html_form, None, &mut res);
            assert_eq!(location(&res), to, "{endpoint} {html_form}");
        }
    }

    #[test]
    fn unsigned_repeated_or_unknown_markers_are_dropped() {
        let key = FormErrorKey::random();
        let sig = key.sign_done("/p", "admin/update_group", "");
        for query in [
            "done=admin/update_group",
            "done=hello%20world&__dsig=00",
            &format!("done=admin/update_group&__dsig={sig}&done=x"),
        ] {
            let back = drop_forged_marker(&key, "/p", &format!("a=1&{query}")).unwrap();
            assert_eq!(location(&back), "/p?a=1", "{query}");
        }
        assert!(drop_forged_marker(&key, "/p", "a=1").is_none());
    }

    #[test]
    fn an_answer_travels_signed_with_its_marker_and_cannot_be_swapped() {
        let key = FormErrorKey::random();
        let endpoint = ANSWERED[0];
        let mut res = redirect_to("/admin?page=2");
        mark_location(&key, endpoint, true, Some(r#"{"name":"a b&c"}"#), &mut res);
        let sig = key.sign_done("/admin", endpoint, "%7B%22name%22%3A%22a%20b%26c%22%7D");
        let query = format!("page=2&done={endpoint}&answer=%7B%22name%22%3A%22a%20b%26c%22%7D&__dsig={sig}");
        assert_eq!(location(&res), format!("/admin?{query}"));
        assert!(drop_forged_marker(&key, "/admin", &query).is_none());
        let swapped = query.replace("a%20b", "evil");
        assert_eq!(location(&drop_forged_marker(&key, "/admin", &swapped).unwrap()), "/admin?page=2");
        // Too long, or an endpoint whose page does not show its answer: the marker alone.
        let mut res = redirect_to("/admin");
        mark_location(&key, endpoint, true, Some(&"x".repeat(ANSWER_MAX_BYTES + 1)), &mut res);
        assert!(!location(&res).contains("answer="));
    }
}
