//! What a form did, shown on the page that follows its post.
//!
//! A form posts as plain HTML (without JavaScript, or through live.js) and
//! is answered with a redirect back to its page. The server keeps the
//! outcome — the function's refusal, or its answer — as a one-time message
//! in the poster's own session (`axum-messages` on tower-sessions; the
//! server's `http::outcomes`), and hands the messages to the next page that
//! session renders, as [`Outcomes`] in the request. Nothing travels in the
//! URL: a link can neither make a page say something nor show another
//! user's answer, and a message is shown once.
//!
//! Errors are shown next to their form ([`error`]); a page that shows a
//! function's own answer reads it with [`answer`] (the functions in
//! [`ANSWERED`]); the others get their fixed line from the table below in
//! the page's frame ([`FlashDone`]).

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// One form's outcome: which server function (its endpoint, the path after
/// `/api/`, or `upload:…` for the streamed upload forms), and its refusal
/// or its answer (the function's reply as JSON; for an upload form the
/// names stored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    pub endpoint: String,
    pub error: Option<String>,
    pub answer: Option<String>,
}

/// The outcomes handed to this page render (the server puts them in the
/// request's extensions).
#[derive(Debug, Clone, Default)]
pub struct Outcomes(pub Vec<Outcome>);

/// The upload form of a dataset version (`POST …/upload`).
pub const DATASET_UPLOAD: &str = "upload:dataset";
/// The upload form of a machine's files (`POST /machines/{id}/files`).
pub const MACHINE_FILES: &str = "upload:files";

/// The functions whose pages show the function's own answer (read with
/// [`answer`]); the fixed line below is not shown for them.
pub const ANSWERED: &[&str] = &[
    "admin/create_user",
    "admin/set_user_enabled",
    "admin/reset_password",
    "admin/set_user_role",
    "admin/set_user_group",
    "admin/update_group",
    "admin/set_dataset_quota",
    "admin/add_node",
    "admin/mark_node_lost",
    "admin/remove_node",
    "admin/create_image",
    "admin/create_region",
    "admin/create_region_image",
    "admin/create_master_image",
    "save_reclaim_settings",
    "create_machine",
    "machine_operation",
    "cancel_task",
    "cancel_compute",
    "extend_reclaim",
    "start_machine_or_queue",
    "take_snapshot",
    "delete_snapshot",
    "machine_from_snapshot",
    "reinstall_from_snapshot",
    "delete_kept_volume",
    "change_password",
];

/// Whether a page of this app shows `endpoint`'s success (its fixed line
/// or its answer): the server keeps only those, and every refusal.
pub fn remembered(endpoint: &str) -> bool {
    ANSWERED.contains(&endpoint) || done_message(endpoint).is_some()
}

/// The outcomes of this render.
fn outcomes() -> Vec<Outcome> {
    use_context::<http::request::Parts>()
        .and_then(|p| p.extensions.get::<Outcomes>().cloned())
        .map(|o| o.0)
        .unwrap_or_default()
}

/// The outcome of the form posted to `endpoint`, if it was just posted.
pub fn outcome_of(endpoint: &str) -> Option<Outcome> {
    outcomes().into_iter().rev().find(|o| o.endpoint == endpoint)
}

fn endpoint_of<S: leptos::server_fn::ServerFn>() -> &'static str {
    S::PATH.strip_prefix("/api/").unwrap_or(S::PATH)
}

/// The refusal of `action`'s function, when its form was just posted and
/// refused.
pub fn error<S>(_action: ServerAction<S>) -> Option<String>
where
    S: leptos::server_fn::ServerFn + Clone + Send + Sync + 'static,
    S::Output: Send + Sync + 'static,
    S::Error: Send + Sync + 'static,
{
    outcome_of(endpoint_of::<S>()).and_then(|o| o.error)
}

/// The answer of `action`'s function, when its form was just posted and
/// worked.
pub fn answer<S>(_action: ServerAction<S>) -> Option<S::Output>
where
    S: leptos::server_fn::ServerFn + Clone + Send + Sync + 'static,
    S::Output: serde::de::DeserializeOwned + Send + Sync + 'static,
    S::Error: Send + Sync + 'static,
{
    let o = outcome_of(endpoint_of::<S>()).filter(|o| o.error.is_none())?;
    serde_json::from_str(o.answer.as_deref()?).ok()
}

/// A server function's endpoint (its path after `/api/`) → what its
/// success means to the person who sent the form.
const MESSAGES: &[(&str, &str)] = &[
    ("admin/create_user", "User created."),
    ("admin/set_user_enabled", "Account updated."),
    ("admin/reset_password", "Password reset: the user chooses a new one at their next sign-in."),
    ("admin/set_user_role", "Role changed."),
    ("admin/set_user_group", "Group changed."),
    ("admin/create_group", "Group created."),
    ("admin/update_group", "Group policy saved."),
    ("admin/set_dataset_quota", "Dataset quota saved."),
    ("admin/add_node", "Node added."),
    ("admin/set_node_state", "Node state saved."),
    ("admin/mark_node_lost", "Node marked lost."),
    ("admin/remove_node", "Node removed."),
    ("admin/create_image", "Image added."),
    ("admin/create_region", "Region added."),
    ("admin/create_region_image", "Region image added."),
    ("admin/create_master_image", "Master image added."),
    ("admin/link_image", "Image linked."),
    ("admin/unlink_image", "Image unlinked."),
    ("admin/set_sim_pattern", "GPU pattern saved."),
    ("save_reclaim_settings", "Reclaim settings saved."),
    ("set_reclaim_exempt", "Exemption saved."),
    ("close_terminal", "Close requested: the terminal ends within seconds."),
    ("create_machine", "Machine created — it appears below as it starts."),
    ("machine_operation", "Requested — the task history shows its progress."),
    ("cancel_task", "Task cancelled."),
    ("cancel_compute", "Cancel requested."),
    ("extend_reclaim", "Reclaim deadline extended."),
    ("restore_machine", "Restore requested."),
    ("stop_machine", "Stop requested: its filesystem is saved, then its GPUs go back to the group."),
    ("start_machine", "Start requested — the task history shows its progress."),
    ("start_machine_or_queue", "Start requested."),
    ("cancel_queued_start", "Waiting start cancelled."),
    ("set_machine_schedule", "Schedule saved."),
    ("set_my_time_zone", "Time zone saved."),
    ("set_group_max_run", "Longest run saved."),
    ("rebalance_opt_out", "Rebalancing choice saved."),
    ("take_snapshot", "Snapshot requested."),
    ("delete_snapshot", "Snapshot deleted."),
    ("machine_from_snapshot", "Machine created from the snapshot."),
    ("reinstall_from_snapshot", "Reinstalling from the snapshot (data volume kept)."),
    ("delete_kept_volume", "Volume deleted."),
    ("revoke_token", "Token revoked."),
    ("change_password", "Your password is changed. Your other sessions were signed out and your API tokens revoked."),
    ("seal_dataset_version", "Version sealed."),
    ("delete_dataset_version", "Version deleted."),
    ("cancel_dataset_upload", "Upload cancelled."),
];

/// The fixed message for a server function's success, if it has one.
pub fn done_message(endpoint: &str) -> Option<&'static str> {
    MESSAGES.iter().find(|(e, _)| *e == endpoint).map(|(_, m)| *m)
}

/// The status line of a form that worked, when its page does not show the
/// function's own answer.
#[component]
pub fn FlashDone() -> impl IntoView {
    outcomes()
        .into_iter()
        .filter(|o| o.error.is_none() && !ANSWERED.contains(&o.endpoint.as_str()))
        .filter_map(|o| done_message(&o.endpoint))
        .map(|m| view! { <p class="form-ok" role="status" data-testid="nojs-done">{m}</p> })
        .collect_view()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_endpoint_is_listed_once_and_unknown_ones_have_no_message() {
        for (i, (endpoint, _)) in MESSAGES.iter().enumerate() {
            assert!(MESSAGES[..i].iter().all(|(e, _)| e != endpoint), "{endpoint} twice");
        }
        assert_eq!(done_message("admin/update_group"), Some("Group policy saved."));
        assert_eq!(done_message("login"), None, "sign-in carries its own result");
        assert_eq!(done_message("<b>locked</b>"), None);
        for endpoint in ANSWERED {
            assert!(done_message(endpoint).is_some(), "{endpoint} answers but has no marker");
        }
    }

    /// A misspelt endpoint would never be marked: each must be a server function's.
    #[test]
    fn every_endpoint_names_a_server_function() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/api");
        let sources: String = std::fs::read_dir(dir)
            .unwrap()
            .map(|f| f.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .map(|p| std::fs::read_to_string(p).unwrap())
            .collect();
        for (endpoint, _) in MESSAGES {
            assert!(sources.contains(&format!("endpoint = \"{endpoint}\")")), "{endpoint}");
        }
    }
}
