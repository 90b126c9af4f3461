//! The image choice of the create form (the rest of a machine's data is the
//! platform's `MachineView`, rendered directly).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageRow {
    pub id: i64,
    pub name: String,
    pub reference: String,
    pub description: String,
    pub is_default: bool,
}
