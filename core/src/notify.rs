//! Notifications' rules: the kinds of event a user is told about, which
//! addresses and webhook URLs are accepted, and when a failed delivery is
//! tried again. Pure, so the portal's forms and the server agree.

use serde::{Deserialize, Serialize};
use std::{fmt, str::FromStr};

/// What a notification reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// An idle machine will be reclaimed unless it is used or extended.
    ReclaimWarning,
    /// A machine was reclaimed (snapshotted, GPUs returned).
    Reclaim,
    /// A machine's schedule stopped it.
    ScheduleStop,
    /// A machine is near its group's longest run and will be stopped.
    MaxRunWarning,
    /// A start that waited in the queue for GPUs began.
    QueuedStartBegan,
    /// A compute task ended: succeeded, failed, cancelled or timed out.
    ComputeFinished,
    /// An admin changed the quota or limits of the user's group.
    QuotaChanged,
}

impl Kind {
    pub const ALL: [Kind; 7] = [
        Kind::ReclaimWarning,
        Kind::Reclaim,
        Kind::ScheduleStop,
        Kind::MaxRunWarning,
        Kind::QueuedStartBegan,
        Kind::ComputeFinished,
        Kind::QuotaChanged,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::ReclaimWarning => "reclaim_warning",
            Kind::Reclaim => "reclaim",
            Kind::ScheduleStop => "schedule_stop",
            Kind::MaxRunWarning => "max_run_warning",
            Kind::QueuedStartBegan => "queued_start_began",
            Kind::ComputeFinished => "compute_finished",
            Kind::QuotaChanged => "quota_changed",
        }
    }

    /// How the portal names it.
    pub fn label(self) -> &'static str {
        match self {
            Kind::ReclaimWarning => "Reclaim warning",
            Kind::Reclaim => "Machine reclaimed",
            Kind::ScheduleStop => "Scheduled stop",
            Kind::MaxRunWarning => "Longest-run warning",
            Kind::QueuedStartBegan => "Queued start began",
            Kind::ComputeFinished => "Compute task ended",
            Kind::QuotaChanged => "Group quota changed",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Kind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s).ok_or_else(|| format!("unknown notification kind \"{s}\""))
    }
}

/// A stored list of kinds (`a,b`); unknown words are dropped.
pub fn parse_kinds(s: &str) -> Vec<Kind> {
    Kind::ALL.into_iter().filter(|k| s.split(',').any(|w| w.trim() == k.as_str())).collect()
}

/// The stored form of a list of kinds, in [`Kind::ALL`]'s order.
pub fn join_kinds(kinds: &[Kind]) -> String {
    Kind::ALL.into_iter().filter(|k| kinds.contains(k)).map(Kind::as_str).collect::<Vec<_>>().join(",")
}

pub const EMAIL_MAX: usize = 254;
pub const WEBHOOK_URL_MAX: usize = 2000;

/// An email address, checked only for its form (RFC 5321's lengths, one
/// `@`, a dotted domain, no spaces or control characters): whether it
/// reaches anyone is the user's business.
pub fn check_email(value: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("\"{value}\" is not an email address: {why}"));
    if value.is_empty() {
        return Err("an email address is required to send email".into());
    }
    if value.len() > EMAIL_MAX {
        return Err(format!("an email address is at most {EMAIL_MAX} characters"));
    }
    if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return bad("it contains spaces or control characters");
    }
    let Some((local, domain)) = value.split_once('@') else { return bad("it has no @") };
    if local.is_empty() || local.len() > 64 || domain.contains('@') {
        return bad("it needs one @ with 1 to 64 characters before it");
    }
    let labels_ok = domain.split('.').all(|l| {
        !l.is_empty() && !l.starts_with('-') && !l.ends_with('-') && l.chars().all(|c| c.is_alphanumeric() || c == '-')
    });
    if !domain.contains('.') || !labels_ok {
        return bad("its domain must be a name such as example.org");
    }
    if local.starts_with('.')
        || local.ends_with('.')
        || local.contains("..")
        || local.contains(['<', '>', '(', ')', ',', ';', ':', '"', '[', ']', '\\'])
    {
        return bad("the part before the @ has characters an address cannot have there");
    }
    Ok(())
}

/// A webhook URL's text, before it is parsed: not too long, no spaces or
/// control characters, `http://` or `https://`. The host is checked once
/// parsed (the platform refuses link-local and unspecified addresses).
pub fn check_webhook_text(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err("a webhook URL is required to send webhooks".into());
    }
    if value.len() > WEBHOOK_URL_MAX {
        return Err(format!("a webhook URL is at most {WEBHOOK_URL_MAX} characters (this one has {})", value.len()));
    }
    if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("a webhook URL cannot contain spaces or control characters".into());
    }
    let lower = value.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err(format!(
            "a webhook URL must start with http:// or https:// (got \"{}\")",
            value.chars().take(40).collect::<String>()
        ));
    }
    Ok(())
}

/// How many times a delivery is tried before it is given up as failed.
pub const MAX_ATTEMPTS: i64 = 6;

/// Seconds to wait after failed attempt number `attempt` (1-based) before
/// the next: 30 s doubling, at most an hour; `None` once the attempts are
/// spent. Six attempts span about half an hour: a receiver down for a
/// restart still gets it, one gone for good is given up and listed.
pub fn retry_after(attempt: i64) -> Option<i64> {
    if attempt >= MAX_ATTEMPTS {
        return None;
    }
    let n = attempt.clamp(1, 20) - 1;
    Some((30i64 << n).min(3600))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_and_lists_keep_order() {
        for k in Kind::ALL {
            assert_eq!(k.as_str().parse::<Kind>(), Ok(k));
        }
        assert!("nope".parse::<Kind>().is_err());
        assert_eq!(join_kinds(&[Kind::QuotaChanged, Kind::ReclaimWarning]), "reclaim_warning,quota_changed");
        assert_eq!(parse_kinds("quota_changed, x,reclaim_warning"), vec![Kind::ReclaimWarning, Kind::QuotaChanged]);
        assert!(parse_kinds("").is_empty());
    }

    #[test]
    fn email_form() {
        assert!(check_email("ana@example.org").is_ok());
        assert!(check_email("a.b+tag@mail.example.co").is_ok());
        for bad in [
            "",
            "ana",
            "ana@",
            "@example.org",
            "ana@localhost",
            "a na@example.org",
            "ana@ex ample.org",
            "a@b@c.org",
            "ana@-x.org",
            "ana@x..org",
            ".ana@x.org",
            "a<b@x.org",
        ] {
            assert!(check_email(bad).is_err(), "{bad}");
        }
        assert!(check_email(&format!("{}@example.org", "a".repeat(250))).unwrap_err().contains("at most"));
    }

    #[test]
    fn webhook_text() {
        assert!(check_webhook_text("https://hooks.example.org/x?y=1").is_ok());
        assert!(check_webhook_text("HTTP://127.0.0.1:8080/").is_ok());
        assert!(check_webhook_text("ftp://example.org/").unwrap_err().contains("http://"));
        assert!(check_webhook_text("javascript:alert(1)").is_err());
        assert!(check_webhook_text("file:///etc/passwd").is_err());
        assert!(check_webhook_text("https://example.org/a b").unwrap_err().contains("spaces"));
        assert!(check_webhook_text(&format!("https://example.org/{}", "a".repeat(2000)))
            .unwrap_err()
            .contains("at most"));
    }

    #[test]
    fn backoff_doubles_then_gives_up() {
        let waits: Vec<_> = (1..=MAX_ATTEMPTS).map(retry_after).collect();
        assert_eq!(waits, vec![Some(30), Some(60), Some(120), Some(240), Some(480), None]);
        assert_eq!(retry_after(0), Some(30));
    }
}
