//! The one island, the only code that runs in the browser: the dataset
//! version page's upload area. Drop files or choose them; each file gets its own bar
//! (bytes sent of total, rate, time left) and a cancel button. With
//! JavaScript the page's wasm sends each file through the resumable upload
//! API (`browser`: pieces at offsets, resumed after a dropped
//! connection); without it, the same form posts the files as multipart and
//! the server redirects back.

use crate::model::datasets::{encode, rate_label};
use gantry_core::datasets::format_bytes;
use leptos::prelude::*;

#[cfg(feature = "hydrate")]
mod browser;
#[cfg(feature = "hydrate")]
mod cancel;

#[cfg(feature = "hydrate")]
use crate::model::datasets::{download_url, resumable_url};

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
enum Phase {
    Sending,
    Done,
    Failed(String),
    /// Cancel was pressed; the server has not yet said what came of it.
    Cancelling,
    Cancelled,
    /// Cancel came too late: the server had already verified and listed it.
    FinishedFirst,
}

impl Phase {
    fn key(&self) -> &'static str {
        match self {
            Phase::Sending => "sending",
            Phase::Done => "done",
            Phase::Failed(_) => "failed",
            Phase::Cancelling => "cancelling",
            Phase::Cancelled => "cancelled",
            Phase::FinishedFirst => "finished-before-cancel",
        }
    }
}

/// One file on its way.
#[derive(Clone)]
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
struct Item {
    pub id: usize,
    pub name: String,
    /// Its resumable upload (`…/uploads/{name}`).
    pub url: String,
    /// The file once listed (asked after a Cancel the server did not hold).
    pub file_url: String,
    pub total: f64,
    pub started_ms: f64,
    pub sent: RwSignal<f64>,
    pub phase: RwSignal<Phase>,
    /// Its last piece has gone out: the server may list it whatever Cancel does.
    pub finishing: StoredValue<bool>,
}

/// An island: the only part of the version page that runs in the browser.
/// A finished or cancelled upload asks live.js to refresh the page (the
/// file list); the island's own rows are left as they are.
#[island]
pub fn UploadArea(code: String, version: String, max_bytes: u64) -> impl IntoView {
    let items = RwSignal::new(Vec::<Item>::new());
    let replace = RwSignal::new(false);
    let input = NodeRef::<leptos::html::Input>::new();
    #[cfg(feature = "hydrate")]
    let handles: browser::Handles = StoredValue::new_local(Vec::new());
    let next_id = StoredValue::new(0usize);
    let action = format!("/datasets/{}/{}/upload", encode(&code), encode(&version));
    // Only the browser sends files from here (the server renders the form).
    #[cfg(not(feature = "hydrate"))]
    let _ = next_id;

    #[cfg(feature = "hydrate")]
    let start = {
        let (code, version) = (code.clone(), version.clone());
        move |files: Vec<leptos::web_sys::File>| {
            for file in files {
                let id = next_id.get_value();
                next_id.set_value(id + 1);
                let item = Item {
                    id,
                    name: file.name(),
                    url: resumable_url(&code, &version, &file.name()),
                    file_url: download_url(&code, &version, &file.name()),
                    total: file.size(),
                    started_ms: browser::now(),
                    sent: RwSignal::new(0.0),
                    phase: RwSignal::new(Phase::Sending),
                    finishing: StoredValue::new(false),
                };
                items.update(|list| list.push(item.clone()));
                let url = item.url.clone();
                browser::send(file, url, replace.get_untracked(), item, handles, browser::refresh_page);
            }
        }
    };
    let on_submit = {
        #[cfg(feature = "hydrate")]
        let start = start.clone();
        move |ev: leptos::ev::SubmitEvent| {
            #[cfg(feature = "hydrate")]
            if let Some(el) = input.get() {
                ev.prevent_default();
                let files = browser::files_of_input(&el);
                el.set_value("");
                start(files);
            }
            #[cfg(not(feature = "hydrate"))]
            let _ = (ev, input);
        }
    };
    let on_drop = move |ev: leptos::ev::DragEvent| {
        ev.prevent_default();
        #[cfg(feature = "hydrate")]
        start(browser::files_of_drop(&ev));
    };
    let cancel = move |id: usize| {
        if let Some(item) = items.with_untracked(|l| l.iter().find(|i| i.id == id).cloned()) {
            item.phase.set(Phase::Cancelling);
            #[cfg(feature = "hydrate")]
            cancel::cancel(handles, item, browser::refresh_page);
        }
    };
    view! {
        <section class="card stack">
            <h2>"Upload"</h2>
            <form method="post" action=action enctype="multipart/form-data" class="stack" data-testid="upload-form" on:submit=on_submit>
                <label class="check">
                    <input type="checkbox" name="replace" on:change=move |ev| replace.set(event_target_checked(&ev))/>
                    " Replace files that already have the same name"
                </label>
                <div class="dropzone" data-testid="dropzone" on:dragover=|ev: leptos::ev::DragEvent| ev.prevent_default() on:drop=on_drop>
                    <p>"Drop files here, or choose them: "</p>
                    <input type="file" name="file" multiple node_ref=input data-testid="file-input" aria-label="Files to upload"/>
                </div>
                <p class="muted small">{format!("Each file may be up to {}. Files go to the central store and the owning region's store; both copies are checked by SHA-256 before a file is listed.", format_bytes(max_bytes))}</p>
                <button type="submit" class="primary" data-testid="upload-submit">"Upload"</button>
            </form>
            <ul class="uploads" data-testid="uploads">
                <For each=move || items.get() key=|i| i.id let:item>
                    <UploadRow item=item cancel=cancel/>
                </For>
            </ul>
        </section>
    }
}

#[component]
fn UploadRow(item: Item, cancel: impl Fn(usize) + Copy + Send + Sync + 'static) -> impl IntoView {
    let Item { id, name, total, started_ms, sent, phase, .. } = item;
    let figures = move || {
        let s = sent.get();
        let pct = if total > 0.0 { (s / total * 100.0).floor() } else { 100.0 };
        let rate = if phase.get() == Phase::Sending {
            rate_label(s, total, (now_ms() - started_ms) / 1000.0)
        } else {
            String::new()
        };
        let sep = if rate.is_empty() { "" } else { " · " };
        format!("{} of {} ({pct} %){sep}{rate}", format_bytes(s as u64), format_bytes(total as u64))
    };
    view! {
        <li class="upload-item" data-testid="upload-item" data-name=name.clone() data-state=move || phase.get().key()>
            <span class="upload-name">{name.clone()}</span>
            <progress max=total value=move || sent.get() data-testid="upload-progress"></progress>
            <span class="upload-figures muted small" data-testid="upload-figures">{figures}</span>
            {move || match phase.get() {
                Phase::Sending => view! { <button type="button" data-testid="upload-cancel" on:click=move |_| cancel(id)>"Cancel"</button> }.into_any(),
                Phase::Done => view! { <span class="ok">"stored and verified"</span> }.into_any(),
                Phase::Cancelling => view! { <span class="muted">"cancelling…"</span> }.into_any(),
                Phase::Cancelled => view! { <span class="muted">"cancelled"</span> }.into_any(),
                Phase::FinishedFirst => view! { <span class="ok">"finished before it could be cancelled: stored and verified"</span> }.into_any(),
                Phase::Failed(m) => view! { <span class="form-error" role="alert">{m}</span> }.into_any(),
            }}
        </li>
    }
}

fn now_ms() -> f64 {
    #[cfg(feature = "hydrate")]
    return browser::now();
    #[cfg(not(feature = "hydrate"))]
    0.0
}
