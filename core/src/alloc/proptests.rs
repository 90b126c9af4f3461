//! Random clusters and random request sequences, checked against a
//! brute-force oracle written independently of `allocate`.

use super::*;
use proptest::prelude::*;
use proptest::sample::Index;

pub(crate) const NOW: i64 = 1_000_000;
/// The last one is never on any node, to exercise "no such GPUs at all".
pub(crate) const MODELS: [&str; 4] = ["A100", "H100", "L4", "V100"];

pub(crate) fn arb_cluster() -> impl Strategy<Value = ClusterView> {
    (1usize..=3, 10i64..=60)
        .prop_flat_map(|(models, timeout)| {
            let gpu = (0..models, prop::bool::weighted(0.3));
            // States 0-2 ready, 3 draining, 4 down: mostly usable nodes.
            let node = (prop::collection::vec(gpu, 0..=8), 0u8..5, -5i64..=2 * timeout, 0u8..3);
            (prop::collection::vec(node, 1..=8), Just(timeout))
        })
        .prop_map(|(nodes, timeout)| ClusterView {
            heartbeat_timeout_secs: timeout,
            nodes: nodes
                .into_iter()
                .enumerate()
                .map(|(i, (gpus, state, age, name))| NodeView {
                    id: i as i64 + 1,
                    // Few names, so ties on name are common and id must decide.
                    name: format!("node-{name}"),
                    state: match state {
                        0..=2 => NodeState::Ready,
                        3 => NodeState::Draining,
                        _ => NodeState::Down,
                    },
                    last_heartbeat: NOW - age,
                    gpus: gpus
                        .into_iter()
                        .enumerate()
                        .map(|(g, (model, taken))| GpuView {
                            index: g as u32,
                            uuid: format!("GPU-{i}-{g}"),
                            model: MODELS[model].to_string(),
                            taken,
                        })
                        .collect(),
                })
                .collect(),
        })
}

pub(crate) fn arb_policy() -> impl Strategy<Value = GroupPolicy> {
    let max = prop_oneof![1 => Just(0i64), 3 => 1i64..=3, 12 => 4i64..=8];
    let allowed = prop::collection::vec(prop::bool::weighted(0.4), MODELS.len());
    (0i64..=24, 0i64..=12, max, allowed).prop_map(|(quota, in_use, max, pick)| GroupPolicy {
        group_name: "g".to_string(),
        gpu_quota: quota,
        // Sometimes above quota, as after an admin lowered it.
        gpus_in_use: in_use.min(quota + 2),
        max_gpus_per_machine: max,
        allowed_models: MODELS.iter().zip(pick).filter(|(_, p)| *p).map(|(m, _)| m.to_string()).collect(),
    })
}

pub(crate) fn arb_request() -> impl Strategy<Value = AllocationRequest> {
    // Mostly small requests, so that many pass the group's rules and reach placement.
    let count = prop_oneof![1 => Just(0u32), 10 => 1u32..=3, 3 => 4u32..=9];
    let model = prop::option::weighted(0.5, 0usize..MODELS.len());
    (count, model).prop_map(|(n, m)| AllocationRequest { gpu_count: n, model: m.map(|m| MODELS[m].to_string()) })
}

#[derive(Debug, Clone)]
enum Op {
    Alloc(AllocationRequest),
    /// Releases one of the allocations held so far, if any.
    Release(Index),
}

fn arb_ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![3 => arb_request().prop_map(Op::Alloc), 1 => any::<Index>().prop_map(Op::Release)];
    prop::collection::vec(op, 1..30)
}

/// Free GPUs of `model` on every node allocate may use, counted the simple way.
fn free_counts<'c>(
    c: &'c ClusterView,
    p: &GroupPolicy,
    r: &AllocationRequest,
) -> Vec<(usize, &'c NodeView, &'static str)> {
    let mut out = Vec::new();
    for n in &c.nodes {
        let fresh = NOW - n.last_heartbeat <= c.heartbeat_timeout_secs;
        if n.state != NodeState::Ready || !fresh {
            continue;
        }
        for m in MODELS {
            let ok = match &r.model {
                Some(want) => want == m,
                None => p.allowed_models.is_empty() || p.allowed_models.iter().any(|a| a == m),
            };
            let count = n.gpus.iter().filter(|g| g.model == m && !g.taken).count();
            if ok && count > 0 {
                out.push((count, n, m));
            }
        }
    }
    out
}

/// The name of the first rule the request breaks, by direct reading of the spec.
fn oracle(c: &ClusterView, p: &GroupPolicy, r: &AllocationRequest) -> &'static str {
    let n = i64::from(r.gpu_count);
    let model_ok = r.model.as_ref().is_none_or(|m| p.allowed_models.is_empty() || p.allowed_models.contains(m));
    if n == 0 {
        "zero"
    } else if n > p.max_gpus_per_machine {
        "machine limit"
    } else if !model_ok {
        "model"
    } else if p.gpu_quota - p.gpus_in_use < n {
        "quota"
    } else if free_counts(c, p, r).iter().all(|(count, _, _)| *count < r.gpu_count as usize) {
        "capacity"
    } else {
        "ok"
    }
}

fn rule_of(result: &Result<Allocation, Refusal>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(Refusal::ZeroGpus) => "zero",
        Err(Refusal::OverMachineLimit { .. }) => "machine limit",
        Err(Refusal::ModelNotAllowed { .. }) => "model",
        Err(Refusal::OverQuota { .. }) => "quota",
        // Only `check_ceilings` says this; the oracle never expects it here.
        Err(Refusal::OverQuotaCeiling { .. }) => "ceiling",
        Err(Refusal::NoCapacity { .. }) => "capacity",
    }
}

/// Checks one decision against the oracle; returns it for the caller to apply.
fn check(c: &ClusterView, p: &GroupPolicy, r: &AllocationRequest) -> Result<Option<Allocation>, TestCaseError> {
    let before = c.clone();
    let result = allocate(c, p, r, NOW);
    prop_assert_eq!(c, &before);
    prop_assert_eq!(rule_of(&result), oracle(c, p, r), "{:?}", result);
    let candidates = free_counts(c, p, r);
    match result {
        Err(Refusal::NoCapacity { asked, model, best_free }) => {
            prop_assert_eq!(asked, r.gpu_count);
            prop_assert_eq!(&model, &r.model);
            let brute_best = candidates.iter().map(|(count, _, _)| *count).max().unwrap_or(0);
            prop_assert_eq!(best_free as usize, brute_best);
            Ok(None)
        }
        Err(_) => Ok(None),
        Ok(a) => {
            let node = c.nodes.iter().find(|n| n.id == a.node_id).expect("allocated on a known node");
            prop_assert_eq!(&a.node_name, &node.name);
            prop_assert!(node.is_schedulable(NOW, c.heartbeat_timeout_secs));
            prop_assert!(p.allows_model(&a.model));
            prop_assert!(r.model.as_ref().is_none_or(|m| *m == a.model));
            prop_assert_eq!(a.gpus.len(), r.gpu_count as usize);
            prop_assert!(i64::from(r.gpu_count) <= p.max_gpus_per_machine);
            prop_assert!(p.gpus_in_use + i64::from(r.gpu_count) <= p.gpu_quota);
            for (i, g) in a.gpus.iter().enumerate() {
                prop_assert_eq!(&g.model, &a.model);
                prop_assert!(node.gpus.contains(g), "allocated GPU is the node's, as it was: {:?}", g);
                prop_assert!(!g.taken);
                prop_assert!(i == 0 || a.gpus[i - 1].index < g.index, "distinct and sorted");
            }
            // Packing: nothing that fits is fuller, or equally full and earlier in the tie order.
            let fits = candidates.iter().filter(|(count, _, _)| *count >= r.gpu_count as usize);
            let best = fits.map(|(count, n, m)| (*count, n.name.as_str(), n.id, *m)).min().expect("something fits");
            let chosen_free = node.gpus.iter().filter(|g| g.model == a.model && !g.taken).count();
            prop_assert_eq!(best, (chosen_free, a.node_name.as_str(), a.node_id, a.model.as_str()));
            // Lowest indexes: every free GPU of the model left behind has a higher index.
            let last = a.gpus.last().map(|g| g.index).unwrap_or(0);
            let skipped = node.gpus.iter().filter(|g| g.model == a.model && !g.taken && !a.gpus.contains(g));
            for g in skipped {
                prop_assert!(g.index > last, "skipped lower free GPU {:?}", g);
            }
            Ok(Some(a))
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn single_decisions_follow_every_rule(c in arb_cluster(), p in arb_policy(), r in arb_request()) {
        check(&c, &p, &r)?;
    }

    #[test]
    fn decisions_do_not_depend_on_listing_order(c in arb_cluster(), p in arb_policy(), r in arb_request()) {
        let mut reversed = c.clone();
        reversed.nodes.reverse();
        for n in &mut reversed.nodes {
            n.gpus.reverse();
        }
        prop_assert_eq!(allocate(&c, &p, &r, NOW), allocate(&reversed, &p, &r, NOW));
    }

    /// "Never" means never: what `check_ceilings` refuses no release of
    /// GPUs lets through, and what it lets through is admitted once the
    /// group holds nothing and a node has the GPUs free.
    #[test]
    fn ceilings_part_never_from_not_now(p in arb_policy(), r in arb_request()) {
        let idle = GroupPolicy { gpus_in_use: 0, ..p.clone() };
        let model = r.model.clone().or_else(|| p.allowed_models.first().cloned()).unwrap_or_else(|| MODELS[0].to_string());
        let gpus = (0..r.gpu_count).map(|i| GpuView { index: i, uuid: format!("GPU-{i}"), model: model.clone(), taken: false }).collect();
        let node = NodeView { id: 1, name: "roomy".into(), state: NodeState::Ready, last_heartbeat: NOW, gpus };
        let roomy = ClusterView { nodes: vec![node], heartbeat_timeout_secs: 30 };
        match check_ceilings(&p, &r) {
            Err(never) => {
                prop_assert!(allocate(&roomy, &idle, &r, NOW).is_err(), "{never}");
                prop_assert!(check_ceilings(&idle, &r).is_err(), "in use does not matter");
            }
            Ok(()) => prop_assert!(allocate(&roomy, &idle, &r, NOW).is_ok()),
        }
    }

    #[test]
    fn sequences_never_exceed_quota_or_double_book(
        mut c in arb_cluster(),
        mut p in arb_policy(),
        ops in arb_ops(),
    ) {
        let mut held: Vec<Allocation> = Vec::new();
        let quota_was_exceeded = p.gpus_in_use > p.gpu_quota;
        for op in ops {
            match op {
                Op::Alloc(r) => {
                    if let Some(a) = check(&c, &p, &r)? {
                        let node = c.nodes.iter().find(|n| n.id == a.node_id).unwrap();
                        for g in &a.gpus {
                            let now = node.gpus.iter().find(|x| x.index == g.index).unwrap();
                            prop_assert!(!now.taken, "apply would take a held GPU {:?}", g);
                        }
                        apply(&mut c, &a);
                        p.gpus_in_use += a.gpus.len() as i64;
                        prop_assert!(p.gpus_in_use <= p.gpu_quota, "{} > {}", p.gpus_in_use, p.gpu_quota);
                        held.push(a);
                    }
                }
                Op::Release(i) if !held.is_empty() => {
                    let a = held.swap_remove(i.index(held.len()));
                    let idx: Vec<u32> = a.gpus.iter().map(|g| g.index).collect();
                    release(&mut c, a.node_id, &idx);
                    p.gpus_in_use -= a.gpus.len() as i64;
                    let node = c.nodes.iter().find(|n| n.id == a.node_id).unwrap();
                    prop_assert!(node.gpus.iter().filter(|g| idx.contains(&g.index)).all(|g| !g.taken));
                }
                Op::Release(_) => {}
            }
            if !quota_was_exceeded {
                prop_assert!(p.gpus_in_use <= p.gpu_quota, "{} > {}", p.gpus_in_use, p.gpu_quota);
            }
            // Every GPU a live allocation holds is marked taken, and none is held twice.
            let mut seen = std::collections::BTreeSet::new();
            for a in &held {
                for g in &a.gpus {
                    prop_assert!(seen.insert((a.node_id, g.index)), "held twice: {:?}", g);
                    let node = c.nodes.iter().find(|n| n.id == a.node_id).unwrap();
                    prop_assert!(node.gpus.iter().any(|x| x.index == g.index && x.taken));
                }
            }
        }
    }
}
