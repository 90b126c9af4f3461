use super::*;
use proptest::prelude::*;

const NOW: i64 = 50_000;

fn arb_gpu(id: i64) -> impl Strategy<Value = GpuWindow> {
    (
        prop::option::of(1i64..4),
        0.0f64..100.0,
        0.0f64..=100.0,
        30.0f64..100.0,
        any::<bool>(),
        0usize..3,
        prop::bool::weighted(0.8),
        prop::option::of(NOW - 1200..=NOW),
    )
        .prop_map(move |(holder, util, mem, temp, throttled, model, dense, held_since)| {
            let step = if dense { 10 } else { 250 };
            // Readings are attributed to the holder only since it got the GPU.
            let since = if holder.is_some() { held_since.unwrap_or(NOW - 600) } else { NOW - 600 };
            let samples = (since.max(NOW - 600)..=NOW)
                .step_by(step)
                .enumerate()
                .map(|(i, at)| HotSample {
                    at,
                    util_pct: util,
                    mem_pct: mem,
                    temp_c: temp + (i % 3) as f64,
                    throttled: throttled && i % 7 == 0,
                })
                .collect();
            GpuWindow {
                gpu_id: id,
                index: id as u32,
                model: ["A", "B", "C"][model].into(),
                holder,
                held_since,
                samples,
            }
        })
}

fn arb_node() -> impl Strategy<Value = Vec<GpuWindow>> {
    (1usize..9).prop_flat_map(|n| (0..n as i64).map(arb_gpu).collect::<Vec<_>>())
}

/// Three machines; each may be opted out and may have been moved at some
/// time up to twice the cooldown ago (or never).
fn arb_machines() -> impl Strategy<Value = Vec<MachineOnNode>> {
    prop::collection::vec((any::<bool>(), prop::option::of(0..2 * MOVE_COOLDOWN_SECS)), 3).prop_map(|v| {
        v.into_iter()
            .zip(1..)
            .map(|((opted_out, ago), id)| MachineOnNode {
                id,
                name: format!("m{id}"),
                opted_out,
                last_moved_at: ago.map(|a| NOW - a),
            })
            .collect()
    })
}

proptest! {
    /// Never to a hotter GPU: every target is free, of the same model, and
    /// cooler than every GPU the machine leaves; no GPU is given twice; a
    /// machine moved within the cooldown is never moved.
    #[test]
    fn never_moves_to_a_hotter_gpu(gpus in arb_node(), machines in arb_machines()) {
        let s = HotSettings { window_secs: 600, util_pct: 60.0, temp_c: 80.0, ..HotSettings::default() };
        let verdicts = decide_node("n", &gpus, &machines, &s, NOW);
        let mut given = std::collections::BTreeSet::new();
        for v in &verdicts {
            if let Verdict::Move { machine_id, from, to, .. } = v {
                let m = &machines[*machine_id as usize - 1];
                prop_assert!(!m.opted_out);
                prop_assert!(m.last_moved_at.is_none_or(|at| NOW - at >= MOVE_COOLDOWN_SECS), "moved within the cooldown: {:?}", m);
                prop_assert_eq!(from.len(), to.len());
                let by_id = |id: &i64| gpus.iter().find(|g| g.gpu_id == *id).unwrap();
                for t in to {
                    prop_assert!(given.insert(*t), "GPU {} given twice", t);
                    let target = by_id(t);
                    prop_assert!(target.holder.is_none());
                    for f in from {
                        let source = by_id(f);
                        prop_assert_eq!(&source.model, &target.model);
                        prop_assert!(mean_temp(target, &s, NOW).unwrap() < mean_temp(source, &s, NOW).unwrap());
                    }
                }
                prop_assert!(from.iter().any(|f| is_hot(by_id(f), &s, NOW)));
            }
        }
    }

    /// Nothing is judged hot before its machine has held the GPU for the
    /// whole window, and a verdict's reason never claims more than its
    /// samples cover.
    #[test]
    fn never_judged_hot_before_a_whole_window_held(gpus in arb_node(), machines in arb_machines()) {
        let s = HotSettings { window_secs: 600, util_pct: 60.0, temp_c: 80.0, ..HotSettings::default() };
        for g in &gpus {
            if g.holder.is_some() && is_hot(g, &s, NOW) {
                prop_assert!(g.held_since.is_some_and(|at| at <= NOW - s.window_secs), "{:?}", g);
            }
            if let Some(span) = hot_span(g, &s, NOW) {
                prop_assert!((0..=s.window_secs).contains(&span));
            }
        }
        for v in decide_node("n", &gpus, &machines, &s, NOW) {
            let (Verdict::Move { machine_id, why: reason, .. } | Verdict::Refuse { machine_id, reason }) = v;
            prop_assert!(gpus.iter().any(|g| g.holder == Some(machine_id)
                && g.held_since.is_some_and(|at| at <= NOW - s.window_secs)), "{}", reason);
        }
    }

    /// Below the utilisation threshold nothing is hot and nothing happens,
    /// whatever the memory use, temperature or throttling (samples stay
    /// under 100 %).
    #[test]
    fn below_the_utilisation_threshold_nothing_moves(gpus in arb_node(), machines in arb_machines()) {
        let s = HotSettings { window_secs: 600, util_pct: 100.0, mem_pct: 50.0, temp_c: 40.0, ..HotSettings::default() };
        prop_assert!(gpus.iter().all(|g| !is_hot(g, &s, NOW)));
        prop_assert_eq!(decide_node("n", &gpus, &machines, &s, NOW), vec![]);
    }
}
