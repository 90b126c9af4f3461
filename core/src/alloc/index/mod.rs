//! An incremental index over one cluster snapshot, so the admission path can
//! decide in O(models · log nodes) instead of re-reading every GPU per call.
//!
//! It must decide exactly as [`allocate`](super::allocate) would on the equivalently updated
//! view: same refusals with the same numbers, same node and model, same GPUs.
//! That includes the view's oddities (a node id listed twice, a GPU index
//! listed twice), because replicas that disagree on a malformed view would
//! hand out different GPUs.
//!
//! Schedulability (ready + fresh heartbeat) is evaluated once, at build time.
//! Rebuild the index whenever node states, heartbeats or the GPU inventory
//! may have changed — in practice once per admission batch, from a fresh
//! snapshot — and keep batches short next to the heartbeat timeout, since a
//! node that falls silent mid-batch stays schedulable until the rebuild.

use super::{check_policy, Allocation, AllocationRequest, ClusterView, GroupPolicy, NodeView, Refusal};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone)]
pub struct ClusterIndex {
    heartbeat_timeout_secs: i64,
    /// In the view's listing order; a node's position never changes.
    slots: Vec<Slot>,
    /// Positions per node id: `apply`/`release` touch every listing of an id, as the view's do.
    by_id: BTreeMap<i64, Vec<usize>>,
    /// Every model on any node, sorted, so comparing model ids compares names.
    models: Vec<String>,
    model_ids: BTreeMap<String, usize>,
    /// Per model id: (free GPUs of that model, rank) for every schedulable
    /// node with at least one free. The first entry at or above the asked
    /// count is the packing choice; the last entry is "most free on one node".
    by_free: Vec<BTreeSet<(usize, usize)>>,
    /// Rank -> position.
    by_rank: Vec<usize>,
}

#[derive(Debug, Clone)]
struct Slot {
    /// Kept current (taken flags), so returned GPUs and `to_view` are exact copies.
    node: NodeView,
    schedulable: bool,
    /// Place in (name, id, position) order: one integer stands for the
    /// tie-break, and position settles exact duplicates as "first listed wins".
    rank: usize,
    /// Dense rank of (name, id) alone: across models, `allocate` compares the
    /// model before the listing position.
    group: usize,
    /// GPU index -> (its first listing, that listing's model id). The first
    /// listing is the one `allocate` hands out and whose model counts.
    first: BTreeMap<u32, (usize, usize)>,
    /// Model id -> free GPU indexes, ascending.
    free: BTreeMap<usize, BTreeSet<u32>>,
}

impl ClusterIndex {
    /// Builds the index from a snapshot; schedulability is judged at `now`.
    pub fn new(view: &ClusterView, now: i64) -> ClusterIndex {
        let names: BTreeSet<&str> = view.nodes.iter().flat_map(|n| n.gpus.iter().map(|g| g.model.as_str())).collect();
        let models: Vec<String> = names.into_iter().map(str::to_string).collect();
        let model_ids: BTreeMap<String, usize> = models.iter().enumerate().map(|(i, m)| (m.clone(), i)).collect();

        let mut by_rank: Vec<usize> = (0..view.nodes.len()).collect();
        by_rank.sort_by(|&a, &b| {
            let (na, nb) = (&view.nodes[a], &view.nodes[b]);
            (&na.name, na.id, a).cmp(&(&nb.name, nb.id, b))
        });
        let mut rank = vec![0; view.nodes.len()];
        let mut group = vec![0; view.nodes.len()];
        let mut groups = 0;
        for (r, &pos) in by_rank.iter().enumerate() {
            let node = &view.nodes[pos];
            if r > 0 {
                let prev = &view.nodes[by_rank[r - 1]];
                if (&prev.name, prev.id) != (&node.name, node.id) {
                    groups += 1;
                }
            }
            rank[pos] = r;
            group[pos] = groups;
        }

        let mut by_id: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
        let mut by_free = vec![BTreeSet::new(); models.len()];
        let mut slots = Vec::with_capacity(view.nodes.len());
        for (pos, node) in view.nodes.iter().enumerate() {
            by_id.entry(node.id).or_default().push(pos);
            // As in `free_by_model`: an index is free only if no listing says taken.
            let taken: BTreeSet<u32> = node.gpus.iter().filter(|g| g.taken).map(|g| g.index).collect();
            let mut first = BTreeMap::new();
            let mut free: BTreeMap<usize, BTreeSet<u32>> = BTreeMap::new();
            for (listing, gpu) in node.gpus.iter().enumerate() {
                if first.contains_key(&gpu.index) {
                    continue;
                }
                let model = model_ids[&gpu.model];
                first.insert(gpu.index, (listing, model));
                if !taken.contains(&gpu.index) {
                    free.entry(model).or_default().insert(gpu.index);
                }
            }
            let schedulable = node.is_schedulable(now, view.heartbeat_timeout_secs);
            if schedulable {
                for (&model, set) in &free {
                    by_free[model].insert((set.len(), rank[pos]));
                }
            }
            slots.push(Slot { node: node.clone(), schedulable, rank: rank[pos], group: group[pos], first, free });
        }
        ClusterIndex {
            heartbeat_timeout_secs: view.heartbeat_timeout_secs,
            slots,
            by_id,
            models,
            model_ids,
            by_free,
            by_rank,
        }
    }

    /// The same decision as [`allocate`](super::allocate) on the view this index stands for, at
    /// the build time's `now`.
    pub fn allocate(&self, policy: &GroupPolicy, request: &AllocationRequest) -> Result<Allocation, Refusal> {
        check_policy(policy, request)?;
        let asked = request.gpu_count as usize;
        let mut best_free = 0usize;
        // (free, group, model, rank): `allocate`'s (free, name, id, model) key,
        // then listing position for exact duplicates.
        let mut best: Option<(usize, usize, usize, usize)> = None;
        let mut consider = |model: usize| {
            let set = &self.by_free[model];
            if let Some(&(most, _)) = set.last() {
                best_free = best_free.max(most);
            }
            if let Some(&(free, rank)) = set.range((asked, 0)..).next() {
                let key = (free, self.slots[self.by_rank[rank]].group, model, rank);
                if best.is_none_or(|b| key < b) {
                    best = Some(key);
                }
            }
        };
        match &request.model {
            // A model no node has simply has no candidates.
            Some(name) => {
                if let Some(&model) = self.model_ids.get(name.as_str()) {
                    consider(model);
                }
            }
            None => {
                for (model, name) in self.models.iter().enumerate() {
                    if policy.allows_model(name) {
                        consider(model);
                    }
                }
            }
        }

        let Some((_, _, model, rank)) = best else {
            return Err(Refusal::NoCapacity {
                asked: request.gpu_count,
                model: request.model.clone(),
                best_free: u32::try_from(best_free).unwrap_or(u32::MAX),
            });
        };
        let slot = &self.slots[self.by_rank[rank]];
        let gpus =
            slot.free[&model].iter().take(asked).map(|index| slot.node.gpus[slot.first[index].0].clone()).collect();
        Ok(Allocation {
            node_id: slot.node.id,
            node_name: slot.node.name.clone(),
            gpus,
            model: self.models[model].clone(),
        })
    }

    /// Marks the allocation's GPUs taken, as [`super::apply`] does on the view.
    pub fn apply(&mut self, alloc: &Allocation) {
        let indexes: Vec<u32> = alloc.gpus.iter().map(|g| g.index).collect();
        self.set_taken(alloc.node_id, &indexes, true);
    }

    /// Marks GPUs free again, as [`super::release`] does on the view. A node
    /// that was not schedulable at build time stays out of the candidates.
    pub fn release(&mut self, node_id: i64, gpu_indexes: &[u32]) {
        self.set_taken(node_id, gpu_indexes, false);
    }

    /// The view this index currently stands for (node states and heartbeats
    /// as built; taken flags as updated since).
    pub fn to_view(&self) -> ClusterView {
        ClusterView {
            nodes: self.slots.iter().map(|s| s.node.clone()).collect(),
            heartbeat_timeout_secs: self.heartbeat_timeout_secs,
        }
    }

    fn set_taken(&mut self, node_id: i64, gpu_indexes: &[u32], taken: bool) {
        let Self { by_id, slots, by_free, .. } = self;
        let Some(positions) = by_id.get(&node_id) else { return };
        for &pos in positions {
            let slot = &mut slots[pos];
            for gpu in slot.node.gpus.iter_mut().filter(|g| gpu_indexes.contains(&g.index)) {
                gpu.taken = taken;
            }
            // Every listing of a touched index now agrees, so it is free
            // exactly when it was released.
            for index in gpu_indexes {
                let Some(&(_, model)) = slot.first.get(index) else { continue };
                let set = slot.free.entry(model).or_default();
                let before = set.len();
                if taken {
                    set.remove(index);
                } else {
                    set.insert(*index);
                }
                let after = set.len();
                if slot.schedulable && before != after {
                    let by_free = &mut by_free[model];
                    if before > 0 {
                        by_free.remove(&(before, slot.rank));
                    }
                    if after > 0 {
                        by_free.insert((after, slot.rank));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod proptests;
