//! What the admin console shows about worker nodes.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRow {
    pub id: i64,
    pub name: String,
    pub region: String,
    pub executor: String,
    pub docker_endpoint: String,
    pub state: String,
    /// Unix seconds; 0 = never.
    pub last_heartbeat: i64,
    /// Whether the last heartbeat is recent enough to take new machines.
    pub heartbeat_fresh: bool,
    pub cpu_count: i64,
    pub memory_mb: i64,
    pub gpu_total: i64,
    pub gpu_free: i64,
    pub gpu_models: Vec<String>,
    pub simulated: bool,
}

/// Where a node's Docker Engine is, in words ("" is the local socket).
pub fn endpoint_label(endpoint: &str) -> String {
    if endpoint.is_empty() {
        "local socket".to_string()
    } else {
        endpoint.to_string()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn empty_endpoint_is_the_local_socket() {
        assert_eq!(super::endpoint_label(""), "local socket");
        assert_eq!(super::endpoint_label("tcp://10.0.0.2:2375"), "tcp://10.0.0.2:2375");
    }
}
