//! The line that says a form worked, after a post without JavaScript.
//!
//! With JavaScript a form's action shows its own answer. Without, the
//! browser posts, the server function succeeds, and the browser is sent back
//! to the page — which has no answer to show. The server then adds a marker
//! naming the function to that redirect (`done=<endpoint>`, signed: see the
//! server's `form_done`), and the frame shows the function's fixed message
//! from the table below. The text never comes from the query: an unknown
//! marker shows nothing.
//!
//! Functions whose form already carries its own result through the redirect
//! (sign-in and out, password change, new token, compute submit, new dataset
//! or version) are not in the table, so their pages show one message only.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

/// The query key of the marker.
pub const DONE_KEY: &str = "done";
/// The query key of the function's answer (its JSON), next to the marker.
pub const ANSWER_KEY: &str = "answer";

/// The endpoints whose pages show the function's own answer (read with
/// [`answer`]) — every page that posts one of them, or the answer would go
/// unsaid: their redirects carry it, signed with the marker, and the fixed
/// line below is not shown for them.
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
    "take_snapshot",
    "delete_snapshot",
    "machine_from_snapshot",
    "reinstall_from_snapshot",
    "delete_kept_volume",
    "change_password",
];

/// The answer of `action`'s function, when the page's URL carries it (a
/// form of this page posted and worked). The server wrote and signed it;
/// a page whose URL it did not sign is redirected before it renders.
#[cfg(feature = "ssr")]
pub fn answer<S>(_action: ServerAction<S>) -> Option<S::Output>
where
    S: leptos::server_fn::ServerFn + Clone + Send + Sync + 'static,
    S::Output: serde::de::DeserializeOwned + Send + Sync + 'static,
    S::Error: Send + Sync + 'static,
{
    let endpoint = S::PATH.strip_prefix("/api/")?;
    let query = use_query_map();
    query.with(|q| {
        (q.get_str(DONE_KEY) == Some(endpoint))
            .then(|| q.get_str(ANSWER_KEY).and_then(|a| serde_json::from_str(a).ok()))
            .flatten()
    })
}

/// In the browser (where no page renders) there is never an answer.
#[cfg(not(feature = "ssr"))]
pub fn answer<S>(_action: ServerAction<S>) -> Option<S::Output>
where
    S: leptos::server_fn::ServerFn + Clone + Send + Sync + 'static,
    S::Output: Send + Sync + 'static,
    S::Error: Send + Sync + 'static,
{
    None
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
    ("rebalance_opt_out", "Rebalancing choice saved."),
    ("take_snapshot", "Snapshot requested."),
    ("delete_snapshot", "Snapshot deleted."),
    ("machine_from_snapshot", "Machine created from the snapshot."),
    ("reinstall_from_snapshot", "Reinstalling from the snapshot (data volume kept)."),
    ("delete_kept_volume", "Volume deleted."),
    ("revoke_token", "Token revoked."),
    ("change_password", "Your password is changed. Your other sessions were signed out."),
    ("seal_dataset_version", "Version sealed."),
    ("delete_dataset_version", "Version deleted."),
    ("cancel_dataset_upload", "Upload cancelled."),
];

/// The fixed message for a server function's success, if it has one.
pub fn done_message(endpoint: &str) -> Option<&'static str> {
    MESSAGES.iter().find(|(e, _)| *e == endpoint).map(|(_, m)| *m)
}

/// The status line, when the page's URL carries a known marker.
#[component]
pub fn NoJsDone() -> impl IntoView {
    let query = use_query_map();
    move || {
        // A page that shows the function's answer says it itself.
        let message = query.with(|q| q.get_str(DONE_KEY).filter(|e| !ANSWERED.contains(e)).and_then(done_message));
        message.map(|m| view! { <p class="form-ok" role="status" data-testid="nojs-done">{m}</p> })
    }
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
