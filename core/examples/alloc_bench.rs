//! Admission-path figures for `allocate` on a view versus `ClusterIndex`:
//! 5,000 one-GPU machines on a 1,000-node × 8-GPU cluster with two models.
//! Prints timings only; correctness lives in the tests (here we just insist
//! both paths hand out the same GPUs, or the comparison would be meaningless).
//!
//! cargo run --release -p gantry-core --example alloc_bench

use gantry_core::alloc::{
    self, AllocationRequest, ClusterIndex, ClusterView, GpuView, GroupPolicy, NodeState, NodeView,
};
use std::hint::black_box;
use std::time::{Duration, Instant};

const NOW: i64 = 1_000_000;
const NODES: usize = 1_000;
const GPUS: u32 = 8;
const CALLS: usize = 5_000;

fn cluster() -> ClusterView {
    let nodes = (0..NODES)
        .map(|i| NodeView {
            id: i as i64 + 1,
            name: format!("node-{i:04}"),
            state: NodeState::Ready,
            last_heartbeat: NOW,
            gpus: (0..GPUS)
                .map(|g| GpuView {
                    index: g,
                    uuid: format!("GPU-{i}-{g}"),
                    model: if i % 2 == 0 { "A100" } else { "H100" }.to_string(),
                    // A few nodes start partly used, so packing has something to choose.
                    taken: i % 7 == 0 && g < 3,
                })
                .collect(),
        })
        .collect();
    ClusterView { nodes, heartbeat_timeout_secs: 30 }
}

fn requests() -> Vec<AllocationRequest> {
    let models = [Some("A100"), Some("H100"), None];
    (0..CALLS).map(|i| AllocationRequest { gpu_count: 1, model: models[i % 3].map(str::to_string) }).collect()
}

fn per_call(total: Duration) -> f64 {
    total.as_secs_f64() * 1e6 / CALLS as f64
}

fn main() {
    let policy = GroupPolicy {
        group_name: "bench".into(),
        gpu_quota: i64::MAX,
        gpus_in_use: 0,
        max_gpus_per_machine: 8,
        allowed_models: vec![],
    };
    let requests = requests();

    let mut view = cluster();
    let (mut view_alloc, mut view_apply) = (Duration::ZERO, Duration::ZERO);
    let mut from_view = Vec::with_capacity(CALLS);
    for r in &requests {
        let t = Instant::now();
        let a = black_box(alloc::allocate(&view, &policy, r, NOW)).expect("capacity for every call");
        view_alloc += t.elapsed();
        let t = Instant::now();
        alloc::apply(&mut view, &a);
        view_apply += t.elapsed();
        from_view.push(a);
    }

    let snapshot = cluster();
    let t = Instant::now();
    let mut index = black_box(ClusterIndex::new(&snapshot, NOW));
    let build = t.elapsed();
    let (mut index_alloc, mut index_apply) = (Duration::ZERO, Duration::ZERO);
    for (r, expected) in requests.iter().zip(&from_view) {
        let t = Instant::now();
        let a = black_box(index.allocate(&policy, r)).expect("capacity for every call");
        index_alloc += t.elapsed();
        let t = Instant::now();
        index.apply(&a);
        index_apply += t.elapsed();
        assert_eq!(&a, expected, "the index must decide as allocate does");
    }

    println!("cluster: {NODES} nodes x {GPUS} GPUs (2 models), {CALLS} one-GPU allocations with apply");
    println!("allocate on view:       {:>9.3} µs/call (+ apply {:.3} µs)", per_call(view_alloc), per_call(view_apply));
    println!(
        "ClusterIndex::allocate: {:>9.3} µs/call (+ apply {:.3} µs)",
        per_call(index_alloc),
        per_call(index_apply)
    );
    println!("ClusterIndex::new:      {:>9.3} ms", build.as_secs_f64() * 1e3);
    let index_total = per_call(index_alloc + index_apply);
    println!("index admits ~{:.0} allocate+apply per second in one thread", 1e6 / index_total);
}
