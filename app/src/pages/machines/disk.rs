//! The machine page's line on its own filesystem (everything outside
//! /data): the disk watcher's last reading against the group's limit, so
//! an owner sees it fill before the warning and the stop (their reasons
//! are in the machine's history and message).

use crate::{api::disk::machine_disk, error::AppError};
use leptos::prelude::*;

#[component]
pub fn MachineDisk(id: Signal<Option<i64>>) -> impl IntoView {
    let data = Resource::new(
        move || id.get(),
        |id| async move {
            match id {
                Some(id) => machine_disk(id).await,
                // The page itself says the machine is not found.
                None => Err(AppError::NotFound("machine not found".into())),
            }
        },
    );
    view! {
        <Suspense fallback=|| ()>
            {move || data.get().and_then(Result::ok).map(|u| {
                let at = u.measured_at.map(|t| format!(" (measured {} UTC)", gantry_core::time::format_utc(t)));
                view! {
                    <section class="card" data-testid="machine-disk">
                        <h2>
                            "Filesystem outside /data"
                            {u.warned.then(|| view! { " " <span class="tag warn" data-testid="machine-disk-warned">"nearly full"</span> })}
                        </h2>
                        <p>{u.summary()} {at}</p>
                        {(u.limit_mb > 0).then(|| view! {
                            <p class="muted small">
                                "Over the group's limit the machine is stopped (warned first, from 90 %); keep large files in /data, which does not count."
                            </p>
                        })}
                    </section>
                }
            })}
        </Suspense>
    }
}
