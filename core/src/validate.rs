//! Input rules shared by the server (authoritative) and the browser (early
//! feedback). Every rule returns a message a person can act on.

use thiserror::Error;

/// Bounds on user-supplied text; generous for people, tight for abuse.
pub struct Limits;

impl Limits {
    pub const NAME_MIN: usize = 2;
    pub const NAME_MAX: usize = 32;
    pub const PASSWORD_MIN: usize = 8;
    /// argon2 accepts far more, but hashing megabytes per login is a cheap DoS.
    pub const PASSWORD_MAX: usize = 128;
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ValidationError {
    #[error("{field} is required")]
    Required { field: &'static str },
    #[error("{field} must be at least {min} characters")]
    TooShort { field: &'static str, min: usize },
    #[error("{field} must be at most {max} characters")]
    TooLong { field: &'static str, max: usize },
    #[error("{field} may contain only lowercase letters, digits, '-', '_' and '.', and must start with a letter")]
    BadName { field: &'static str },
    #[error("unknown role \"{0}\" (expected user or admin)")]
    UnknownRole(String),
    #[error("{field} must be a whole number between {min} and {max}")]
    OutOfRange { field: &'static str, min: i64, max: i64 },
    #[error("the username \"{0}\" is reserved: the audit log shows changes nobody made by hand as {0}")]
    ReservedUsername(&'static str),
}

/// What the audit log calls the actor of changes nobody made by hand.
pub const SYSTEM_ACTOR: &str = "system";

/// A new account's name: a [`name`], and not the audit log's word for the
/// system (an account called that would pass for automated changes).
pub fn username(value: &str) -> Result<(), ValidationError> {
    name("username", value)?;
    if value == SYSTEM_ACTOR {
        return Err(ValidationError::ReservedUsername(SYSTEM_ACTOR));
    }
    Ok(())
}

/// Names of users, groups, machines: they appear in container hostnames and
/// labels, so keep them to a DNS-label-like alphabet.
pub fn name(field: &'static str, value: &str) -> Result<(), ValidationError> {
    if value.is_empty() {
        return Err(ValidationError::Required { field });
    }
    let len = value.chars().count();
    if len > Limits::NAME_MAX {
        return Err(ValidationError::TooLong { field, max: Limits::NAME_MAX });
    }
    if len < Limits::NAME_MIN {
        return Err(ValidationError::TooShort { field, min: Limits::NAME_MIN });
    }
    let mut chars = value.chars();
    let starts_with_letter = chars.next().is_some_and(|c| c.is_ascii_lowercase());
    let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'));
    if !(starts_with_letter && rest_ok) {
        return Err(ValidationError::BadName { field });
    }
    Ok(())
}

/// The name of compute task `task_id`'s machine: the task's number, `-job-`
/// and as much of the task's name as fits. It starts with a digit, which no
/// [`name`] a person chooses can, so no machine its requester already has
/// can take it (a machine's name is unique per owner): taken, the job
/// could never be admitted, and its group's queue would wait behind it for
/// ever. A leading digit is still a valid hostname (RFC 1123).
pub fn job_machine_name(task_id: i64, task_name: &str) -> String {
    format!("{task_id}-job-{task_name}").chars().take(Limits::NAME_MAX).collect()
}

/// A new password. Login checks only `present` and the upper bound, so that
/// a rule change never locks out existing accounts.
pub fn new_password(value: &str) -> Result<(), ValidationError> {
    present_password(value)?;
    if value.chars().count() < Limits::PASSWORD_MIN {
        return Err(ValidationError::TooShort { field: "password", min: Limits::PASSWORD_MIN });
    }
    Ok(())
}

pub fn present_password(value: &str) -> Result<(), ValidationError> {
    if value.is_empty() {
        return Err(ValidationError::Required { field: "password" });
    }
    if value.chars().count() > Limits::PASSWORD_MAX {
        return Err(ValidationError::TooLong { field: "password", max: Limits::PASSWORD_MAX });
    }
    Ok(())
}

/// Login accepts whatever a name might be, bounded, so "unknown user" and
/// "wrong password" stay indistinguishable for well-formed input.
pub fn login_name(value: &str) -> Result<(), ValidationError> {
    let value = value.trim();
    if value.is_empty() {
        return Err(ValidationError::Required { field: "username" });
    }
    if value.chars().count() > Limits::NAME_MAX {
        return Err(ValidationError::TooLong { field: "username", max: Limits::NAME_MAX });
    }
    Ok(())
}

pub fn in_range(field: &'static str, value: i64, min: i64, max: i64) -> Result<(), ValidationError> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(ValidationError::OutOfRange { field, min, max })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn accepts_typical_names() {
        for ok in ["ab", "alice", "ml-team", "bob.smith_2", "a234567890123456789012345678901b"] {
            assert_eq!(name("username", ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn the_audit_logs_word_for_the_system_is_no_username() {
        assert_eq!(username("system"), Err(ValidationError::ReservedUsername("system")));
        assert_eq!(username("systems"), Ok(()));
        assert_eq!(username("Sys"), Err(ValidationError::BadName { field: "username" }));
        assert!(name("machine name", "system").is_ok(), "only accounts are refused it");
    }

    #[test]
    fn no_name_a_person_chooses_is_a_job_machines() {
        assert_eq!(job_machine_name(1, "fits"), "1-job-fits");
        for (id, task) in [(1, "fits"), (42, "a234567890123456789012345678901b"), (i64::MAX, "train")] {
            let job = job_machine_name(id, task);
            assert!(job.chars().count() <= Limits::NAME_MAX, "{job}");
            assert_eq!(name("machine name", &job), Err(ValidationError::BadName { field: "machine name" }), "{job}");
        }
        // Cut to length, the task's number still tells two jobs apart.
        assert_ne!(job_machine_name(1, &"x".repeat(32)), job_machine_name(12, &"x".repeat(32)));
    }

    #[test]
    fn refuses_bad_names_with_the_rule() {
        assert_eq!(name("username", ""), Err(ValidationError::Required { field: "username" }));
        assert_eq!(name("username", "a"), Err(ValidationError::TooShort { field: "username", min: 2 }));
        assert_eq!(name("username", &"a".repeat(33)), Err(ValidationError::TooLong { field: "username", max: 32 }));
        for bad in ["Alice", "1abc", "-x", "a b", "ünï", "a/b", "a;drop"] {
            assert_eq!(name("username", bad), Err(ValidationError::BadName { field: "username" }), "{bad}");
        }
    }

    #[test]
    fn password_rules() {
        assert_eq!(new_password(""), Err(ValidationError::Required { field: "password" }));
        assert_eq!(new_password("short"), Err(ValidationError::TooShort { field: "password", min: 8 }));
        assert_eq!(new_password(&"x".repeat(129)), Err(ValidationError::TooLong { field: "password", max: 128 }));
        assert_eq!(new_password("correct horse"), Ok(()));
        // Login must not apply the minimum length.
        assert_eq!(present_password("short"), Ok(()));
    }

    #[test]
    fn login_name_is_bounded_and_required() {
        assert_eq!(login_name("   "), Err(ValidationError::Required { field: "username" }));
        assert!(login_name(&"x".repeat(500)).is_err());
        assert_eq!(login_name("Whoever"), Ok(()));
    }

    #[test]
    fn messages_are_readable() {
        assert_eq!(
            ValidationError::TooShort { field: "password", min: 8 }.to_string(),
            "password must be at least 8 characters"
        );
        assert_eq!(in_range("quota", 9, 0, 8).unwrap_err().to_string(), "quota must be a whole number between 0 and 8");
    }

    proptest! {
        #[test]
        fn valid_names_are_exactly_the_safe_alphabet(s in "\\PC{0,40}") {
            let ok = name("n", &s).is_ok();
            let expected = (2..=32).contains(&s.chars().count())
                && s.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(c));
            prop_assert_eq!(ok, expected);
        }
    }
}
