//! A request id on every request: made here (a client's own header is not
//! trusted to be unique), carried in the request's extensions for server
//! functions' error messages, in the tracing span of everything logged while
//! the request runs, and answered as `X-Request-Id`.

use app::error::RequestId;
use axum::{extract::Request, http::HeaderValue, middleware::Next, response::Response};
use rand::RngCore;
use tracing::Instrument;

pub const HEADER: &str = "x-request-id";

pub fn new_id() -> String {
    let mut bytes = [0u8; 8];
    rand::thread_rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub async fn request_id(mut req: Request, next: Next) -> Response {
    let id = new_id();
    req.extensions_mut().insert(RequestId(id.clone()));
    let span = tracing::info_span!("request", id = %id, method = %req.method(), path = %req.uri().path());
    let mut res = next.run(req).instrument(span).await;
    if let Ok(v) = HeaderValue::from_str(&id) {
        res.headers_mut().insert(HEADER, v);
    }
    res
}
