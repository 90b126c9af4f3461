//! Where a request's machine may go, and the scheduling core's choice
//! there: the nodes its kept volume, its compute task and its group's
//! regions allow, those big enough for it, then the GPUs.

use super::{Batch, Stop};
use crate::{
    db::Tx,
    machines::{
        admission::{CreateMachine, KeptVolume},
        room::{self, NodeCpus},
    },
};
use gantry_core::alloc::{allocate, Allocation, AllocationRequest, ClusterView};

impl Batch {
    /// A kept volume lives on one node, a compute task runs in its region
    /// on a node of its image's architecture with room for its CPU and
    /// memory (as the matcher counted them), and only nodes of the regions
    /// the group may use count; whether the regions narrowed the choice.
    pub(super) async fn allowed_nodes(
        &mut self,
        tx: &mut Tx,
        req: &CreateMachine,
        kept: Option<&KeptVolume>,
    ) -> Result<(Option<Vec<i64>>, bool), Stop> {
        let only_nodes: Option<Vec<i64>> = match (kept, &req.job) {
            (Some(k), _) => Some(vec![k.node_id]),
            (None, Some(job)) => Some(room::job_nodes(tx, job, &req.limits()).await?),
            (None, None) => None,
        };
        let group_id = req.requester.group_id;
        if let std::collections::hash_map::Entry::Vacant(e) = self.region_nodes.entry(group_id) {
            e.insert(crate::policy_access::allowed_nodes(tx, group_id).await?);
        }
        let allowed = self.region_nodes[&group_id].as_deref();
        let group_name = &self.policy(group_id).group_name;
        room::in_regions(tx, group_id, group_name, &self.node_cpus, allowed, only_nodes).await?.map_err(Stop::Refused)
    }

    /// No machine goes to a node with fewer CPUs than it asks for (a node
    /// that declared none is not counted, see `room`); the nodes too small
    /// for it, to say so if nothing else fits.
    pub(super) fn fitting_nodes(
        &self,
        req: &CreateMachine,
        only_nodes: Option<Vec<i64>>,
    ) -> Result<(Option<Vec<i64>>, Vec<&NodeCpus>), Stop> {
        let (only_nodes, too_small) = room::fitting(&self.node_cpus, only_nodes, &req.limits());
        if !too_small.is_empty() && only_nodes.as_ref().is_some_and(Vec::is_empty) {
            let reason = format!("no node can take this machine: {}", room::too_small(&too_small, &req.limits()));
            return Err(Stop::Refused(reason));
        }
        Ok((only_nodes, too_small))
    }

    /// No machine goes to a node whose free disk is below the floor
    /// (`disk::nodes`): the allowed nodes without those, and the words
    /// for each one left out, to say so if nothing else fits.
    pub(super) fn roomy_disks(&self, only_nodes: Option<Vec<i64>>) -> (Option<Vec<i64>>, Vec<String>) {
        if self.low_disk.is_empty() {
            return (only_nodes, Vec::new());
        }
        let low = |id: &i64| self.low_disk.iter().any(|(n, _)| n == id);
        let candidates = only_nodes.unwrap_or_else(|| self.index.to_view().nodes.iter().map(|n| n.id).collect());
        let words = self.low_disk.iter().filter(|(n, _)| candidates.contains(n)).map(|(_, w)| w.clone()).collect();
        (Some(candidates.into_iter().filter(|id| !low(id)).collect()), words)
    }

    /// The scheduling core's choice among the allowed nodes, on the
    /// cluster as this batch has left it; a refusal says what narrowed it.
    pub(super) async fn allocate(
        &self,
        tx: &mut Tx,
        req: &CreateMachine,
        only_nodes: Option<Vec<i64>>,
        narrowed: bool,
        too_small: &[&NodeCpus],
    ) -> Result<Allocation, Stop> {
        let policy = self.policy(req.requester.group_id);
        let request = AllocationRequest { gpu_count: req.gpu_count, model: req.gpu_model.clone() };
        let decided = match only_nodes {
            Some(ids) => {
                let full = self.index.to_view();
                let only =
                    ClusterView { nodes: full.nodes.into_iter().filter(|n| ids.contains(&n.id)).collect(), ..full };
                allocate(&only, policy, &request, self.now)
            }
            None => self.index.allocate(policy, &request),
        };
        let refusal = match decided {
            Ok(alloc) => return Ok(alloc),
            Err(refusal) => refusal,
        };
        let mut reason = match too_small.is_empty() {
            true => refusal.to_string(),
            false => format!("{refusal} ({})", room::too_small(too_small, &req.limits())),
        };
        if narrowed {
            let group_id = req.requester.group_id;
            reason.push_str(&crate::policy_access::region_note(tx, group_id, &policy.group_name).await?);
        }
        Err(Stop::Refused(reason))
    }
}
