//! Whether a compute task could *ever* run on the nodes there are, whatever
//! runs on them now. Only the head of a group's queue is decided (first
//! come, first served), so a task no node could hold even when idle would
//! hold every later task of its group back for ever: it must fail, with the
//! numbers. A task that only waits for free GPUs is not this.
//!
//! GPU models are matched exactly, as admission (`alloc`) and the group's
//! allowed models match them: a model no GPU has is refused at submit
//! ([`unknown_model`]), with a hint when only the case differs.

use std::collections::{BTreeMap, BTreeSet};

/// A node as built, not as used: all its GPUs by model, and the CPUs and
/// memory it declared. `cpu_millis` 0: no size declared, so it is never
/// counted out on CPU or memory (as the matcher and admission treat it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSize {
    pub name: String,
    pub gpus: BTreeMap<String, u32>,
    pub cpu_millis: i64,
    pub memory_mb: i64,
}

/// What one task's machine needs on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    pub gpus: u32,
    /// `None`: GPUs of any one model the group may use.
    pub gpu_model: Option<String>,
    pub cpu_millis: i64,
    pub memory_mb: i64,
}

impl NodeSize {
    fn declared(&self) -> bool {
        self.cpu_millis > 0
    }

    /// The most GPUs of one model `need` could use here. `allowed_models`
    /// (empty: every model) narrows "any model", as admission does.
    fn gpus_for(&self, need: &Need, allowed_models: &[String]) -> u32 {
        match &need.gpu_model {
            Some(model) => self.gpus.get(model).copied().unwrap_or(0),
            None => self
                .gpus
                .iter()
                .filter(|(m, _)| allowed_models.is_empty() || allowed_models.contains(m))
                .map(|(_, n)| *n)
                .max()
                .unwrap_or(0),
        }
    }

    /// Whether this node, with nothing else on it, could hold `need`.
    pub fn could_hold(&self, need: &Need, allowed_models: &[String]) -> bool {
        self.gpus_for(need, allowed_models) >= need.gpus
            && (!self.declared() || (self.cpu_millis >= need.cpu_millis && self.memory_mb >= need.memory_mb))
    }
}

/// Why none of `nodes` (the not-lost nodes of the regions the group may
/// use, described by `place`, e.g. "in region east") could ever hold
/// `need`, with what it asks and the most a node there has; `None` when one
/// could. Also `None` when there is no node at all: then no task could run,
/// so the head holds nobody back, and an admin adding a node is the fix.
pub fn never_fits(nodes: &[NodeSize], need: &Need, allowed_models: &[String], place: &str) -> Option<String> {
    if nodes.is_empty() || nodes.iter().any(|n| n.could_hold(need, allowed_models)) {
        return None;
    }
    let kind = match &need.gpu_model {
        Some(model) => format!("{model} GPU(s)"),
        None if allowed_models.is_empty() => "GPU(s) of one model".to_string(),
        None => format!("GPU(s) of one model the group may use ({})", allowed_models.join(", ")),
    };
    let cpus = |millis: i64| millis as f64 / 1000.0;
    let (max_gpus, gpu_node) = most(nodes.iter(), |n| n.gpus_for(need, allowed_models) as i64);
    let undeclared = nodes.iter().find(|n| !n.declared());
    let declared = || nodes.iter().filter(|n| n.declared());
    let room = match undeclared {
        Some(u) => format!("CPUs and memory without limit ({} declares no size)", u.name),
        None => {
            let ((c, cn), (m, mn)) = (most(declared(), |n| n.cpu_millis), most(declared(), |n| n.memory_mb));
            format!("{} CPU(s) ({cn}) and {m} MB of memory ({mn})", cpus(c))
        }
    };
    // Enough of each somewhere, just not on one node: say so, or the
    // numbers would read as if it fit.
    let each_enough = max_gpus >= need.gpus as i64
        && (undeclared.is_some()
            || declared().any(|n| n.cpu_millis >= need.cpu_millis)
                && declared().any(|n| n.memory_mb >= need.memory_mb));
    let together = if each_enough { "; no one node has all of it" } else { "" };
    Some(format!(
        "no node {place} could hold it even with nothing else running: it asks for {} {kind}, {} CPU(s) and {} MB of memory on one node; \
         the most a node there has is {max_gpus} {kind} ({gpu_node}), {room}{together}",
        need.gpus,
        cpus(need.cpu_millis),
        need.memory_mb,
    ))
}

/// The largest `f` of `nodes` and the first node that has it (0, "" for none).
fn most<'a>(nodes: impl Iterator<Item = &'a NodeSize>, f: impl Fn(&NodeSize) -> i64) -> (i64, &'a str) {
    nodes.fold((0, ""), |best, n| if best.1.is_empty() || f(n) > best.0 { (f(n), n.name.as_str()) } else { best })
}

/// Why `asked` is not a GPU model of the cluster (`models`: those its GPUs
/// have), listing them; `None` when one has it exactly, or when there are no
/// GPUs at all yet (nothing to compare with; the task waits for nodes).
pub fn unknown_model(asked: &str, models: &BTreeSet<String>) -> Option<String> {
    if models.is_empty() || models.contains(asked) {
        return None;
    }
    let list = models.iter().map(String::as_str).collect::<Vec<_>>().join(", ");
    let hint = models
        .iter()
        .find(|m| m.eq_ignore_ascii_case(asked))
        .map(|m| format!("; did you mean {m:?}?"))
        .unwrap_or_default();
    Some(format!(
        "no GPU in the cluster is of model {asked:?}: models are matched exactly, and the cluster has {list}{hint}"
    ))
}

#[cfg(test)]
mod tests;
