//! A group's GPU quota as a bar: in use out of total.

use gantry_platform::accounts::QuotaView;
use leptos::prelude::*;

#[component]
pub fn QuotaGauge(quota: QuotaView) -> impl IntoView {
    let pct = if quota.gpu_quota > 0 { (quota.gpus_in_use * 100 / quota.gpu_quota).clamp(0, 100) } else { 0 };
    let level = match pct {
        0..=69 => "ok",
        70..=89 => "warn",
        _ => "full",
    };
    let name = format!("GPUs in use in group {}", quota.group);
    let said = format!("{} of {} GPUs", quota.gpus_in_use, quota.gpu_quota);
    view! {
        <div class="gauge" data-testid="quota">
            <div class="gauge-label">
                <strong data-testid="quota-used">{quota.gpus_in_use}</strong>
                " / "
                <strong data-testid="quota-total">{quota.gpu_quota}</strong>
                " GPUs in use"
            </div>
            // A meter needs a name of its own (axe: aria-meter-name); the
            // figures above are not its label, so it says what it measures
            // and reads its value as the figures say it.
            <div class="gauge-track" role="meter" aria-label=name aria-valuetext=said
                aria-valuemin="0" aria-valuemax=quota.gpu_quota aria-valuenow=quota.gpus_in_use>
                <div class=format!("gauge-fill {level}") style=format!("width: {pct}%")></div>
            </div>
            <p class="muted">
                "Group " <strong>{quota.group}</strong> " · at most " {quota.max_gpus_per_machine} " GPUs per machine"
            </p>
        </div>
    }
}
