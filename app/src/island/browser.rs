//! The upload page's browser half. Every file goes through the resumable
//! upload API (`POST …/uploads/{name}` with its length, then `PATCH`es of
//! at most 32 MiB at the offset the server holds), sent with
//! XMLHttpRequest for its upload progress events (fetch has none).
//!
//! A dropped connection does not start the file over: after a growing
//! pause the page asks the server how much it holds (`HEAD`) and goes on
//! from there, up to six times in a row; after that the row says so, and
//! choosing the same file again continues from the server's offset (the
//! server finds the unfinished upload of that name and length). Every
//! request names the file (`X-Gantry-Fingerprint`, from its first and
//! last 64 KiB and its modification time): the server continues only an
//! upload of the same file, and starts another file of the same name and
//! size over. Cancel is `upload_cancel`'s. A session that has ended (401)
//! leaves for the sign-in page (`go_to_login`), as live.js does for pages.

use super::{Item, Phase};
use crate::{
    model::datasets::{file_fingerprint, FINGERPRINT_SAMPLE_BYTES, RESUMABLE_CHUNK_BYTES},
    model::login_url,
};
use leptos::{
    prelude::*,
    wasm_bindgen::{closure::Closure, JsCast, JsValue},
    web_sys::{self, js_sys, Blob, File, HtmlInputElement, ProgressEvent, XmlHttpRequest},
};
use std::{cell::Cell, rc::Rc, time::Duration};

/// Leaves a page whose session has ended for the sign-in page, coming back
/// here after.
pub fn go_to_login() {
    let location = window().location();
    let here = format!("{}{}", location.pathname().unwrap_or_default(), location.search().unwrap_or_default());
    if !here.starts_with("/login") {
        let _ = location.assign(&login_url(&here));
    }
}

/// Tries in a row without progress before the row gives up.
const RETRIES: u32 = 6;

/// The request in flight per row, so Cancel can abort it.
pub type Handles = StoredValue<Vec<(usize, XmlHttpRequest)>, LocalStorage>;

pub fn now() -> f64 {
    web_sys::js_sys::Date::now()
}

/// Asks live.js to fetch the page again (the file list outside the island).
pub fn refresh_page() {
    if let Ok(event) = web_sys::Event::new("gantry:refresh") {
        let _ = document().dispatch_event(&event);
    }
}

pub fn files_of_input(input: &HtmlInputElement) -> Vec<File> {
    input.files().map(|l| (0..l.length()).filter_map(|i| l.get(i)).collect()).unwrap_or_default()
}

pub fn files_of_drop(ev: &web_sys::DragEvent) -> Vec<File> {
    ev.data_transfer()
        .and_then(|d| d.files())
        .map(|l| (0..l.length()).filter_map(|i| l.get(i)).collect())
        .unwrap_or_default()
}

/// One file's transfer.
struct Job {
    file: File,
    /// `…/uploads/{name}`.
    url: String,
    replace: bool,
    item: Item,
    handles: Handles,
    done: Rc<dyn Fn()>,
    /// Failed tries since the last progress.
    tries: Cell<u32>,
    /// `X-Gantry-Fingerprint`.
    fingerprint: String,
}

pub fn send(file: File, url: String, replace: bool, item: Item, handles: Handles, done: impl Fn() + 'static) {
    let done: Rc<dyn Fn()> = Rc::new(done);
    fingerprint(&file.clone(), move |fingerprint| match fingerprint {
        Some(fingerprint) => {
            begin(Rc::new(Job { file, url, replace, item, handles, done, tries: Cell::new(0), fingerprint }))
        }
        None if item.phase.get_untracked() == Phase::Sending => {
            item.phase.set(Phase::Failed("could not read the file".into()))
        }
        None => {}
    });
}

/// Names `file` by its modification time and its first and last bytes.
fn fingerprint(file: &File, then: impl FnOnce(Option<String>) + 'static) {
    let (size, modified) = (file.size(), file.last_modified());
    let sample = FINGERPRINT_SAMPLE_BYTES.min(size);
    let (Ok(head), Ok(tail)) =
        (file.slice_with_f64_and_f64(0.0, sample), file.slice_with_f64_and_f64(size - sample, size))
    else {
        return then(None);
    };
    read_bytes(&head, move |head| match head {
        Some(head) => read_bytes(&tail, move |tail| then(tail.map(|tail| file_fingerprint(modified, &head, &tail)))),
        None => then(None),
    });
}

fn read_bytes(blob: &Blob, then: impl FnOnce(Option<Vec<u8>>) + 'static) {
    let then = Rc::new(Cell::new(Some(Box::new(then) as Box<dyn FnOnce(Option<Vec<u8>>)>)));
    let failed = then.clone();
    let read = Closure::<dyn FnMut(JsValue)>::new(move |buf: JsValue| {
        then.take().into_iter().for_each(|f| f(Some(js_sys::Uint8Array::new(&buf).to_vec())))
    });
    let unreadable =
        Closure::<dyn FnMut(JsValue)>::new(move |_: JsValue| failed.take().into_iter().for_each(|f| f(None)));
    let _ = blob.array_buffer().then2(&read, &unreadable);
    read.forget();
    unreadable.forget();
}

fn active(job: &Job) -> bool {
    job.item.phase.get_untracked() == Phase::Sending
}

/// A request for this job, registered for Cancel; `None` after a failure
/// that was already shown.
fn request(job: &Rc<Job>, method: &str, url: &str) -> Option<XmlHttpRequest> {
    let xhr = XmlHttpRequest::new().ok()?;
    xhr.open_with_async(method, url, true).ok()?;
    let _ = xhr.set_request_header("Accept", "application/json");
    let _ = xhr.set_request_header("X-Gantry-Fingerprint", &job.fingerprint);
    let id = job.item.id;
    job.handles.update_value(|h| {
        h.retain(|(i, _)| *i != id);
        h.push((id, xhr.clone()));
    });
    let again = job.clone();
    let broken = Closure::<dyn FnMut()>::new(move || retry(again.clone()));
    xhr.set_onerror(Some(broken.as_ref().unchecked_ref()));
    broken.forget();
    Some(xhr)
}

fn fail(job: &Job, message: String) {
    if active(job) {
        job.item.phase.set(Phase::Failed(message));
    }
}

fn offset_of(xhr: &XmlHttpRequest) -> Option<f64> {
    xhr.get_response_header("upload-offset").ok().flatten().and_then(|v| v.trim().parse().ok())
}

/// `POST` with the length: the server answers the offset it holds (0 for
/// a new upload, more for an unfinished one of this name and length).
fn begin(job: Rc<Job>) {
    if !active(&job) {
        return; // cancelled while the file was being read
    }
    let url = if job.replace { format!("{}?replace=1", job.url) } else { job.url.clone() };
    let Some(xhr) = request(&job, "POST", &url) else { return fail(&job, "this browser cannot upload".into()) };
    let _ = xhr.set_request_header("Upload-Length", &job.item.total.to_string());
    on_load(&xhr, job.clone(), |job, xhr, status| match (status, offset_of(xhr)) {
        (200 | 201, Some(offset)) => patch(job, offset),
        _ => refused(&job, xhr, status),
    });
    if xhr.send().is_err() {
        fail(&job, "could not start the upload".into());
    }
}

/// Sends the next piece from `offset`.
fn patch(job: Rc<Job>, offset: f64) {
    if !active(&job) {
        return;
    }
    let total = job.item.total;
    let end = (offset + RESUMABLE_CHUNK_BYTES).min(total);
    let Ok(piece) = job.file.slice_with_f64_and_f64(offset, end) else {
        return fail(&job, "could not read the file".into());
    };
    let Some(xhr) = request(&job, "PATCH", &job.url) else { return fail(&job, "could not continue the upload".into()) };
    // From here the server may list the file whatever Cancel does.
    if end >= total {
        job.item.finishing.set_value(true);
    }
    let _ = xhr.set_request_header("Upload-Offset", &offset.to_string());
    let _ = xhr.set_request_header("Content-Type", "application/offset+octet-stream");
    let sent = job.item.sent;
    if let Ok(upload) = xhr.upload() {
        let progress =
            Closure::<dyn FnMut(ProgressEvent)>::new(move |ev: ProgressEvent| sent.set(offset + ev.loaded()));
        upload.set_onprogress(Some(progress.as_ref().unchecked_ref()));
        progress.forget();
    }
    on_load(&xhr, job.clone(), move |job, xhr, status| match (status, offset_of(xhr)) {
        (201, _) => {
            job.item.sent.set(total);
            job.item.phase.set(Phase::Done);
            (job.done)();
        }
        (204, Some(next)) => {
            job.tries.set(0);
            patch(job, next);
        }
        // The server holds a different amount (an earlier try got further).
        (409, Some(held)) if held != offset => patch(job, held),
        // Another request still holds the upload (an earlier try the server
        // has not yet seen die): wait and ask again, as after a cut.
        (409, _) if xhr.get_response_header("retry-after").ok().flatten().is_some() => retry(job),
        _ => refused(&job, xhr, status),
    });
    if xhr.send_with_opt_blob(Some(&piece)).is_err() {
        fail(&job, "could not send the file".into());
    }
}

/// The connection failed: wait (2, 4, 8… s), ask the server what it holds,
/// go on from there.
fn retry(job: Rc<Job>) {
    if !active(&job) {
        return;
    }
    let tries = job.tries.get() + 1;
    job.tries.set(tries);
    if tries > RETRIES {
        return fail(
            &job,
            "the connection keeps failing; choose the file again to continue from where it stopped".into(),
        );
    }
    set_timeout(
        move || {
            if !active(&job) {
                return;
            }
            let Some(xhr) = request(&job, "HEAD", &job.url) else {
                return fail(&job, "could not resume the upload".into());
            };
            on_load(&xhr, job.clone(), |job, xhr, status| match (status, offset_of(xhr)) {
                (200, Some(held)) => patch(job, held),
                (401, _) => go_to_login(),
                _ => fail(&job, format!("the upload could not be resumed (the server answered {status})")),
            });
            if xhr.send().is_err() {
                fail(&job, "could not resume the upload".into());
            }
        },
        Duration::from_secs(1 << tries.min(5)),
    );
}

fn on_load(xhr: &XmlHttpRequest, job: Rc<Job>, then: impl Fn(Rc<Job>, &XmlHttpRequest, u16) + 'static) {
    let answer = xhr.clone();
    let loaded = Closure::<dyn FnMut()>::new(move || {
        if active(&job) {
            then(job.clone(), &answer, answer.status().unwrap_or(0));
        }
    });
    xhr.set_onload(Some(loaded.as_ref().unchecked_ref()));
    loaded.forget();
}

/// A refusal: an ended session (401) goes to the sign-in page, which comes
/// back here (choosing the file again continues the upload); anything else
/// is the row's error.
fn refused(job: &Job, xhr: &XmlHttpRequest, status: u16) {
    if status == 401 {
        go_to_login();
    } else {
        fail(job, error_of(xhr, status));
    }
}

/// `{"error": "…"}` → the message (the server's JSON has no nesting).
pub(super) fn error_of(xhr: &XmlHttpRequest, status: u16) -> String {
    let body = xhr.response_text().ok().flatten().unwrap_or_default();
    body.split_once("\"error\":")
        .and_then(|(_, rest)| rest.trim_start().strip_prefix('"'))
        .and_then(|rest| rest.rsplit_once('"').map(|(m, _)| m.replace("\\\"", "\"")))
        .unwrap_or_else(|| format!("the server answered {status}"))
}
