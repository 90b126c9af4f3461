//! Idle reclaim, rebalancing and machine events as the portal shows them.

use gantry_core::{rebalance::HotSettings, reclaim::ReclaimSettings};
use serde::{Deserialize, Serialize};

/// A machine's reclaim standing: warned (with the time left), reclaimed
/// (restorable), exempt, opted out of rebalancing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReclaimNotice {
    pub machine_id: i64,
    pub machine_name: String,
    pub state: String,
    /// Reclaim deadline (unix s) of the current warning.
    pub deadline: Option<i64>,
    /// Seconds left until the deadline when the server answered.
    pub seconds_left: Option<i64>,
    pub extensions_used: i64,
    pub extensions_allowed: i64,
    pub exempt: bool,
    pub rebalance_opt_out: bool,
    /// The machine is reclaimed and its snapshot is there: restore works.
    pub restorable: bool,
    /// The viewer may extend, restore and opt out (owner or admin).
    pub mine: bool,
}

impl ReclaimNotice {
    pub fn warned(&self) -> bool {
        self.deadline.is_some() && self.state != "reclaimed"
    }

    pub fn can_extend(&self) -> bool {
        self.warned() && self.mine && self.extensions_used < self.extensions_allowed
    }

    /// "reclaimed in 4 min 10 s (at 2026-11-30 10:20 UTC) unless its GPUs are used"
    pub fn warning_text(&self) -> String {
        match (self.deadline, self.seconds_left) {
            (Some(at), Some(left)) => format!(
                "Idle: machine {} will be snapshotted and its GPUs returned in {} (at {} UTC) unless its GPUs are used{}.",
                self.machine_name,
                gantry_core::reclaim::format_left(left),
                gantry_core::time::format_utc(at),
                if self.can_extend() { " or you extend it" } else { "" }
            ),
            _ => String::new(),
        }
    }
}

/// The admin page's data: settings, groups (with exemption) and machines
/// that are exempt, warned, reclaimed or opted out.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReclaimAdminView {
    pub reclaim: gantry_core::reclaim::ReclaimSettings,
    pub hot: gantry_core::rebalance::HotSettings,
    pub groups: Vec<(i64, String, bool)>,
    /// (id, name, owner, state, exempt, opted out of rebalancing, deadline)
    pub machines: Vec<(i64, String, String, String, bool, bool, Option<i64>)>,
    /// Which page of the machines this is.
    pub counts: crate::model::lists::ListCounts,
    /// Why a saved window can never be covered by the raw samples kept
    /// (a restart shortened the retention); empty when all is well.
    pub unwatchable: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineEventRow {
    pub at_ms: i64,
    pub kind: String,
    pub detail: String,
}

impl MachineEventRow {
    pub fn label(&self) -> &'static str {
        match self.kind.as_str() {
            "reclaim_warning" => "idle warning",
            "reclaim_cleared" => "warning withdrawn",
            "extended" => "extended",
            "reclaimed" => "reclaimed",
            "restored" => "restored",
            "rebalanced" => "moved to cooler GPUs",
            "rebalance_refused" => "not moved",
            "snapshot" => "snapshot",
            _ => "event",
        }
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

    #[test]
    fn warning_says_the_time_left_and_whether_it_can_be_extended() {
        let n = ReclaimNotice {
            machine_id: 1,
            machine_name: "box".into(),
            state: "running".into(),
            deadline: Some(1_795_945_380),
            seconds_left: Some(250),
            extensions_used: 0,
            extensions_allowed: 1,
            exempt: false,
            rebalance_opt_out: false,
            restorable: false,
            mine: true,
        };
        assert_eq!(n.warning_text(), "Idle: machine box will be snapshotted and its GPUs returned in 4 min 10 s (at 2026-11-29 09:43 UTC) unless its GPUs are used or you extend it.");
        let used = ReclaimNotice { extensions_used: 1, ..n };
        assert!(!used.can_extend() && !used.warning_text().contains("extend"));
    }
}
