use super::*;

pub(crate) const NOW: i64 = 1_000_000;
const TIMEOUT: i64 = 30;

/// A ready, fresh node; `gpus` lists (model, taken) in index order.
pub(crate) fn node(id: i64, name: &str, gpus: &[(&str, bool)]) -> NodeView {
    NodeView {
        id,
        name: name.to_string(),
        state: NodeState::Ready,
        last_heartbeat: NOW,
        gpus: gpus
            .iter()
            .enumerate()
            .map(|(i, (model, taken))| GpuView {
                index: i as u32,
                uuid: format!("GPU-{id}-{i}"),
                model: model.to_string(),
                taken: *taken,
            })
            .collect(),
    }
}

fn free(model: &str, n: usize) -> Vec<(&str, bool)> {
    vec![(model, false); n]
}

fn cluster(nodes: Vec<NodeView>) -> ClusterView {
    ClusterView { nodes, heartbeat_timeout_secs: TIMEOUT }
}

fn policy(quota: i64, in_use: i64, max: i64, allowed: &[&str]) -> GroupPolicy {
    GroupPolicy {
        group_name: "ml-team".to_string(),
        gpu_quota: quota,
        gpus_in_use: in_use,
        max_gpus_per_machine: max,
        allowed_models: allowed.iter().map(|m| m.to_string()).collect(),
    }
}

fn open() -> GroupPolicy {
    policy(100, 0, 8, &[])
}

fn req(n: u32, model: Option<&str>) -> AllocationRequest {
    AllocationRequest { gpu_count: n, model: model.map(str::to_string) }
}

fn refusal(c: &ClusterView, p: &GroupPolicy, r: &AllocationRequest) -> String {
    allocate(c, p, r, NOW).unwrap_err().to_string()
}

fn indexes(a: &Allocation) -> Vec<u32> {
    a.gpus.iter().map(|g| g.index).collect()
}

#[test]
fn zero_gpus_is_refused() {
    let c = cluster(vec![node(1, "a", &free("A100", 4))]);
    assert_eq!(allocate(&c, &open(), &req(0, None), NOW), Err(Refusal::ZeroGpus));
    assert_eq!(refusal(&c, &open(), &req(0, None)), "a machine needs at least 1 GPU");
}

#[test]
fn machine_limit_message() {
    let c = cluster(vec![node(1, "a", &free("A100", 8))]);
    let p = policy(8, 0, 2, &[]);
    assert_eq!(
        allocate(&c, &p, &req(4, None), NOW),
        Err(Refusal::OverMachineLimit { group: "ml-team".into(), asked: 4, max: 2 })
    );
    assert_eq!(
        refusal(&c, &p, &req(4, None)),
        "group ml-team may use at most 2 GPUs per machine; this machine asks for 4"
    );
    let p = policy(8, 0, 1, &[]);
    assert_eq!(
        refusal(&c, &p, &req(2, None)),
        "group ml-team may use at most 1 GPU per machine; this machine asks for 2"
    );
}

#[test]
fn model_permission_message() {
    let c = cluster(vec![node(1, "a", &free("H100", 8))]);
    let p = policy(8, 0, 8, &["A100", "L4"]);
    assert_eq!(refusal(&c, &p, &req(1, Some("H100"))), "group ml-team may not use H100 GPUs (allowed: A100, L4)");
}

#[test]
fn quota_message() {
    let c = cluster(vec![node(1, "a", &free("A100", 8))]);
    let p = policy(8, 6, 8, &[]);
    assert_eq!(
        allocate(&c, &p, &req(4, None), NOW),
        Err(Refusal::OverQuota { group: "ml-team".into(), in_use: 6, quota: 8, asked: 4 })
    );
    assert_eq!(refusal(&c, &p, &req(4, None)), "group ml-team holds 6 of 8 GPUs; this machine asks for 4");
    // Exactly the remaining quota is fine.
    assert!(allocate(&c, &p, &req(2, None), NOW).is_ok());
}

#[test]
fn lowered_quota_grants_nothing() {
    let p = policy(8, 10, 8, &[]);
    assert_eq!(p.available(), -2);
    let c = cluster(vec![node(1, "a", &free("A100", 8))]);
    assert_eq!(refusal(&c, &p, &req(1, None)), "group ml-team holds 10 of 8 GPUs; this machine asks for 1");
    assert_eq!(
        refusal(&c, &policy(1, 0, 8, &[]), &req(2, None)),
        "group ml-team holds 0 of 1 GPU; this machine asks for 2"
    );
}

#[test]
fn capacity_messages() {
    let c = cluster(vec![
        node(1, "a", &[("A100", false), ("A100", false), ("A100", true), ("L4", false), ("L4", false), ("L4", false)]),
        node(2, "b", &[("A100", false)]),
    ]);
    assert_eq!(
        allocate(&c, &open(), &req(4, Some("A100")), NOW),
        Err(Refusal::NoCapacity { asked: 4, model: Some("A100".into()), best_free: 2 })
    );
    assert_eq!(
        refusal(&c, &open(), &req(4, Some("A100"))),
        "no ready node has 4 free A100 GPUs (most free on one node: 2)"
    );
    // "Most free" is per model: a node's 2 A100 and 3 L4 cannot form one machine.
    assert_eq!(refusal(&c, &open(), &req(4, None)), "no ready node has 4 free GPUs (most free on one node: 3)");
    assert_eq!(
        refusal(&cluster(vec![]), &open(), &req(1, None)),
        "no ready node has 1 free GPU (most free on one node: 0)"
    );
}

#[test]
fn rules_are_checked_in_order() {
    let empty = cluster(vec![]);
    // Everything wrong at once: zero wins.
    assert_eq!(allocate(&empty, &policy(0, 5, 0, &["A100"]), &req(0, Some("H100")), NOW), Err(Refusal::ZeroGpus));
    // Machine limit before model permission.
    let r = allocate(&empty, &policy(0, 5, 1, &["A100"]), &req(2, Some("H100")), NOW);
    assert!(matches!(r, Err(Refusal::OverMachineLimit { .. })), "{r:?}");
    // Model permission before quota.
    let r = allocate(&empty, &policy(0, 5, 8, &["A100"]), &req(2, Some("H100")), NOW);
    assert!(matches!(r, Err(Refusal::ModelNotAllowed { .. })), "{r:?}");
    // Quota before capacity.
    let r = allocate(&empty, &policy(0, 5, 8, &["A100"]), &req(2, Some("A100")), NOW);
    assert!(matches!(r, Err(Refusal::OverQuota { .. })), "{r:?}");
    let r = allocate(&empty, &policy(8, 0, 8, &["A100"]), &req(2, Some("A100")), NOW);
    assert!(matches!(r, Err(Refusal::NoCapacity { .. })), "{r:?}");
}

#[test]
fn empty_allowed_list_means_any_model() {
    let c = cluster(vec![node(1, "a", &free("H100", 2))]);
    let a = allocate(&c, &open(), &req(2, Some("H100")), NOW).unwrap();
    assert_eq!(a.model, "H100");
    assert_eq!(allocate(&c, &open(), &req(1, None), NOW).unwrap().model, "H100");
}

#[test]
fn any_model_means_any_allowed_model() {
    let c = cluster(vec![node(1, "a", &free("H100", 8)), node(2, "b", &free("A100", 2))]);
    let p = policy(8, 0, 8, &["A100"]);
    let a = allocate(&c, &p, &req(2, None), NOW).unwrap();
    assert_eq!((a.node_id, a.model.as_str()), (2, "A100"));
    // The H100s do not count towards "most free" either.
    assert_eq!(refusal(&c, &p, &req(3, None)), "no ready node has 3 free GPUs (most free on one node: 2)");
}

#[test]
fn requested_model_is_honoured() {
    let c = cluster(vec![node(1, "a", &[("L4", false), ("A100", false), ("L4", false), ("A100", false)])]);
    let a = allocate(&c, &open(), &req(2, Some("A100")), NOW).unwrap();
    assert_eq!(a.model, "A100");
    assert_eq!(indexes(&a), [1, 3]);
    assert!(a.gpus.iter().all(|g| g.model == "A100"));
}

#[test]
fn packs_into_the_fullest_node_that_fits() {
    let c = cluster(vec![
        node(1, "big", &free("A100", 8)),
        node(2, "small", &free("A100", 2)),
        node(3, "mid", &free("A100", 4)),
    ]);
    assert_eq!(allocate(&c, &open(), &req(2, None), NOW).unwrap().node_name, "small");
    assert_eq!(allocate(&c, &open(), &req(3, None), NOW).unwrap().node_name, "mid");
    assert_eq!(allocate(&c, &open(), &req(5, None), NOW).unwrap().node_name, "big");
}

#[test]
fn packing_counts_free_gpus_not_total() {
    let mut gpus = free("A100", 2);
    gpus.extend([("A100", true); 6]);
    let c = cluster(vec![node(1, "a", &free("A100", 4)), node(2, "b", &gpus)]);
    assert_eq!(allocate(&c, &open(), &req(2, None), NOW).unwrap().node_name, "b");
}

#[test]
fn packing_is_per_model_within_a_node() {
    let mut gpus = free("L4", 6);
    gpus.extend(free("A100", 2));
    let c = cluster(vec![node(1, "a", &gpus)]);
    let a = allocate(&c, &open(), &req(2, None), NOW).unwrap();
    assert_eq!(a.model, "A100");
    assert_eq!(indexes(&a), [6, 7]);
}

#[test]
fn ties_break_by_name_then_id_then_model() {
    let c = cluster(vec![node(5, "beta", &free("A100", 2)), node(9, "alpha", &free("A100", 2))]);
    assert_eq!(allocate(&c, &open(), &req(1, None), NOW).unwrap().node_name, "alpha");

    let c = cluster(vec![node(9, "same", &free("A100", 2)), node(5, "same", &free("A100", 2))]);
    assert_eq!(allocate(&c, &open(), &req(1, None), NOW).unwrap().node_id, 5);

    let c = cluster(vec![node(1, "a", &[("L4", false), ("H100", false), ("A100", false)])]);
    assert_eq!(allocate(&c, &open(), &req(1, None), NOW).unwrap().model, "A100");
}

#[test]
fn picks_the_lowest_free_indexes() {
    let c = cluster(vec![node(
        1,
        "a",
        &[("A100", true), ("A100", false), ("A100", true), ("A100", false), ("A100", false)],
    )]);
    let a = allocate(&c, &open(), &req(2, None), NOW).unwrap();
    assert_eq!(indexes(&a), [1, 3]);
    assert!(a.gpus.iter().all(|g| !g.taken));
    assert_eq!(a.gpus[0].uuid, "GPU-1-1");

    // Order in the view does not matter.
    let mut shuffled = c.clone();
    shuffled.nodes[0].gpus.reverse();
    assert_eq!(allocate(&shuffled, &open(), &req(2, None), NOW), Ok(a));
}

#[test]
fn never_picks_a_taken_gpu() {
    let c = cluster(vec![node(1, "a", &[("A100", true); 4])]);
    assert_eq!(refusal(&c, &open(), &req(1, None)), "no ready node has 1 free GPU (most free on one node: 0)");
}

#[test]
fn an_index_listed_twice_is_not_handed_out_twice() {
    let mut n = node(1, "a", &[("A100", false), ("A100", false)]);
    n.gpus[1].index = 0;
    let c = cluster(vec![n.clone()]);
    assert_eq!(refusal(&c, &open(), &req(2, None)), "no ready node has 2 free GPUs (most free on one node: 1)");
    // If either listing says taken, it is taken.
    n.gpus[1].taken = true;
    assert_eq!(
        refusal(&cluster(vec![n]), &open(), &req(1, None)),
        "no ready node has 1 free GPU (most free on one node: 0)"
    );
}

#[test]
fn heartbeat_must_be_fresh() {
    let mut edge = node(1, "edge", &free("A100", 1));
    edge.last_heartbeat = NOW - TIMEOUT;
    let mut stale = node(2, "stale", &free("A100", 1));
    stale.last_heartbeat = NOW - TIMEOUT - 1;
    let c = cluster(vec![stale.clone(), edge]);
    assert_eq!(allocate(&c, &open(), &req(1, None), NOW).unwrap().node_name, "edge");
    assert_eq!(
        refusal(&cluster(vec![stale]), &open(), &req(1, None)),
        "no ready node has 1 free GPU (most free on one node: 0)"
    );
}

#[test]
fn a_heartbeat_from_the_future_counts_as_fresh() {
    // Clock skew between master and worker must not hide a healthy node.
    let mut n = node(1, "a", &free("A100", 1));
    n.last_heartbeat = NOW + 5;
    assert!(allocate(&cluster(vec![n]), &open(), &req(1, None), NOW).is_ok());
}

#[test]
fn draining_and_down_nodes_take_nothing() {
    let mut draining = node(1, "draining", &free("A100", 2));
    draining.state = NodeState::Draining;
    let mut down = node(2, "down", &free("A100", 2));
    down.state = NodeState::Down;
    let ready = node(3, "ready", &free("A100", 8));
    let c = cluster(vec![draining, down, ready]);
    assert_eq!(allocate(&c, &open(), &req(2, None), NOW).unwrap().node_name, "ready");
    let c = cluster(c.nodes[..2].to_vec());
    assert_eq!(refusal(&c, &open(), &req(1, None)), "no ready node has 1 free GPU (most free on one node: 0)");
}

#[test]
fn apply_and_release_round_trip() {
    let mut c = cluster(vec![node(1, "a", &free("A100", 2)), node(2, "b", &free("A100", 4))]);
    let before = c.clone();
    let first = allocate(&c, &open(), &req(2, None), NOW).unwrap();
    assert_eq!(first.node_name, "a");
    apply(&mut c, &first);
    assert!(c.nodes[0].gpus.iter().all(|g| g.taken));

    let second = allocate(&c, &open(), &req(2, None), NOW).unwrap();
    assert_eq!((second.node_name.as_str(), indexes(&second)), ("b", vec![0, 1]));

    release(&mut c, first.node_id, &indexes(&first));
    assert_eq!(c, before);
    // Releasing an unknown node or index is a no-op, not a panic.
    release(&mut c, 42, &[0]);
    release(&mut c, 1, &[99]);
    assert_eq!(c, before);
}

#[test]
fn node_state_text() {
    assert_eq!(NodeState::Draining.as_str(), "draining");
    assert_eq!("down".parse::<NodeState>(), Ok(NodeState::Down));
    assert_eq!(
        "gone".parse::<NodeState>().unwrap_err().to_string(),
        "unknown node state \"gone\" (expected one of: ready, draining, down, lost)"
    );
}
