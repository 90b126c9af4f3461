//! Idle reclaim, rebalancing and machine events as the portal shows them:
//! the events' labels and the admin's settings form (the pages render the
//! platform's `ReclaimStatus`, `MachineEvent` and console views).

use gantry_core::{
    rebalance::HotSettings,
    reclaim::{MachineEventKind, ReclaimSettings},
};

/// What a machine's history says for an event.
pub fn event_label(kind: MachineEventKind) -> &'static str {
    match kind {
        MachineEventKind::ReclaimWarning => "idle warning",
        MachineEventKind::ReclaimCleared => "warning withdrawn",
        MachineEventKind::Extended => "extended",
        MachineEventKind::Reclaimed => "reclaimed",
        MachineEventKind::Restored => "restored",
        MachineEventKind::Rebalanced => "moved to cooler GPUs",
        MachineEventKind::RebalanceRefused => "not moved",
        MachineEventKind::Snapshot => "snapshot",
        MachineEventKind::DiskWarning => "disk nearly full",
        MachineEventKind::DiskStopped => "stopped: disk limit",
    }
}

fn num<T: std::str::FromStr>(fields: &[(&str, &str)], name: &str, label: &str) -> Result<T, String> {
    let v = fields.iter().find(|(n, _)| *n == name).map(|(_, v)| v.trim()).unwrap_or("");
    v.parse().map_err(|_| format!("{label}: \"{v}\" is not a number"))
}

fn on(fields: &[(&str, &str)], name: &str) -> bool {
    fields.iter().any(|(n, v)| *n == name && matches!(*v, "on" | "true" | "1"))
}

/// The admin's settings form (times in minutes) into the core's settings,
/// checked by the core: a bad value is refused with the field's name.
pub fn parse_settings(f: &[(&str, &str)]) -> Result<(ReclaimSettings, HotSettings), String> {
    let minutes =
        |name: &str, label: &str| -> Result<i64, String> { Ok((num::<f64>(f, name, label)? * 60.0).round() as i64) };
    let reclaim = ReclaimSettings {
        enabled: on(f, "enabled"),
        threshold_pct: num(f, "threshold_pct", "idle threshold")?,
        window_secs: minutes("window_min", "idle window")?,
        grace_secs: minutes("grace_min", "grace period")?,
        extensions_allowed: num(f, "extensions_allowed", "extensions allowed")?,
        extension_secs: minutes("extension_min", "extension")?,
    };
    let hot = HotSettings {
        enabled: on(f, "hot_enabled"),
        util_pct: num(f, "hot_util_pct", "hot utilisation")?,
        mem_pct: num(f, "hot_mem_pct", "hot memory")?,
        temp_c: num(f, "hot_temp_c", "hot temperature")?,
        window_secs: minutes("hot_window_min", "hot window")?,
    };
    reclaim.check()?;
    hot.check()?;
    Ok((reclaim, hot))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(window: &str) -> Vec<(&'static str, &str)> {
        vec![
            ("enabled", "on"),
            ("threshold_pct", "5"),
            ("window_min", window),
            ("grace_min", "30"),
            ("extensions_allowed", "2"),
            ("extension_min", "120"),
            ("hot_util_pct", "90"),
            ("hot_mem_pct", "95"),
            ("hot_temp_c", "85"),
            ("hot_window_min", "10"),
        ]
    }

    #[test]
    fn settings_form_parses_minutes_and_refuses_bad_values() {
        let (r, h) = parse_settings(&form("1")).unwrap();
        assert_eq!((r.window_secs, r.grace_secs, r.extension_secs, r.enabled), (60, 1800, 7200, true));
        assert!(!h.enabled, "an unticked box is off");
        assert!(parse_settings(&form("abc")).unwrap_err().contains("idle window"));
        assert!(parse_settings(&form("0")).unwrap_err().contains("window"));
    }
}
