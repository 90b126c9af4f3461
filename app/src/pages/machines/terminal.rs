//! Inside a machine, on its page: a terminal (xterm.js over a WebSocket),
//! the container's logs (the last lines rendered on the server, followed
//! live with JavaScript), and files in and out of the volume (plain HTML
//! forms, so they work without JavaScript).
//!
//! The terminal and the live log are driven by `/vendor/gantry-workspace.js`
//! (served by Gantry with xterm.js), which mounts on the elements marked
//! `data-gantry-terminal` / `data-gantry-logs` once live.js has taken the
//! page over.
//! These panels sit outside the part of the page that refreshes while an
//! operation runs, so a restart does not tear the terminal down: its
//! connection closes with the reason and reconnects when the machine runs.

use crate::{
    api::terminals::{workspace_info, WorkspaceInfo},
    error::AppError,
};
use leptos::prelude::*;

/// Mounted by the machine page with the machine's id (from the route).
#[component]
pub fn MachineWorkspace(#[prop(into)] id: Signal<Option<i64>>) -> impl IntoView {
    move || id.get().map(|id| view! { <Workspace id=id/> })
}

#[component]
fn Workspace(id: i64) -> impl IntoView {
    let info = Resource::new(move || id, workspace_info);
    view! {
        <Suspense fallback=|| ()>
            {move || info.get().map(|r| match r {
                Ok(info) if !info.allowed || !info.docker => view! {
                    <section class="card stack" data-testid="workspace-unavailable">
                        <h2>"Terminal, logs and files"</h2>
                        <p class="muted">{info.note}</p>
                    </section>
                }.into_any(),
                Ok(info) => view! { <Panels id=id info=info/> }.into_any(),
                Err(AppError::NotFound(_)) => ().into_any(),
                Err(e) => view! {
                    <section class="card stack">
                        <h2>"Terminal, logs and files"</h2>
                        <p class="form-error">{e.to_string()}</p>
                    </section>
                }.into_any(),
            })}
        </Suspense>
    }
}

#[component]
fn Panels(id: i64, info: WorkspaceInfo) -> impl IntoView {
    // What the upload form just did, kept for this page by the server.
    let upload = crate::components::flash::outcome_of(crate::components::flash::MACHINE_FILES);
    let (uploaded, upload_error) = (upload.as_ref().and_then(|o| o.answer.clone()), upload.and_then(|o| o.error));
    let files_url = format!("/machines/{id}/files");
    let full_log = format!("/machines/{id}/logs?tail=all");
    let log_text = info.log_tail.clone().unwrap_or_else(|| "(no container yet)".to_string());
    let log_note = format!("Last {} lines", info.log_tail_lines);
    view! {
        <section class="card stack" id="terminal">
            <h2>"Terminal"</h2>
            <div class="workspace-panel" data-gantry-terminal="" data-machine-id=id data-testid="terminal" data-state="static">
                <div class="terminal-bar">
                    <button type="button" class="primary" data-action="connect" data-testid="terminal-open" disabled>"Open terminal"</button>
                    <button type="button" data-action="disconnect" data-testid="terminal-close" disabled>"Close"</button>
                    <span class="muted small" data-role="status" role="status" data-testid="terminal-status">
                        "The terminal needs JavaScript."
                    </span>
                </div>
                <div class="terminal-screen" data-role="screen" data-testid="terminal-screen"></div>
            </div>
            <p class="muted small">
                "A shell inside the machine, as the image's user, in /data (the volume). Copy: select, then Ctrl+Shift+C; paste: Ctrl+Shift+V. "
                "It closes when the machine stops, restarts or is deleted (and reconnects once it runs again), after "
                {info.idle_minutes} " min with nothing typed or printed, or when an administrator closes it. "
                "Only the machine's owner and administrators can open it."
            </p>
        </section>
        <section class="card stack" id="logs">
            <h2>"Logs"</h2>
            <div class="workspace-panel" data-gantry-logs="" data-machine-id=id data-testid="logs" data-state="static">
                <div class="terminal-bar">
                    <button type="button" data-action="follow" data-testid="logs-follow" disabled>"Follow"</button>
                    <span class="muted small" data-role="status" role="status">{log_note}</span>
                    <a href=full_log rel="external" class="small">"Whole log (text)"</a>
                </div>
                <pre class="log-view" data-role="log" data-testid="log-lines">{log_text}</pre>
            </div>
        </section>
        <section class="card stack" id="files">
            <h2>"Files in /data"</h2>
            {uploaded.map(|p| view! { <p class="form-ok" role="status" data-testid="upload-ok">"Uploaded " <code>{p}</code></p> })}
            {upload_error.map(|e| view! { <p class="form-error" role="alert" data-testid="upload-error">{e}</p> })}
            <div class="grid two">
                <form method="post" action=files_url.clone() enctype="multipart/form-data" class="stack" data-testid="upload-form">
                    <label>"Folder in /data"
                        <input type="text" name="dir" placeholder="empty: /data itself" autocomplete="off"/>
                    </label>
                    <label>"File"
                        <input type="file" name="file" required/>
                    </label>
                    <button type="submit">"Upload"</button>
                    <p class="muted small">
                        "Up to " {info.upload_max_mb} " MiB. A file of the same name is replaced; missing folders are created."
                    </p>
                </form>
                <form method="get" action=files_url class="stack" data-testid="download-form" data-native="">
                    <label>"Path in /data"
                        <input type="text" name="path" required placeholder="e.g. results/model.pt" autocomplete="off"/>
                    </label>
                    <button type="submit">"Download"</button>
                    <p class="muted small">"A folder downloads as a .tar archive."</p>
                </form>
            </div>
        </section>
        <script src="/vendor/gantry-workspace.js" defer></script>
    }
}
