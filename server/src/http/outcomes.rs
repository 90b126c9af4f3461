//! What a form did, kept for the page that follows its post (the app's
//! `components::flash` reads it). A form posted as HTML — without
//! JavaScript, or by live.js, which posts the same way — is answered with a
//! redirect back to its page. The outcome goes into the poster's own
//! session as a one-time message (`axum-messages` on tower-sessions), not
//! into that redirect's URL:
//! - a server function's refusal, which Leptos writes into the redirect as
//!   `__path`/`__err`, is taken out of the URL and kept;
//! - a server function's success is kept with its answer (the reply's JSON,
//!   which server_fn leaves as the redirect's body) when a page of the app
//!   shows it (`flash::remembered`);
//! - the streamed upload forms keep theirs with [`tell`].
//!
//! The next page that session renders takes the messages out (once) and
//! hands them to the app as `Outcomes` in the request. So a link can never
//! make a page say something, and an answer is never shown to anyone but
//! the session that caused it.

use app::components::flash::{remembered, Outcome, Outcomes};
use app::error::AppError;
use axum::{
    extract::{FromRequestParts, Request},
    http::{header, HeaderValue, Method},
    middleware::Next,
    response::Response,
};
use axum_messages::{Level, Message, Messages, Metadata};
use leptos::server_fn::error::ServerFnUrlError;

/// The most of a function's answer that is kept.
pub const ANSWER_MAX_BYTES: usize = 2048;

const ENDPOINT: &str = "endpoint";
const ANSWER: &str = "answer";

/// Keeps `outcome` for the next page its session renders.
pub fn tell(messages: &Messages, outcome: Outcome) {
    let mut metadata = Metadata::new();
    metadata.insert(ENDPOINT.into(), outcome.endpoint.into());
    if let Some(answer) = outcome.answer {
        metadata.insert(ANSWER.into(), answer.into());
    }
    let (level, text) = match outcome.error {
        Some(e) => (Level::Error, e),
        None => (Level::Success, String::new()),
    };
    let _ = messages.clone().push(level, text, Some(metadata));
}

/// A kept message as the app reads it; `None` for one Gantry did not write.
fn outcome_of(m: Message) -> Option<Outcome> {
    let metadata = m.metadata?;
    let endpoint = metadata.get(ENDPOINT)?.as_str()?.to_string();
    let answer = metadata.get(ANSWER).and_then(|a| a.as_str()).map(str::to_string);
    let error = (m.level == Level::Error).then_some(m.message);
    Some(Outcome { endpoint, error, answer })
}

/// Around every route: for a server function (`/api/{fn}`, not the JSON
/// API), keeps the outcome of a form posted as HTML and takes the refusal
/// out of the redirect's URL.
pub async fn keep_function_outcomes(req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let Some(endpoint) = path.strip_prefix("/api/").filter(|e| !e.starts_with("v1/")).map(str::to_string) else {
        return next.run(req).await;
    };
    // A form posted as HTML accepts HTML (server_fn's own test).
    let html_form = req.method() == Method::POST
        && req.headers().get(header::ACCEPT).and_then(|a| a.to_str().ok()).is_some_and(|a| a.contains("text/html"));
    let messages = req.extensions().get::<Messages>().cloned();
    let res = next.run(req).await;
    let (Some(messages), true) = (messages, html_form && res.status().is_redirection()) else { return res };
    let Some(location) = res.headers().get(header::LOCATION).and_then(|v| v.to_str().ok()).map(str::to_string) else {
        return res;
    };
    let (base, query) = location.split_once('?').unwrap_or((&location, ""));
    let (query, fragment) = query.split_once('#').map_or((query, None), |(q, f)| (q, Some(f)));
    let pairs: Vec<&str> = query.split('&').filter(|p| !p.is_empty()).collect();
    let is_error_pair = |p: &&str| matches!(p.split_once('=').map_or(*p, |(k, _)| k), "__err" | "__path");
    let error = pairs.iter().rev().find_map(|p| p.strip_prefix("__err="));
    let (mut parts, body) = res.into_parts();
    match error {
        Some(err) => {
            let err = ServerFnUrlError::<AppError>::decode_err(&gantry_core::url::decode_form(err));
            tell(&messages, Outcome { endpoint, error: Some(err.to_string()), answer: None });
            let rest: Vec<&str> = pairs.into_iter().filter(|p| !is_error_pair(p)).collect();
            let mut clean = if rest.is_empty() { base.to_string() } else { format!("{base}?{}", rest.join("&")) };
            if let Some(f) = fragment {
                clean = format!("{clean}#{f}");
            }
            if let Ok(v) = HeaderValue::from_str(&clean) {
                parts.headers.insert(header::LOCATION, v);
            }
            Response::from_parts(parts, body)
        }
        None => {
            // server_fn leaves `?` behind when it took an earlier error out.
            if let Some(bare) = location.strip_suffix('?').and_then(|l| HeaderValue::from_str(l).ok()) {
                parts.headers.insert(header::LOCATION, bare);
            }
            if !remembered(&endpoint) {
                return Response::from_parts(parts, body);
            }
            parts.headers.remove(header::CONTENT_LENGTH);
            let bytes = axum::body::to_bytes(body, ANSWER_MAX_BYTES + 1).await.ok();
            let answer = bytes.and_then(|b| String::from_utf8(b.to_vec()).ok()).filter(|a| a.len() <= ANSWER_MAX_BYTES);
            tell(&messages, Outcome { endpoint, error: None, answer });
            Response::from_parts(parts, axum::body::Body::empty())
        }
    }
}

/// Around the pages: hands the session's kept outcomes to this render (and
/// so takes them out of the session). live.js' background refreshes
/// (`X-Gantry-Poll`) leave them for the page a post lands on. A page that
/// says a form was refused is marked ([`OUTCOME_HEADER`]: `refused`), so
/// live.js keeps what was typed in it.
pub async fn hand_outcomes_to_page(req: Request, next: Next) -> Response {
    let (mut parts, body) = req.into_parts();
    let page = parts.method == Method::GET
        && !parts.uri.path().starts_with("/api/")
        && !parts.headers.contains_key("x-gantry-poll");
    let (mut told, mut refused) = (false, false);
    if page && parts.extensions.get::<Messages>().is_some() {
        if let Ok(messages) = Messages::from_request_parts(&mut parts, &()).await {
            let outcomes: Vec<Outcome> = messages.filter_map(outcome_of).collect();
            (told, refused) = (!outcomes.is_empty(), outcomes.iter().any(|o| o.error.is_some()));
            if told {
                parts.extensions.insert(Outcomes(outcomes));
            }
        }
    }
    let mut res = next.run(Request::from_parts(parts, body)).await;
    if refused {
        res.headers_mut().insert(OUTCOME_HEADER, HeaderValue::from_static("refused"));
    }
    if told {
        // Said once: a page that told an outcome is never served again.
        res.headers_mut().insert(crate::page_cache::NOT_KEPT, HeaderValue::from_static("1"));
    }
    res
}

/// Names what the form this page follows did (live.js reads it).
pub const OUTCOME_HEADER: &str = "x-gantry-outcome";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outcome_survives_its_message() {
        for outcome in [
            Outcome { endpoint: "create_machine".into(), error: None, answer: Some("{\"machine_id\":3}".into()) },
            Outcome { endpoint: "cancel_task".into(), error: Some("task #3 already ran".into()), answer: None },
            Outcome {
                endpoint: "upload:dataset".into(),
                error: Some("b.bin: too big".into()),
                answer: Some("a.bin".into()),
            },
        ] {
            let mut metadata = Metadata::new();
            metadata.insert(ENDPOINT.into(), outcome.endpoint.clone().into());
            if let Some(a) = &outcome.answer {
                metadata.insert(ANSWER.into(), a.clone().into());
            }
            let (level, text) = match &outcome.error {
                Some(e) => (Level::Error, e.clone()),
                None => (Level::Success, String::new()),
            };
            let m = Message { level, message: text, metadata: Some(metadata) };
            assert_eq!(outcome_of(m), Some(outcome));
        }
        let foreign = Message { level: Level::Info, message: "hello".into(), metadata: None };
        assert_eq!(outcome_of(foreign), None, "a message Gantry did not write is not shown");
    }
}
