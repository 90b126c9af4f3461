//! Where a compute task runs (PRODUCT B4), decided from a snapshot:
//! 1. the regions holding a region image linked to a master image whose
//!    framework and interpreter match → the *image set* (empty: rejected);
//! 2. the regions with a ready node whose free resources fit → the
//!    *resource set* (for a task naming no GPU model, free GPUs of the
//!    models its group may use: [`decide_for_group`]);
//! 3. their intersection, keeping a region only where a fitting node's
//!    architecture has one of its matching images;
//! 4. a Fisher–Yates shuffle of the intersection with a recorded seed, and
//!    the first region wins. An empty intersection leaves the task pending
//!    with the reason.
//!
//! Apart from that, `size` tells a task no node could ever hold (which
//! fails, as it would block its group's queue) from one that only waits.

mod size;

pub use size::{never_fits, unknown_model, Need, NodeSize};

use crate::shuffle::{fisher_yates, SplitMix64};
use crate::task::string_enum;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

string_enum! {
    Arch, "architecture" {
        Amd64 => "amd64",
        Arm64 => "arm64",
    }
}

string_enum! {
    /// What a region image is for, as an admin labels it.
    ImageKind, "image type" {
        Training => "training",
        Inference => "inference",
        Notebook => "notebook",
        Other => "other",
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionImage {
    pub id: i64,
    pub region: String,
    pub reference: String,
    pub arch: Arch,
}

/// A master image with the region images it is linked to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MasterImage {
    pub id: i64,
    pub name: String,
    pub interpreter: String,
    pub interpreter_version: String,
    pub framework: String,
    pub framework_version: String,
    pub region_images: Vec<RegionImage>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeCapacity {
    pub name: String,
    pub arch: Arch,
    /// Free GPUs by model.
    pub free_gpus: BTreeMap<String, u32>,
    pub free_cpu_millis: i64,
    pub free_memory_mb: i64,
}

/// A region and its schedulable nodes (ready, heartbeat fresh).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionCapacity {
    pub code: String,
    pub nodes: Vec<NodeCapacity>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRequest {
    pub framework: String,
    pub framework_version: String,
    pub interpreter: String,
    pub interpreter_version: String,
    pub gpus: u32,
    /// None: any model.
    pub gpu_model: Option<String>,
    pub cpu_millis: i64,
    pub memory_mb: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    Placed { region: String, region_image_id: i64, reference: String },
    Pending { reason: String },
    Rejected { reason: String },
}

/// Everything the decision came from, stored with the task so a person can
/// see why it went where it went, or why it waits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub image_set: Vec<String>,
    pub resource_set: Vec<String>,
    pub intersection: Vec<String>,
    /// The intersection after the shuffle; the first one was chosen.
    pub shuffled: Vec<String>,
    pub seed: u64,
    pub outcome: Outcome,
}

impl NodeCapacity {
    /// `allowed_models` (empty: every model) narrows "any model" to those
    /// the group may use, as admission does: free GPUs of other models are
    /// no room for this task.
    fn fits(&self, req: &TaskRequest, allowed_models: &[String]) -> bool {
        let gpus = match &req.gpu_model {
            Some(model) => self.free_gpus.get(model).copied().unwrap_or(0),
            None => self
                .free_gpus
                .iter()
                .filter(|(m, _)| allowed_models.is_empty() || allowed_models.contains(m))
                .map(|(_, n)| *n)
                .max()
                .unwrap_or(0),
        };
        gpus >= req.gpus && self.free_cpu_millis >= req.cpu_millis && self.free_memory_mb >= req.memory_mb
    }
}

fn matches(m: &MasterImage, req: &TaskRequest) -> bool {
    let same = |a: &str, b: &str| a.trim().eq_ignore_ascii_case(b.trim());
    // Versions first: they differ most often, so most entries stop there.
    same(&m.framework_version, &req.framework_version)
        && same(&m.interpreter_version, &req.interpreter_version)
        && same(&m.framework, &req.framework)
        && same(&m.interpreter, &req.interpreter)
}

/// Decides where `req` runs. `seed` drives the shuffle and is recorded.
pub fn decide(catalogue: &[MasterImage], regions: &[RegionCapacity], req: &TaskRequest, seed: u64) -> Decision {
    decide_for_group(catalogue, regions, req, &[], seed)
}

/// [`decide`] for a task of a group that may use only `allowed_models`
/// (empty: every model). A task naming no model then counts only free
/// GPUs of those models, or its decision would choose a region whose free
/// GPUs admission must refuse it, and say so as if it were placed.
pub fn decide_for_group(
    catalogue: &[MasterImage],
    regions: &[RegionCapacity],
    req: &TaskRequest,
    allowed_models: &[String],
    seed: u64,
) -> Decision {
    // Region → its matching images, sorted by id for a stable choice.
    let mut images: BTreeMap<&str, Vec<&RegionImage>> = BTreeMap::new();
    for image in catalogue.iter().filter(|m| matches(m, req)).flat_map(|m| &m.region_images) {
        images.entry(image.region.as_str()).or_default().push(image);
    }
    for list in images.values_mut() {
        list.sort_by_key(|i| i.id);
        list.dedup_by_key(|i| i.id);
    }
    let image_set: Vec<String> = images.keys().map(|r| r.to_string()).collect();
    // Which architectures have a fitting node, per region. A region's scan
    // stops once every architecture is found: usually after a few nodes.
    let fitting: BTreeMap<&str, BTreeSet<Arch>> = regions
        .iter()
        .filter_map(|r| {
            let mut archs = BTreeSet::new();
            for n in &r.nodes {
                if !archs.contains(&n.arch) && n.fits(req, allowed_models) {
                    archs.insert(n.arch);
                    if archs.len() == Arch::ALL.len() {
                        break;
                    }
                }
            }
            (!archs.is_empty()).then_some((r.code.as_str(), archs))
        })
        .collect();
    let resource_set: Vec<String> = fitting.keys().map(|r| r.to_string()).collect();
    // The image to run in each region: the first matching one whose
    // architecture a fitting node has.
    let usable: BTreeMap<&str, &RegionImage> = images
        .iter()
        .filter_map(|(region, list)| {
            let archs = fitting.get(region)?;
            list.iter().find(|i| archs.contains(&i.arch)).map(|i| (*region, *i))
        })
        .collect();
    let intersection: Vec<String> = usable.keys().map(|r| r.to_string()).collect();
    let mut shuffled = intersection.clone();
    fisher_yates(&mut shuffled, &mut SplitMix64::new(seed));

    let outcome = if image_set.is_empty() {
        Outcome::Rejected {
            reason: format!(
                "no image matches framework {} {} / interpreter {} {}",
                req.framework, req.framework_version, req.interpreter, req.interpreter_version
            ),
        }
    } else if let Some(region) = shuffled.first() {
        let image = usable[region.as_str()];
        Outcome::Placed { region: region.clone(), region_image_id: image.id, reference: image.reference.clone() }
    } else {
        Outcome::Pending { reason: pending_reason(&image_set, &resource_set, req, allowed_models) }
    };
    Decision { image_set, resource_set, intersection, shuffled, seed, outcome }
}

fn pending_reason(
    image_set: &[String],
    resource_set: &[String],
    req: &TaskRequest,
    allowed_models: &[String],
) -> String {
    let gpus = match &req.gpu_model {
        Some(m) => format!("{} free {m} GPU(s)", req.gpus),
        None if allowed_models.is_empty() => format!("{} free GPU(s) of one model", req.gpus),
        None => format!("{} free GPU(s) of one model the group may use ({})", req.gpus, allowed_models.join(", ")),
    };
    let wanted = format!(
        "{gpus}, {} CPU(s) and {} MB of memory on one ready node",
        req.cpu_millis as f64 / 1000.0,
        req.memory_mb
    );
    let both: Vec<&String> = image_set.iter().filter(|r| resource_set.contains(r)).collect();
    if both.is_empty() {
        format!("regions with a matching image: {}; none has {wanted}", image_set.join(", "))
    } else {
        let list = both.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
        format!(
            "regions with a matching image and room: {list}; but no node there with room has that image's architecture"
        )
    }
}

#[cfg(test)]
mod tests;
