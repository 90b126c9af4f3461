//! Cancel on the upload page: the request in flight is aborted and what
//! the server holds is deleted. The row says "cancelling" until the server
//! has answered, and "cancelled" only once that is so: a file whose last
//! piece had gone out may have been verified and listed before the cancel
//! reached the server, and then the row says that instead.

use super::{
    browser::{error_of, go_to_login, Handles},
    Item, Phase,
};
use leptos::{
    prelude::*,
    wasm_bindgen::{closure::Closure, JsCast},
    web_sys::XmlHttpRequest,
};
use std::{rc::Rc, time::Duration};

/// Times a cancelled upload's `DELETE` is repeated while the server still
/// holds it for the aborted request (1 + 2 + 4 + 8 × 5 s at most).
const DISCARD_TRIES: u32 = 8;

/// Cancel (the row already says "cancelling"): aborts the request in
/// flight and deletes what the server holds.
pub fn cancel(handles: Handles, item: Item, done: impl Fn() + 'static) {
    handles.with_value(|h| {
        if let Some((_, xhr)) = h.iter().find(|(i, _)| *i == item.id) {
            let _ = xhr.abort();
        }
    });
    discard(item, Rc::new(done), 0);
}

/// `DELETE`s what the server holds of a cancelled upload. The request just
/// aborted may still hold the upload on the server for a moment (it has not
/// yet seen the connection die, or it is placing the file): answered 409
/// with `Retry-After`, asked again after 1, 2, 4… s. The row then says what
/// came of it: an upload the server no longer holds may have been listed
/// just before, if its last piece had gone out.
fn discard(item: Item, done: Rc<dyn Fn()>, tries: u32) {
    let url = item.url.clone();
    after_cancel(&item.clone(), "DELETE", &url, move |answer, status| {
        let busy = status == 409 && answer.get_response_header("retry-after").ok().flatten().is_some();
        match status {
            204 => item.phase.set(Phase::Cancelled),
            404 if item.finishing.get_value() => listed_or(item.clone(), done.clone(), Phase::Cancelled),
            404 => item.phase.set(Phase::Cancelled),
            401 => go_to_login(),
            _ if busy && tries < DISCARD_TRIES => {
                let (item, done) = (item.clone(), done.clone());
                set_timeout(move || discard(item, done, tries + 1), Duration::from_secs(1 << tries.min(3)));
            }
            _ if busy => listed_or(item.clone(), done.clone(), Phase::Failed(STILL_BUSY.into())),
            _ => item.phase.set(Phase::Failed(format!("could not cancel: {}", error_of(answer, status)))),
        }
    });
}

const STILL_BUSY: &str =
    "could not cancel: the server is still busy with this file; reload the page later to see whether it was listed";
const CANCEL_UNKNOWN: &str =
    "could not cancel: the connection failed; reload the page to see whether the file was listed";

/// Asks whether the file is listed now (`HEAD` of its download): then the
/// server finished it before Cancel reached it, and the row says so (the
/// file list reloads); otherwise the row becomes `otherwise`.
fn listed_or(item: Item, done: Rc<dyn Fn()>, otherwise: Phase) {
    let url = item.file_url.clone();
    after_cancel(&item.clone(), "HEAD", &url, move |_, status| {
        if status == 200 {
            item.sent.set(item.total);
            item.phase.set(Phase::FinishedFirst);
            done();
        } else {
            item.phase.set(otherwise.clone());
        }
    });
}

/// A request made for a cancelled row: `then` gets the answer; a request
/// that cannot be sent or whose connection fails leaves the row saying so.
fn after_cancel(item: &Item, method: &str, url: &str, then: impl Fn(&XmlHttpRequest, u16) + 'static) {
    let phase = item.phase;
    let unknown = move || phase.set(Phase::Failed(CANCEL_UNKNOWN.into()));
    let Some(xhr) = XmlHttpRequest::new().ok().filter(|x| x.open_with_async(method, url, true).is_ok()) else {
        return unknown();
    };
    let answer = xhr.clone();
    let loaded = Closure::<dyn FnMut()>::new(move || then(&answer, answer.status().unwrap_or(0)));
    xhr.set_onload(Some(loaded.as_ref().unchecked_ref()));
    loaded.forget();
    let broken = Closure::<dyn FnMut()>::new(unknown);
    xhr.set_onerror(Some(broken.as_ref().unchecked_ref()));
    broken.forget();
    let _ = xhr.send();
}
