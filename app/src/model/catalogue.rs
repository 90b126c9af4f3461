//! Regions, region images and the master image catalogue as the admin
//! console shows them, and the small pure helpers both sides render with.

use serde::{Deserialize, Serialize};

/// Image types an admin may choose. The platform checks the same list
/// (`gantry_platform::catalogue::IMAGE_KINDS`, which never reaches the
/// browser; a test keeps the two equal).
pub const IMAGE_KINDS: [&str; 4] = ["training", "inference", "notebook", "other"];

/// Architectures a region image or a node may have; the first is the default.
pub const ARCHES: [&str; 2] = ["amd64", "arm64"];

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuCount {
    pub model: String,
    pub total: i64,
    pub free: i64,
}

/// A region with the resources of its nodes (lost nodes left out).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionRow {
    pub code: String,
    pub name: String,
    pub description: String,
    pub nodes: i64,
    pub ready_nodes: i64,
    pub gpus: Vec<GpuCount>,
    pub cpus: i64,
    pub memory_mb: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionImageRow {
    pub id: i64,
    pub region: String,
    pub reference: String,
    pub arch: String,
    pub kind: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MasterImageRow {
    pub id: i64,
    pub name: String,
    pub interpreter: String,
    pub interpreter_version: String,
    pub framework: String,
    pub framework_version: String,
    /// Ids of the linked region images, ascending.
    pub links: Vec<i64>,
}

/// The catalogue page's data: master images and the region images they
/// can be linked to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Catalogue {
    pub masters: Vec<MasterImageRow>,
    pub region_images: Vec<RegionImageRow>,
}

/// "PyTorch 2.4 · Python 3.11": how a person names a master image's combination.
pub fn combo_label(m: &MasterImageRow) -> String {
    format!("{} {} · {} {}", m.framework, m.framework_version, m.interpreter, m.interpreter_version)
}

/// "local · gantry/devbox:latest (amd64, training)".
pub fn region_image_label(i: &RegionImageRow) -> String {
    format!("{} · {} ({}, {})", i.region, i.reference, i.arch, i.kind)
}

/// "3,1" (the database's GROUP_CONCAT) to `[1, 3]`; junk entries dropped.
pub fn parse_ids(list: &str) -> Vec<i64> {
    let mut ids: Vec<i64> = list.split(',').filter_map(|s| s.trim().parse().ok()).collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// A select's value that must be an id from its list.
pub fn parse_choice(what: &str, value: &str) -> Result<i64, String> {
    value.trim().parse::<i64>().map_err(|_| format!("choose {what} from the list"))
}

/// "8 × SIM-A100-80GB (6 free)" per model, or "no GPUs".
pub fn gpus_label(gpus: &[GpuCount]) -> String {
    if gpus.is_empty() {
        return "no GPUs".to_string();
    }
    gpus.iter().map(|g| format!("{} × {} ({} free)", g.total, g.model, g.free)).collect::<Vec<_>>().join(", ")
}

/// "2 of 3 ready".
pub fn nodes_label(nodes: i64, ready: i64) -> String {
    match nodes {
        0 => "no nodes".to_string(),
        n => format!("{ready} of {n} ready"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn master(links: Vec<i64>) -> MasterImageRow {
        MasterImageRow {
            id: 1,
            name: "torch".into(),
            interpreter: "Python".into(),
            interpreter_version: "3.11".into(),
            framework: "PyTorch".into(),
            framework_version: "2.4".into(),
            links,
        }
    }

    #[test]
    fn labels_read_as_people_say_them() {
        assert_eq!(combo_label(&master(vec![])), "PyTorch 2.4 · Python 3.11");
        let i = RegionImageRow {
            id: 3,
            region: "local".into(),
            reference: "gantry/devbox:latest".into(),
            arch: "amd64".into(),
            kind: "training".into(),
        };
        assert_eq!(region_image_label(&i), "local · gantry/devbox:latest (amd64, training)");
        assert_eq!(gpus_label(&[]), "no GPUs");
        let g = [
            GpuCount { model: "A100".into(), total: 8, free: 6 },
            GpuCount { model: "H100".into(), total: 2, free: 0 },
        ];
        assert_eq!(gpus_label(&g), "8 × A100 (6 free), 2 × H100 (0 free)");
        assert_eq!(nodes_label(0, 0), "no nodes");
        assert_eq!(nodes_label(3, 2), "2 of 3 ready");
    }

    #[test]
    fn ids_and_choices_parse() {
        assert_eq!(parse_ids("3,1,3"), vec![1, 3]);
        assert_eq!(parse_ids(""), Vec::<i64>::new());
        assert_eq!(parse_ids("2, x,5"), vec![2, 5]);
        assert_eq!(parse_choice("a region image", " 7 "), Ok(7));
        assert_eq!(parse_choice("a region image", "").unwrap_err(), "choose a region image from the list");
        assert_eq!(parse_choice("a region image", "seven").unwrap_err(), "choose a region image from the list");
    }

    #[test]
    fn choices_match_the_rules_the_server_applies() {
        for a in ARCHES {
            assert!(a.parse::<gantry_core::matching::Arch>().is_ok(), "{a}");
        }
        #[cfg(feature = "ssr")]
        assert_eq!(IMAGE_KINDS, gantry_platform::catalogue::IMAGE_KINDS);
    }
}
