//! Dataset storage per group in the admin console: what each group holds
//! and its byte quota, which an admin sets (audited). Uploads over the
//! quota are refused with the numbers (`gantry_core::datasets::check_quota`).

use crate::error::AppError;
use gantry_platform::datasets::quotas::GroupStorage;
use leptos::prelude::*;

#[server(prefix = "/api", endpoint = "admin/dataset_storage")]
pub async fn dataset_storage() -> Result<Vec<GroupStorage>, AppError> {
    use crate::api::datasets::{app_error, stores};
    crate::state::require_admin()?;
    let default = stores().map(|s| s.limits().default_quota_bytes).unwrap_or_default();
    gantry_platform::datasets::quotas::overview(&crate::state::pool()?, default).await.map_err(app_error)
}

/// Sets a group's dataset quota in GB (decimals allowed, e.g. 0.5). A
/// quota below what the group holds deletes nothing; new uploads are
/// refused until enough is removed.
#[server(prefix = "/api", endpoint = "admin/set_dataset_quota")]
pub async fn set_dataset_quota(group: String, quota_gb: String) -> Result<String, AppError> {
    let admin = crate::state::require_admin()?;
    let bytes = parse_quota_gb(&quota_gb).map_err(|m| AppError::Invalid(m).respond())?;
    gantry_platform::datasets::set_quota(&crate::state::pool()?, &admin, group.trim(), bytes)
        .await
        .map_err(crate::api::datasets::app_error)?;
    Ok(group.trim().to_string())
}

/// `quota_gb` as bytes: a non-negative number of GB (2^30 bytes), at most a
/// million GB.
pub fn parse_quota_gb(text: &str) -> Result<u64, String> {
    let gb: f64 =
        text.trim().parse().map_err(|_| format!("the dataset quota must be a number of GB, not {:?}", text.trim()))?;
    if !gb.is_finite() || !(0.0..=1_000_000.0).contains(&gb) {
        return Err("the dataset quota must be between 0 and 1,000,000 GB".into());
    }
    Ok((gb * (1u64 << 30) as f64).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::parse_quota_gb;

    #[test]
    fn quotas_in_gb_become_bytes_and_nonsense_is_refused() {
        assert_eq!(parse_quota_gb(" 2 "), Ok(2 << 30));
        assert_eq!(parse_quota_gb("0.5"), Ok(1 << 29));
        assert_eq!(parse_quota_gb("0"), Ok(0));
        for bad in ["", "-1", "abc", "NaN", "inf", "1e9"] {
            assert!(parse_quota_gb(bad).is_err(), "{bad}");
        }
    }
}
