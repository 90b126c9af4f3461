//! Pure helpers shared by the pages and the island: parsing form fields,
//! formatting figures and links. No IO, and nothing here mirrors the
//! platform's views (pages render those directly).

pub mod catalogue;
pub mod compute;
pub mod datasets;
pub mod fleet;
pub mod lists;
pub mod machines;
pub mod reclaim;
pub mod snapshots;
pub mod tokens;

/// The sign-in page that comes back to `next` (percent-encoded).
pub fn login_url(next: &str) -> String {
    format!("/login?next={}", gantry_core::url::encode_path(next))
}
