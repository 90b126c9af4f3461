//! The add-node form's parsing (the platform checks the rest and tests the
//! connection) and the small pure helpers the Nodes page renders with (it
//! renders the platform's `NodeSummary` directly).

use gantry_core::alloc::NodeState;

/// The add-node form as parsed, before the platform's checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddNodeInput {
    pub name: String,
    pub region_code: String,
    pub endpoint: String,
    pub gpu_count: u32,
    pub gpu_model: String,
}

/// The region a new node goes to when the form leaves it empty.
pub const DEFAULT_REGION: &str = "local";

/// The states the per-node select offers. "lost" is not among them: it
/// releases every machine on the node, so it has its own confirmed form.
pub const SETTABLE_STATES: [NodeState; 3] = [NodeState::Ready, NodeState::Draining, NodeState::Down];

/// Simulated GPUs on a simulated node (`simulated://NAME`) whose form
/// leaves the count empty: the local node's `--sim-gpus` default.
pub const DEFAULT_SIM_GPUS: i64 = 4;

/// Parses the add-node form's text fields: names trimmed, an empty region
/// means [`DEFAULT_REGION`], an empty GPU count means none (on a simulated
/// node, [`DEFAULT_SIM_GPUS`]).
pub fn parse_add_node(
    name: &str,
    region_code: &str,
    endpoint: &str,
    gpu_count: &str,
    gpu_model: &str,
) -> Result<AddNodeInput, String> {
    let count = match gpu_count.trim() {
        "" if gantry_core::endpoint::simulated_name(endpoint).is_some() => DEFAULT_SIM_GPUS,
        "" => 0,
        c => super::machines::parse_whole("GPU count", c)?,
    };
    gantry_core::validate::in_range("GPU count", count, 0, 64).map_err(|e| e.to_string())?;
    let region = region_code.trim();
    Ok(AddNodeInput {
        name: name.trim().to_string(),
        region_code: if region.is_empty() { DEFAULT_REGION.to_string() } else { region.to_string() },
        endpoint: endpoint.trim().to_string(),
        gpu_count: count as u32,
        gpu_model: gpu_model.trim().to_string(),
    })
}

/// Where a node's Docker Engine is, in words ("" is the local socket).
pub fn endpoint_label(endpoint: &str) -> String {
    if endpoint.is_empty() {
        "local socket".to_string()
    } else {
        endpoint.to_string()
    }
}

/// "4 · 15.6 GiB"; "—" for a node that did not report them (an added
/// node's host is reached only through its engine).
pub fn capacity_label(cpu_count: i64, memory_mb: i64) -> String {
    if cpu_count <= 0 && memory_mb <= 0 {
        "—".to_string()
    } else {
        format!("{} · {:.1} GiB", cpu_count, memory_mb as f64 / 1024.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_endpoint_is_the_local_socket() {
        assert_eq!(endpoint_label(""), "local socket");
        assert_eq!(endpoint_label("tcp://10.0.0.2:2375"), "tcp://10.0.0.2:2375");
        assert_eq!(capacity_label(0, 0), "—");
        assert_eq!(capacity_label(4, 2048), "4 · 2.0 GiB");
    }

    #[test]
    fn add_node_form_parses_with_defaults_and_clear_messages() {
        let ok = parse_add_node(" gpu-2 ", "", " unix:///tmp/d.sock ", "2", " A100 ").unwrap();
        assert_eq!(
            ok,
            AddNodeInput {
                name: "gpu-2".into(),
                region_code: "local".into(),
                endpoint: "unix:///tmp/d.sock".into(),
                gpu_count: 2,
                gpu_model: "A100".into()
            }
        );
        assert_eq!(parse_add_node("n", "eu", "tcp://h:1", "", "").unwrap().gpu_count, 0);
        assert_eq!(parse_add_node("n", "eu", "simulated://n", "", "").unwrap().gpu_count, 4);
        assert_eq!(parse_add_node("n", "eu", "simulated://n", "2", "").unwrap().gpu_count, 2);
        assert_eq!(parse_add_node("n", "eu", "tcp://h:1", "", "").unwrap().region_code, "eu");
        assert_eq!(parse_add_node("n", "", "x", "two", "").unwrap_err(), "GPU count must be a whole number");
        assert_eq!(
            parse_add_node("n", "", "x", "65", "").unwrap_err(),
            "GPU count must be a whole number between 0 and 64"
        );
        assert_eq!(
            parse_add_node("n", "", "x", "-1", "").unwrap_err(),
            "GPU count must be a whole number between 0 and 64"
        );
    }

    #[test]
    fn lost_is_never_offered_in_the_state_select() {
        assert!(!SETTABLE_STATES.contains(&NodeState::Lost));
    }
}
