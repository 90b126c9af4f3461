//! The index against `allocate` itself: random clusters (including malformed
//! ones), random interleaved requests, releases and outside changes, compared
//! at every step with `allocate` over the view updated the plain way.

use super::*;
use crate::alloc::proptests::{arb_cluster, arb_policy, arb_request, MODELS, NOW};
use crate::alloc::{allocate, apply, release, GpuView};
use proptest::prelude::*;
use proptest::sample::Index;

/// Oddities a real snapshot should not have but the index must still mirror.
#[derive(Debug, Clone)]
enum Defect {
    /// Lists a node again under the same id, perhaps renamed, down, or with
    /// its GPUs of another model (so listing order and model order compete).
    DuplicateNode { node: Index, rename: Option<u8>, down: bool, model: Option<usize> },
    /// Lists an existing GPU index again with another model and taken flag.
    DuplicateGpu { node: Index, gpu: Index, model: usize, taken: bool },
}

fn arb_defect() -> impl Strategy<Value = Defect> {
    // Mostly the same name, so the copy ties with the original on (name, id).
    let rename = prop::option::weighted(0.2, 0u8..3);
    prop_oneof![
        (any::<Index>(), rename, prop::bool::weighted(0.2), prop::option::of(0..MODELS.len()))
            .prop_map(|(node, rename, down, model)| Defect::DuplicateNode { node, rename, down, model }),
        (any::<Index>(), any::<Index>(), 0..MODELS.len(), any::<bool>())
            .prop_map(|(node, gpu, model, taken)| Defect::DuplicateGpu { node, gpu, model, taken }),
    ]
}

fn arb_view() -> impl Strategy<Value = ClusterView> {
    let defects = prop_oneof![1 => Just(Vec::new()), 1 => prop::collection::vec(arb_defect(), 1..4)];
    (arb_cluster(), defects).prop_map(|(mut c, defects)| {
        for defect in defects {
            match defect {
                Defect::DuplicateNode { node, rename, down, model } => {
                    let mut copy = c.nodes[node.index(c.nodes.len())].clone();
                    if let Some(name) = rename {
                        copy.name = format!("node-{name}");
                    }
                    if down {
                        copy.state = crate::alloc::NodeState::Down;
                    }
                    for gpu in copy.gpus.iter_mut().filter(|_| model.is_some()) {
                        gpu.model = MODELS[model.unwrap_or(0)].to_string();
                    }
                    c.nodes.push(copy);
                }
                Defect::DuplicateGpu { node, gpu, model, taken } => {
                    let n = node.index(c.nodes.len());
                    let gpus = &mut c.nodes[n].gpus;
                    if !gpus.is_empty() {
                        let index = gpus[gpu.index(gpus.len())].index;
                        let uuid = format!("dup-{n}-{index}");
                        gpus.push(GpuView { index, uuid, model: MODELS[model].to_string(), taken });
                    }
                }
            }
        }
        c
    })
}

#[derive(Debug, Clone)]
enum Step {
    /// Each request under its own policy, so many reach placement.
    Alloc(GroupPolicy, AllocationRequest),
    /// Releases one of the allocations made so far, if any.
    Release(Index),
    /// Someone else frees or takes arbitrary indexes, on any node (schedulable
    /// or not) or on an unknown id, as a machine deleted or made elsewhere would.
    Outside { node: Option<Index>, indexes: Vec<u32>, take: bool },
}

fn arb_steps() -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        6 => (arb_policy(), arb_request()).prop_map(|(p, r)| Step::Alloc(p, r)),
        2 => any::<Index>().prop_map(Step::Release),
        1 => (prop::option::weighted(0.9, any::<Index>()), prop::collection::vec(0u32..10, 0..4), any::<bool>())
            .prop_map(|(node, indexes, take)| Step::Outside { node, indexes, take }),
    ];
    prop::collection::vec(step, 1..40)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn index_decides_exactly_as_allocate(mut view in arb_view(), steps in arb_steps()) {
        let mut index = ClusterIndex::new(&view, NOW);
        prop_assert_eq!(&index.to_view(), &view);
        let mut held: Vec<Allocation> = Vec::new();
        for step in steps {
            match step {
                Step::Alloc(p, r) => {
                    let expected = allocate(&view, &p, &r, NOW);
                    prop_assert_eq!(&index.allocate(&p, &r), &expected, "policy {:?} request {:?}", p, r);
                    if let Ok(a) = expected {
                        apply(&mut view, &a);
                        index.apply(&a);
                        held.push(a);
                    }
                }
                Step::Release(i) if !held.is_empty() => {
                    let a = held.swap_remove(i.index(held.len()));
                    let indexes: Vec<u32> = a.gpus.iter().map(|g| g.index).collect();
                    release(&mut view, a.node_id, &indexes);
                    index.release(a.node_id, &indexes);
                }
                Step::Release(_) => {}
                Step::Outside { node, indexes, take } => {
                    let id = node.map_or(-7, |n| view.nodes[n.index(view.nodes.len())].id);
                    if take {
                        let gpus = indexes
                            .iter()
                            .map(|&index| GpuView { index, uuid: String::new(), model: String::new(), taken: false })
                            .collect();
                        let a = Allocation { node_id: id, node_name: String::new(), gpus, model: String::new() };
                        apply(&mut view, &a);
                        index.apply(&a);
                    } else {
                        release(&mut view, id, &indexes);
                        index.release(id, &indexes);
                    }
                }
            }
            prop_assert_eq!(&index.to_view(), &view);
        }
        // A rebuild from the updated view agrees with the incrementally kept index.
        let rebuilt = ClusterIndex::new(&view, NOW);
        for n in 1..=9 {
            let r = AllocationRequest { gpu_count: n, model: None };
            let p = GroupPolicy {
                group_name: "g".into(),
                gpu_quota: 100,
                gpus_in_use: 0,
                max_gpus_per_machine: 9,
                allowed_models: vec![],
            };
            prop_assert_eq!(rebuilt.allocate(&p, &r), index.allocate(&p, &r));
        }
    }
}
