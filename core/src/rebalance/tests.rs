use super::*;

const NOW: i64 = 50_000;

fn settings() -> HotSettings {
    HotSettings { window_secs: 600, ..HotSettings::default() }
}

fn gpu(id: i64, holder: Option<i64>, util: f64, temp: f64, throttled: bool) -> GpuWindow {
    let samples = (NOW - 600..=NOW).step_by(10).map(|at| HotSample { at, util_pct: util, mem_pct: 10.0, temp_c: temp, throttled }).collect();
    GpuWindow { gpu_id: id, index: id as u32, model: "A100".into(), holder, samples }
}

fn machine(id: i64) -> MachineOnNode {
    MachineOnNode { id, name: format!("m{id}"), opted_out: false }
}

#[test]
fn hot_and_contended_moves_to_the_coolest_free_gpu() {
    let gpus = vec![gpu(0, Some(1), 99.0, 88.0, false), gpu(1, Some(2), 97.0, 86.0, false), gpu(2, None, 0.0, 50.0, false), gpu(3, None, 0.0, 40.0, false)];
    let v = decide_node("n1", &gpus, &[machine(1), machine(2)], &settings(), NOW);
    let Verdict::Move { machine_id, from, to, why } = &v[0] else { panic!("{v:?}") };
    assert_eq!((*machine_id, from.as_slice(), to.as_slice()), (1, &[0][..], &[3][..]), "hottest machine first, to the coolest GPU");
    assert!(why.contains("GPU 0 ran hot for 10 min") && why.contains("99 % utilisation") && why.contains("GPU 1 of another machine is also hot"), "{why}");
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
    assert!(reason.contains("0 free A100 GPU(s) cooler than 70 °C, 1 needed") && reason.contains("another node"), "{reason}");
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

#[test]
fn settings_are_checked() {
    assert!(HotSettings::default().check().is_ok());
    assert!(HotSettings { util_pct: 120.0, ..settings() }.check().is_err());
    assert!(HotSettings { temp_c: 5.0, ..settings() }.check().unwrap_err().contains("temperature"));
    assert!(HotSettings { window_secs: 1, ..settings() }.check().unwrap_err().contains("window"));
}
