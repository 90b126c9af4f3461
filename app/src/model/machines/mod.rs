//! The small pure helpers the machine pages use to parse their forms and
//! render the platform's machine and task views.

use gantry_core::task::{MachineState, TaskKind, TaskState};

/// A create request as parsed from the form, before the platform's checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateInput {
    pub name: String,
    pub image_id: Option<i64>,
    pub gpu_count: u32,
    pub gpu_model: Option<String>,
    pub volume_size_gb: i64,
}

/// The volume size the form suggests (and an empty field means).
pub const DEFAULT_VOLUME_GB: i64 = 10;
/// Upper bound on GPUs per machine anywhere (a group's limit is lower).
pub const GPU_COUNT_MAX: i64 = 64;

/// A whole number from a form field, or "`label` must be a whole number".
pub fn parse_whole(label: &str, value: &str) -> Result<i64, String> {
    value.trim().parse::<i64>().map_err(|_| format!("{label} must be a whole number"))
}

/// Parses the create form's text fields. Empty image and model mean the
/// default image and any allowed model; an empty volume size means the default.
pub fn parse_create(
    name: &str,
    image_id: &str,
    gpu_count: &str,
    gpu_model: &str,
    volume_size_gb: &str,
) -> Result<CreateInput, String> {
    let name = name.trim().to_string();
    gantry_core::validate::name("machine name", &name).map_err(|e| e.to_string())?;
    let image_id = match image_id.trim() {
        "" => None,
        s => Some(s.parse::<i64>().map_err(|_| "choose an image from the list".to_string())?),
    };
    let count = parse_whole("GPU count", gpu_count)?;
    gantry_core::validate::in_range("GPU count", count, 1, GPU_COUNT_MAX).map_err(|e| e.to_string())?;
    let gpu_model = match gpu_model.trim() {
        "" => None,
        m => Some(m.to_string()),
    };
    let volume_size_gb = match volume_size_gb.trim() {
        "" => DEFAULT_VOLUME_GB,
        v => parse_whole("volume size (GB)", v)?,
    };
    Ok(CreateInput { name, image_id, gpu_count: count as u32, gpu_model, volume_size_gb })
}

/// CPUs a new machine gets when the form leaves the field empty, and the
/// bounds the form accepts (the group's own limit is checked on admission).
pub const DEFAULT_CPUS: &str = "2";
pub const DEFAULT_MEMORY_MB: i64 = 4096;
const CPU_MILLIS_MIN: i64 = 100;
const CPU_MILLIS_MAX: i64 = 256_000;
const MEMORY_MB_MIN: i64 = 64;
const MEMORY_MB_MAX: i64 = 4 * 1024 * 1024;

/// "2" or "0.5" CPUs to thousandths of a CPU (what Docker limits by);
/// empty means the default. At most three decimals, so nothing is rounded.
pub fn parse_cpus(value: &str) -> Result<Option<i64>, String> {
    let v = value.trim();
    if v.is_empty() {
        return Ok(None);
    }
    let bad = || "CPUs must be a number such as 2 or 0.5 (at most three decimals)".to_string();
    let (whole, frac) = v.split_once('.').unwrap_or((v, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && frac.is_empty()) || !digits(whole) || !digits(frac) || frac.len() > 3 || whole.len() > 6 {
        return Err(bad());
    }
    let whole: i64 = if whole.is_empty() { 0 } else { whole.parse().map_err(|_| bad())? };
    let frac: i64 = format!("{frac:0<3}").parse().map_err(|_| bad())?;
    let millis = whole * 1000 + frac;
    if !(CPU_MILLIS_MIN..=CPU_MILLIS_MAX).contains(&millis) {
        return Err(format!("CPUs must be between {} and {}", CPU_MILLIS_MIN as f64 / 1000.0, CPU_MILLIS_MAX / 1000));
    }
    Ok(Some(millis))
}

/// Memory in MB; empty means the default.
pub fn parse_memory_mb(value: &str) -> Result<Option<i64>, String> {
    match value.trim() {
        "" => Ok(None),
        v => {
            let mb = parse_whole("memory (MB)", v)?;
            gantry_core::validate::in_range("memory (MB)", mb, MEMORY_MB_MIN, MEMORY_MB_MAX)
                .map_err(|e| e.to_string())?;
            Ok(Some(mb))
        }
    }
}

/// The data-volume select: empty means a new volume, else a kept volume's id.
pub fn parse_kept_volume(value: &str) -> Result<Option<i64>, String> {
    match value.trim() {
        "" => Ok(None),
        v => v.parse::<i64>().map(Some).map_err(|_| "choose a data volume from the list".to_string()),
    }
}

/// The operations a person may ask for on an existing machine.
pub fn parse_operation(operation: &str) -> Result<TaskKind, String> {
    match operation.trim().parse::<TaskKind>() {
        Ok(k @ (TaskKind::Restart | TaskKind::Reinstall | TaskKind::Delete)) => Ok(k),
        _ => Err(format!(
            "unknown operation \"{}\" (expected restart, reinstall or delete)",
            operation.chars().take(32).collect::<String>()
        )),
    }
}

/// An HTML checkbox: present (usually "on") means checked.
pub fn checkbox(value: Option<&str>) -> bool {
    value.is_some_and(|v| !matches!(v.trim(), "" | "off" | "false" | "0"))
}

/// "2 × A100 (GPU 0,1)"; without indexes (released) just "2 × A100".
pub fn gpu_summary(count: i64, model: &str, indexes: &[u32]) -> String {
    if indexes.is_empty() {
        format!("{count} × {model}")
    } else {
        let list = indexes.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        format!("{count} × {model} (GPU {list})")
    }
}

/// "gantry-m4-data · 10 GB".
pub fn volume_summary(name: &str, size_gb: i64) -> String {
    if name.is_empty() {
        format!("{size_gb} GB")
    } else {
        format!("{name} · {size_gb} GB")
    }
}

/// A container id as `docker ps` shows it: the first 12 characters.
pub fn short_id(id: &str) -> String {
    id.chars().take(12).collect()
}

/// True while the task may still change.
pub fn task_busy(state: TaskState) -> bool {
    !state.is_terminal()
}

/// Whether a task may still be cancelled (it has not started).
pub fn task_cancellable(state: TaskState) -> bool {
    state.cancellable().is_ok()
}

/// Whether the machine accepts `kind` now (the server decides; the page
/// uses this only to disable buttons that would be refused).
pub fn accepts(state: MachineState, kind: TaskKind) -> bool {
    gantry_core::task::accepts("", state, kind).is_ok()
}

/// "A100, H100" to `["A100", "H100"]`: trimmed, empty entries dropped.
pub fn split_models(list: &str) -> Vec<String> {
    list.split(',').map(str::trim).filter(|m| !m.is_empty()).map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpus_render_with_indexes() {
        assert_eq!(gpu_summary(2, "A100", &[0, 1]), "2 × A100 (GPU 0,1)");
        assert_eq!(gpu_summary(1, "SIM-A100", &[3]), "1 × SIM-A100 (GPU 3)");
        assert_eq!(gpu_summary(2, "A100", &[]), "2 × A100");
    }

    #[test]
    fn volumes_and_ids_render() {
        assert_eq!(volume_summary("gantry-m4-data", 10), "gantry-m4-data · 10 GB");
        assert_eq!(volume_summary("", 10), "10 GB");
        assert_eq!(short_id("0123456789abcdef0123"), "0123456789ab");
        assert_eq!(short_id("abc"), "abc");
    }

    #[test]
    fn create_form_parses_with_clear_messages() {
        let ok = parse_create(" box-1 ", "", "2", "", "").unwrap();
        assert_eq!(
            ok,
            CreateInput { name: "box-1".into(), image_id: None, gpu_count: 2, gpu_model: None, volume_size_gb: 10 }
        );
        let ok = parse_create("box", "7", "1", " A100 ", "20").unwrap();
        assert_eq!((ok.image_id, ok.gpu_model.as_deref(), ok.volume_size_gb), (Some(7), Some("A100"), 20));

        assert_eq!(parse_create("box", "", "abc", "", "10").unwrap_err(), "GPU count must be a whole number");
        assert_eq!(parse_create("box", "", "1.5", "", "10").unwrap_err(), "GPU count must be a whole number");
        assert_eq!(
            parse_create("box", "", "0", "", "10").unwrap_err(),
            "GPU count must be a whole number between 1 and 64"
        );
        assert_eq!(
            parse_create("box", "", "-3", "", "10").unwrap_err(),
            "GPU count must be a whole number between 1 and 64"
        );
        assert_eq!(parse_create("box", "", "1", "", "ten").unwrap_err(), "volume size (GB) must be a whole number");
        assert_eq!(parse_create("box", "x", "1", "", "10").unwrap_err(), "choose an image from the list");
        assert_eq!(parse_create("", "", "1", "", "10").unwrap_err(), "machine name is required");
        assert!(parse_create("Bad Name", "", "1", "", "10").is_err());
    }

    #[test]
    fn cpus_memory_and_volume_choice_parse_with_clear_messages() {
        assert_eq!(parse_cpus(""), Ok(None));
        assert_eq!(parse_cpus(" 2 "), Ok(Some(2000)));
        assert_eq!(parse_cpus("0.5"), Ok(Some(500)));
        assert_eq!(parse_cpus(".25"), Ok(Some(250)));
        assert_eq!(parse_cpus("1.125"), Ok(Some(1125)));
        assert_eq!(parse_cpus("3."), Ok(Some(3000)));
        for bad in ["abc", "1,5", "-1", "1.2345", ".", "1e3", "1.2.3", "+2"] {
            assert_eq!(
                parse_cpus(bad).unwrap_err(),
                "CPUs must be a number such as 2 or 0.5 (at most three decimals)",
                "{bad}"
            );
        }
        assert_eq!(parse_cpus("0").unwrap_err(), "CPUs must be between 0.1 and 256");
        assert_eq!(parse_cpus("0.05").unwrap_err(), "CPUs must be between 0.1 and 256");
        assert_eq!(parse_cpus("300").unwrap_err(), "CPUs must be between 0.1 and 256");
        assert_eq!(
            parse_cpus("99999999").unwrap_err(),
            "CPUs must be a number such as 2 or 0.5 (at most three decimals)"
        );

        assert_eq!(parse_memory_mb(" "), Ok(None));
        assert_eq!(parse_memory_mb("8192"), Ok(Some(8192)));
        assert_eq!(parse_memory_mb("1.5").unwrap_err(), "memory (MB) must be a whole number");
        assert_eq!(parse_memory_mb("10").unwrap_err(), "memory (MB) must be a whole number between 64 and 4194304");

        assert_eq!(parse_kept_volume(""), Ok(None));
        assert_eq!(parse_kept_volume("7"), Ok(Some(7)));
        assert_eq!(parse_kept_volume("new").unwrap_err(), "choose a data volume from the list");
    }

    #[test]
    fn operations_are_the_three_on_existing_machines() {
        assert_eq!(parse_operation("restart"), Ok(TaskKind::Restart));
        assert_eq!(parse_operation("reinstall"), Ok(TaskKind::Reinstall));
        assert_eq!(parse_operation("delete"), Ok(TaskKind::Delete));
        for bad in ["create", "snapshot", "", "DELETE", "rm -rf"] {
            assert!(parse_operation(bad).unwrap_err().contains("expected restart, reinstall or delete"), "{bad}");
        }
    }

    #[test]
    fn checkboxes_and_model_lists() {
        assert!(checkbox(Some("on")));
        assert!(!checkbox(None));
        assert!(!checkbox(Some("")));
        assert_eq!(split_models(" A100, ,H100 ,"), vec!["A100".to_string(), "H100".to_string()]);
        assert!(split_models("  ").is_empty());
    }

    #[test]
    fn states_decide_polling_and_buttons() {
        use MachineState as M;
        use TaskState as T;
        assert!(M::Creating.is_busy() && M::Deleting.is_busy());
        assert!(!M::Running.is_busy() && !M::Failed.is_busy());
        assert!(task_busy(T::Pending) && task_busy(T::Running));
        assert!(!task_busy(T::Succeeded) && !task_busy(T::Cancelled));
        assert!(accepts(M::Running, TaskKind::Restart));
        // A delete is offered while a machine is being created (queued behind it), a restart is not.
        assert!(accepts(M::Creating, TaskKind::Delete) && !accepts(M::Creating, TaskKind::Restart));
        assert!(!accepts(M::Deleted, TaskKind::Delete));
        // A lost machine is settled (no polling) and can only be deleted.
        assert!(!M::Lost.is_busy());
        assert!(accepts(M::Lost, TaskKind::Delete) && !accepts(M::Lost, TaskKind::Restart));
        assert!(task_cancellable(T::Pending) && task_cancellable(T::Scheduled));
        assert!(!task_cancellable(T::Running) && !task_cancellable(T::Failed));
    }
}
