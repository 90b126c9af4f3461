use super::*;
use crate::alloc::{allocate, apply, release, GpuView, NodeState};

// The fixtures of the `allocate` tests, so both suites build clusters alike.
use crate::alloc::tests::{node, NOW};

fn cluster(nodes: Vec<NodeView>) -> ClusterView {
    ClusterView { nodes, heartbeat_timeout_secs: 30 }
}

fn policy(allowed: &[&str]) -> GroupPolicy {
    GroupPolicy {
        group_name: "ml-team".to_string(),
        gpu_quota: 100,
        gpus_in_use: 0,
        max_gpus_per_machine: 8,
        allowed_models: allowed.iter().map(|m| m.to_string()).collect(),
    }
}

fn req(n: u32, model: Option<&str>) -> AllocationRequest {
    AllocationRequest { gpu_count: n, model: model.map(str::to_string) }
}

/// Asks both the index and `allocate`, insists they agree, and returns the answer.
fn both(
    index: &ClusterIndex,
    view: &ClusterView,
    p: &GroupPolicy,
    r: &AllocationRequest,
) -> Result<Allocation, Refusal> {
    let expected = allocate(view, p, r, NOW);
    assert_eq!(index.allocate(p, r), expected, "request {r:?}");
    assert_eq!(&index.to_view(), view);
    expected
}

#[test]
fn packs_like_allocate_with_the_same_tie_breaks() {
    let f = (("A100", false), ("L4", false));
    let c = cluster(vec![
        node(3, "b", &[f.0, f.0, f.0]),
        node(2, "b", &[f.0, f.0, f.0, f.1, f.1, f.1]),
        node(1, "c", &[f.0, f.0]),
        node(4, "a", &[f.0, ("A100", true), f.0, f.0, f.0]),
    ]);
    let index = ClusterIndex::new(&c, NOW);
    let a = both(&index, &c, &policy(&[]), &req(2, None)).unwrap();
    assert_eq!((a.node_id, a.node_name.as_str()), (1, "c"), "the fullest node that fits");
    let a = both(&index, &c, &policy(&[]), &req(3, None)).unwrap();
    assert_eq!((a.node_id, a.model.as_str()), (2, "A100"), "name, then id, then model");
    let a = both(&index, &c, &policy(&["L4"]), &req(3, None)).unwrap();
    assert_eq!((a.node_id, a.model.as_str()), (2, "L4"));
    let a = both(&index, &c, &policy(&[]), &req(4, Some("A100"))).unwrap();
    assert_eq!(a.node_id, 4);
    assert_eq!(a.gpus.iter().map(|g| g.index).collect::<Vec<_>>(), vec![0, 2, 3, 4], "lowest free indexes");
}

#[test]
fn refusals_carry_the_same_numbers() {
    let c = cluster(vec![node(1, "a", &[("A100", false), ("A100", false), ("L4", false)])]);
    let mut index = ClusterIndex::new(&c, NOW);
    let mut view = c.clone();
    let capacity =
        |best_free, model: Option<&str>| Refusal::NoCapacity { asked: 3, model: model.map(Into::into), best_free };
    assert_eq!(both(&index, &view, &policy(&[]), &req(3, None)), Err(capacity(2, None)));
    assert_eq!(both(&index, &view, &policy(&["L4"]), &req(3, None)), Err(capacity(1, None)));
    assert_eq!(both(&index, &view, &policy(&[]), &req(3, Some("H100"))), Err(capacity(0, Some("H100"))));
    // The group's rules come first, exactly as in `allocate`.
    let r = both(&index, &view, &policy(&["L4"]), &req(1, Some("A100")));
    assert!(matches!(r, Err(Refusal::ModelNotAllowed { .. })), "{r:?}");
    assert_eq!(both(&index, &view, &policy(&[]), &req(0, None)), Err(Refusal::ZeroGpus));

    // "Most free" follows apply and release.
    let a = both(&index, &view, &policy(&[]), &req(1, Some("A100"))).unwrap();
    index.apply(&a);
    apply(&mut view, &a);
    assert_eq!(both(&index, &view, &policy(&[]), &req(3, None)), Err(capacity(1, None)));
    index.release(1, &[0]);
    release(&mut view, 1, &[0]);
    assert_eq!(both(&index, &view, &policy(&[]), &req(3, None)), Err(capacity(2, None)));
}

#[test]
fn release_never_makes_an_unschedulable_node_a_candidate() {
    let mut draining = node(1, "a", &[("A100", true), ("A100", true)]);
    draining.state = NodeState::Draining;
    let mut silent = node(2, "b", &[("A100", true)]);
    silent.last_heartbeat = NOW - 31;
    let ready = node(3, "c", &[("A100", true)]);
    let mut view = cluster(vec![draining, silent, ready]);
    let mut index = ClusterIndex::new(&view, NOW);
    for (id, gpus) in [(1, &[0, 1][..]), (2, &[0]), (99, &[0])] {
        index.release(id, gpus);
        release(&mut view, id, gpus);
    }
    let r = both(&index, &view, &policy(&[]), &req(1, None));
    assert_eq!(r, Err(Refusal::NoCapacity { asked: 1, model: None, best_free: 0 }));
    index.release(3, &[0]);
    release(&mut view, 3, &[0]);
    assert_eq!(both(&index, &view, &policy(&[]), &req(1, None)).unwrap().node_id, 3);
}

#[test]
fn malformed_views_decide_as_allocate_does() {
    // One id listed twice: across models, the model is compared before the listing.
    let c = cluster(vec![node(1, "a", &[("L4", false)]), node(1, "a", &[("A100", false)])]);
    let mut index = ClusterIndex::new(&c, NOW);
    let mut view = c.clone();
    let a = both(&index, &view, &policy(&[]), &req(1, None)).unwrap();
    assert_eq!(a.model, "A100");
    // Applying by id takes index 0 on both listings of the node.
    index.apply(&a);
    apply(&mut view, &a);
    assert!(both(&index, &view, &policy(&[]), &req(1, None)).is_err());

    // One GPU index listed twice: free only if no listing is taken; the first listing names it.
    let mut n = node(2, "b", &[("A100", false), ("A100", false)]);
    n.gpus.push(GpuView { index: 0, uuid: "dup".into(), model: "L4".into(), taken: true });
    n.gpus.push(GpuView { index: 1, uuid: "dup".into(), model: "L4".into(), taken: false });
    let mut view = cluster(vec![n]);
    let mut index = ClusterIndex::new(&view, NOW);
    assert!(both(&index, &view, &policy(&[]), &req(1, Some("L4"))).is_err(), "the L4 listings never count");
    let a = both(&index, &view, &policy(&[]), &req(1, None)).unwrap();
    assert_eq!((a.gpus[0].index, a.gpus[0].uuid.as_str()), (1, "GPU-2-1"));
    index.release(2, &[0]);
    release(&mut view, 2, &[0]);
    assert_eq!(both(&index, &view, &policy(&[]), &req(2, Some("A100"))).unwrap().gpus.len(), 2);
}
