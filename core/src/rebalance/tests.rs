use super::*;

const NOW: i64 = 50_000;

fn settings() -> HotSettings {
    HotSettings { window_secs: 600, ..HotSettings::default() }
}

fn gpu(id: i64, holder: Option<i64>, util: f64, temp: f64, throttled: bool) -> GpuWindow {
    let samples = (NOW - 600..=NOW)
        .step_by(10)
        .map(|at| HotSample { at, util_pct: util, mem_pct: 10.0, temp_c: temp, throttled })
        .collect();
    // Held since the window began: long enough to be judged.
    GpuWindow {
        gpu_id: id,
        index: id as u32,
        model: "A100".into(),
        holder,
        held_since: holder.map(|_| NOW - 600),
        samples,
    }
}

fn machine(id: i64) -> MachineOnNode {
    MachineOnNode { id, name: format!("m{id}"), opted_out: false, last_moved_at: None }
}

fn with_memory(mut g: GpuWindow, mem_pct: f64) -> GpuWindow {
    g.samples.iter_mut().for_each(|s| s.mem_pct = mem_pct);
    g
}

#[test]
fn hot_and_contended_moves_to_the_coolest_free_gpu() {
    let gpus = vec![
        gpu(0, Some(1), 99.0, 88.0, false),
        gpu(1, Some(2), 97.0, 86.0, false),
        gpu(2, None, 0.0, 50.0, false),
        gpu(3, None, 0.0, 40.0, false),
    ];
    let v = decide_node("n1", &gpus, &[machine(1), machine(2)], &settings(), NOW);
    let Verdict::Move { machine_id, from, to, why } = &v[0] else { panic!("{v:?}") };
    assert_eq!(
        (*machine_id, from.as_slice(), to.as_slice()),
        (1, &[0][..], &[3][..]),
        "hottest machine first, to the coolest GPU"
    );
    assert!(
        why.contains("GPU 0 ran hot for 10 min 00 s")
            && why.contains("99 % utilisation")
            && why.contains("GPU 1 of another machine is also hot"),
        "{why}"
    );
    assert!(why.contains("moved to GPU 3 (40 °C)"), "{why}");
    // The second hot machine gets the next GPU, not the same one.
    assert!(matches!(&v[1], Verdict::Move { machine_id: 2, to, .. } if to == &vec![2]), "{v:?}");
}

#[test]
fn hot_alone_without_throttling_stays() {
    let gpus = vec![gpu(0, Some(1), 99.0, 88.0, false), gpu(1, None, 0.0, 40.0, false)];
    assert!(decide_node("n1", &gpus, &[machine(1)], &settings(), NOW).is_empty());
    let throttled = vec![gpu(0, Some(1), 99.0, 88.0, true), gpu(1, None, 0.0, 40.0, false)];
    let v = decide_node("n1", &throttled, &[machine(1)], &settings(), NOW);
    assert!(matches!(&v[..], [Verdict::Move { why, .. }] if why.contains("GPU 0 throttled")), "{v:?}");
}

#[test]
fn never_to_a_hotter_or_unknown_gpu_and_refusal_says_why() {
    let mut unknown = gpu(3, None, 0.0, 0.0, false);
    unknown.samples.clear();
    let gpus = vec![gpu(0, Some(1), 99.0, 70.0, true), gpu(2, None, 0.0, 75.0, false), unknown];
    let v = decide_node("n1", &gpus, &[machine(1)], &settings(), NOW);
    let [Verdict::Refuse { machine_id: 1, reason }] = &v[..] else { panic!("{v:?}") };
    assert!(
        reason.contains("0 free A100 GPU(s) cooler than 70 °C, 1 needed") && reason.contains("another node"),
        "{reason}"
    );
}

#[test]
fn one_cool_sample_or_a_gap_means_not_hot() {
    let s = settings();
    let mut g = gpu(0, Some(1), 99.0, 88.0, false);
    assert!(is_hot(&g, &s, NOW));
    g.samples[30].util_pct = 10.0;
    g.samples[30].temp_c = 60.0;
    assert!(!is_hot(&g, &s, NOW));
    let mut gap = gpu(0, Some(1), 99.0, 88.0, false);
    gap.samples.retain(|x| x.at < NOW - 400 || x.at > NOW - 200);
    assert!(!is_hot(&gap, &s, NOW));
}

#[test]
fn opted_out_or_disabled_is_never_moved() {
    let gpus = vec![gpu(0, Some(1), 99.0, 88.0, true), gpu(1, None, 0.0, 40.0, false)];
    let out = MachineOnNode { opted_out: true, ..machine(1) };
    assert!(decide_node("n1", &gpus, &[out], &settings(), NOW).is_empty());
    let off = HotSettings { enabled: false, ..settings() };
    assert!(decide_node("n1", &gpus, &[machine(1)], &off, NOW).is_empty());
}

#[test]
fn model_must_match() {
    let mut other = gpu(1, None, 0.0, 30.0, false);
    other.model = "H100".into();
    let gpus = vec![gpu(0, Some(1), 99.0, 88.0, true), other];
    assert!(matches!(&decide_node("n1", &gpus, &[machine(1)], &settings(), NOW)[..], [Verdict::Refuse { .. }]));
}

/// TensorFlow takes nearly all GPU memory at start: two idle notebooks
/// with full GPUs are not hot, so neither is each other's contention.
#[test]
fn full_memory_at_zero_utilisation_is_never_hot() {
    let idle_full = |id, holder| with_memory(gpu(id, holder, 0.0, 45.0, false), 99.0);
    let gpus = vec![
        idle_full(0, Some(1)),
        idle_full(1, Some(2)),
        gpu(2, None, 0.0, 30.0, false),
        gpu(3, None, 0.0, 30.0, false),
    ];
    assert!(gpus.iter().all(|g| !is_hot(g, &settings(), NOW)));
    assert_eq!(decide_node("n1", &gpus, &[machine(1), machine(2)], &settings(), NOW), vec![]);
    // Not even when it throttles: an idle GPU gains nothing from a move.
    let throttled = vec![with_memory(gpu(0, Some(1), 0.0, 45.0, true), 100.0), gpu(1, None, 0.0, 30.0, false)];
    assert_eq!(decide_node("n1", &throttled, &[machine(1)], &settings(), NOW), vec![]);
}

#[test]
fn temperature_alone_is_not_hot() {
    let gpus =
        vec![gpu(0, Some(1), 10.0, 95.0, true), gpu(1, Some(2), 10.0, 95.0, false), gpu(2, None, 0.0, 30.0, false)];
    assert_eq!(decide_node("n1", &gpus, &[machine(1), machine(2)], &settings(), NOW), vec![]);
}

#[test]
fn moved_within_the_cooldown_is_refused_and_leaves_the_gpus_to_others() {
    let gpus = vec![
        gpu(0, Some(1), 99.0, 88.0, false),
        gpu(1, Some(2), 97.0, 86.0, false),
        gpu(2, None, 0.0, 50.0, false),
        gpu(3, None, 0.0, 40.0, false),
    ];
    let recent = MachineOnNode { last_moved_at: Some(NOW - 3600), ..machine(1) };
    let v = decide_node("n1", &gpus, &[recent, machine(2)], &settings(), NOW);
    let [Verdict::Refuse { machine_id: 1, reason }, Verdict::Move { machine_id: 2, to, .. }] = &v[..] else {
        panic!("{v:?}")
    };
    assert!(reason.contains("moved 1 h 00 min ago") && reason.contains("within 6 h"), "{reason}");
    assert_eq!(to, &vec![3], "the coolest GPU goes to the machine that may move");
    // Once the cooldown is over it moves again.
    let old = MachineOnNode { last_moved_at: Some(NOW - MOVE_COOLDOWN_SECS), ..machine(1) };
    let v = decide_node("n1", &gpus, &[old, machine(2)], &settings(), NOW);
    assert!(matches!(&v[0], Verdict::Move { machine_id: 1, .. }), "{v:?}");
}

#[test]
fn settings_are_checked() {
    assert!(HotSettings::default().check().is_ok());
    assert!(HotSettings { util_pct: 120.0, ..settings() }.check().is_err());
    assert!(HotSettings { temp_c: 5.0, ..settings() }.check().unwrap_err().contains("temperature"));
    assert!(HotSettings { window_secs: 1, ..settings() }.check().unwrap_err().contains("window"));
}

/// A machine created (or restarted, restored, moved) inside the window has
/// not run hot for a whole window, even with hot samples since it got the
/// GPU and no gap over a quarter window: the window must have passed since.
/// Before, its samples from 3/4 of the window on were taken as enough.
#[test]
fn a_gpu_held_for_less_than_the_window_is_not_hot() {
    let s = settings();
    let held = |g: GpuWindow, since: i64| GpuWindow {
        held_since: Some(since),
        samples: g.samples.into_iter().filter(|x| x.at >= since).collect(),
        ..g
    };
    // Got the GPU 450 s ago (3/4 of the window): the first sample is 150 s
    // after the window's start, within the quarter-window gap.
    let recent = held(gpu(0, Some(1), 99.0, 88.0, false), NOW - 450);
    assert!(!is_hot(&recent, &s, NOW));
    assert_eq!(hot_span(&recent, &s, NOW), None);
    let gpus = vec![recent.clone(), gpu(1, Some(2), 97.0, 86.0, true), gpu(2, None, 0.0, 40.0, false)];
    let v = decide_node("n1", &gpus, &[machine(1), machine(2)], &s, NOW);
    assert!(
        v.iter().all(|v| !matches!(v, Verdict::Move { machine_id: 1, .. } | Verdict::Refuse { machine_id: 1, .. })),
        "{v:?}"
    );
    // One second short of the window is still too short.
    assert!(!is_hot(&held(gpu(0, Some(1), 99.0, 88.0, false), NOW - 599), &s, NOW));
    // Once it has held it for the whole window it is hot.
    assert!(is_hot(&held(gpu(0, Some(1), 99.0, 88.0, false), NOW - 600), &s, NOW));
    assert!(is_hot(&held(gpu(0, Some(1), 99.0, 88.0, false), NOW - 5000), &s, NOW));
    // A held GPU whose holder's start is not known is never hot.
    assert!(!is_hot(&GpuWindow { held_since: None, ..gpu(0, Some(1), 99.0, 88.0, false) }, &s, NOW));
    // A free GPU has no holder to wait for.
    assert!(is_hot(&gpu(3, None, 99.0, 88.0, false), &s, NOW));
}

/// The reason states how long the samples cover, not the configured
/// window: samples from 140 s after the window's start (within the
/// quarter-window gap) to now cover 7 min 40 s.
#[test]
fn the_verdict_states_the_span_its_samples_cover() {
    let s = settings();
    let mut short = gpu(0, Some(1), 99.0, 88.0, true);
    short.samples.retain(|x| x.at >= NOW - 460);
    let gpus = vec![short, gpu(1, None, 0.0, 40.0, false)];
    let v = decide_node("n1", &gpus, &[machine(1)], &s, NOW);
    let [Verdict::Move { why, .. }] = &v[..] else { panic!("{v:?}") };
    assert!(why.contains("GPU 0 ran hot for 7 min 40 s (mean"), "{why}");
    assert!(!why.contains("10 min"), "{why}");
}
