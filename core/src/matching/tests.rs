use super::*;
use std::collections::HashMap;

fn image(id: i64, region: &str, arch: Arch) -> RegionImage {
    RegionImage { id, region: region.into(), reference: format!("{region}/torch:{id}"), arch }
}

fn torch(id: i64, images: Vec<RegionImage>) -> MasterImage {
    MasterImage {
        id,
        name: format!("torch-{id}"),
        interpreter: "Python".into(),
        interpreter_version: "3.11".into(),
        framework: "PyTorch".into(),
        framework_version: "2.4".into(),
        region_images: images,
    }
}

fn node(name: &str, arch: Arch, model: &str, free: u32) -> NodeCapacity {
    NodeCapacity {
        name: name.into(),
        arch,
        free_gpus: BTreeMap::from([(model.to_string(), free)]),
        free_cpu_millis: 16_000,
        free_memory_mb: 65_536,
    }
}

fn region(code: &str, nodes: Vec<NodeCapacity>) -> RegionCapacity {
    RegionCapacity { code: code.into(), nodes }
}

fn request(gpus: u32, model: Option<&str>) -> TaskRequest {
    TaskRequest {
        framework: "pytorch".into(),
        framework_version: "2.4".into(),
        interpreter: "python".into(),
        interpreter_version: "3.11".into(),
        gpus,
        gpu_model: model.map(String::from),
        cpu_millis: 2000,
        memory_mb: 4096,
    }
}

fn placed(d: &Decision) -> &str {
    match &d.outcome {
        Outcome::Placed { region, .. } => region,
        other => panic!("not placed: {other:?}"),
    }
}

#[test]
fn no_matching_image_is_rejected_with_the_versions() {
    let catalogue = vec![torch(1, vec![image(10, "a", Arch::Amd64)])];
    let mut req = request(1, None);
    req.framework_version = "2.5".into();
    let d = decide(&catalogue, &[region("a", vec![node("n", Arch::Amd64, "A100", 4)])], &req, 1);
    assert!(d.image_set.is_empty());
    assert_eq!(
        d.outcome,
        Outcome::Rejected { reason: "no image matches framework pytorch 2.5 / interpreter python 3.11".into() }
    );
}

#[test]
fn no_region_with_room_leaves_the_task_pending_with_the_reason() {
    let catalogue = vec![torch(1, vec![image(10, "a", Arch::Amd64), image(11, "b", Arch::Amd64)])];
    let regions =
        [region("a", vec![node("n1", Arch::Amd64, "A100", 2)]), region("b", vec![node("n2", Arch::Amd64, "H100", 8)])];
    let d = decide(&catalogue, &regions, &request(4, Some("A100")), 1);
    assert_eq!(d.image_set, ["a", "b"]);
    assert!(d.resource_set.is_empty() && d.intersection.is_empty());
    assert_eq!(
        d.outcome,
        Outcome::Pending { reason: "regions with a matching image: a, b; none has 4 free A100 GPU(s), 2 CPU(s) and 4096 MB of memory on one ready node".into() }
    );
}

#[test]
fn room_only_where_no_image_is_pending_too() {
    let catalogue = vec![torch(1, vec![image(10, "a", Arch::Amd64)])];
    let regions = [region("a", vec![]), region("b", vec![node("n", Arch::Amd64, "A100", 8)])];
    let d = decide(&catalogue, &regions, &request(1, None), 3);
    assert_eq!((d.image_set.clone(), d.resource_set.clone()), (vec!["a".to_string()], vec!["b".to_string()]));
    assert!(matches!(d.outcome, Outcome::Pending { .. }));
}

#[test]
fn the_image_must_fit_the_node_architecture() {
    let catalogue = vec![torch(1, vec![image(10, "a", Arch::Arm64)])];
    let regions = [region("a", vec![node("x86", Arch::Amd64, "A100", 8)])];
    let d = decide(&catalogue, &regions, &request(1, None), 1);
    assert_eq!((d.image_set.len(), d.resource_set.len(), d.intersection.len()), (1, 1, 0));
    let Outcome::Pending { reason } = &d.outcome else { panic!("{:?}", d.outcome) };
    assert!(reason.contains("architecture"), "{reason}");
    // An amd64 image in the same region is chosen instead.
    let catalogue = vec![torch(1, vec![image(10, "a", Arch::Arm64), image(12, "a", Arch::Amd64)])];
    let d = decide(&catalogue, &regions, &request(1, None), 1);
    assert!(matches!(d.outcome, Outcome::Placed { region_image_id: 12, .. }), "{:?}", d.outcome);
}

#[test]
fn a_task_needing_an_image_only_one_region_has_always_lands_there() {
    let catalogue = vec![torch(1, vec![image(11, "b", Arch::Amd64)])];
    let regions =
        [region("a", vec![node("n1", Arch::Amd64, "A100", 8)]), region("b", vec![node("n2", Arch::Amd64, "A100", 8)])];
    for seed in 0..200 {
        assert_eq!(placed(&decide(&catalogue, &regions, &request(1, None), seed)), "b");
    }
}

#[test]
fn a_seed_replays_the_same_choice() {
    let catalogue = vec![torch(1, (0..5).map(|i| image(i, &format!("r{i}"), Arch::Amd64)).collect())];
    let regions: Vec<_> = (0..5).map(|i| region(&format!("r{i}"), vec![node("n", Arch::Amd64, "A100", 1)])).collect();
    let first = decide(&catalogue, &regions, &request(1, None), 99);
    assert_eq!(first, decide(&catalogue, &regions, &request(1, None), 99));
    assert_eq!(first.seed, 99);
    assert_eq!(placed(&first), first.shuffled[0]);
}

/// Across many seeds every region of the intersection is chosen about
/// equally often: chi-square over 4 degrees of freedom, 18.5 is the 0.1%
/// point.
#[test]
fn every_region_of_the_intersection_is_chosen_equally_often() {
    let catalogue = vec![torch(1, (0..5).map(|i| image(i, &format!("r{i}"), Arch::Amd64)).collect())];
    let regions: Vec<_> = (0..5).map(|i| region(&format!("r{i}"), vec![node("n", Arch::Amd64, "A100", 2)])).collect();
    let trials = 20_000u64;
    let mut counts: HashMap<String, u64> = HashMap::new();
    for seed in 0..trials {
        *counts
            .entry(placed(&decide(&catalogue, &regions, &request(1, None), seed.wrapping_mul(0x9E37_79B9))).to_string())
            .or_default() += 1;
    }
    assert_eq!(counts.len(), 5);
    let expected = trials as f64 / 5.0;
    let chi2: f64 = counts.values().map(|&c| (c as f64 - expected).powi(2) / expected).sum();
    assert!(chi2 < 18.5, "chi-square {chi2:.1}: {counts:?}");
}

#[test]
fn cpu_and_memory_count_too() {
    let catalogue = vec![torch(1, vec![image(10, "a", Arch::Amd64)])];
    let mut small = node("n", Arch::Amd64, "A100", 8);
    small.free_memory_mb = 1024;
    let d = decide(&catalogue, &[region("a", vec![small])], &request(1, None), 1);
    assert!(matches!(d.outcome, Outcome::Pending { .. }));
}

#[test]
fn a_task_naming_no_model_counts_only_the_models_its_group_may_use() {
    let catalogue = vec![torch(1, vec![image(10, "a", Arch::Amd64), image(11, "b", Arch::Amd64)])];
    let regions = vec![
        region("a", vec![node("a1", Arch::Amd64, "H100", 4)]),
        region("b", vec![node("b1", Arch::Amd64, "A100", 1)]),
    ];
    let a100 = vec!["A100".to_string()];
    for seed in 0..20 {
        assert_eq!(placed(&decide_for_group(&catalogue, &regions, &request(1, None), &a100, seed)), "b", "seed {seed}");
    }
    let d = decide_for_group(&catalogue, &regions, &request(2, None), &a100, 1);
    assert!(d.resource_set.is_empty(), "{d:?}");
    let Outcome::Pending { reason } = d.outcome else { panic!("{:?}", d.outcome) };
    assert!(reason.contains("2 free GPU(s) of one model the group may use (A100)"), "{reason}");
    // No list: every model counts.
    assert_eq!(decide_for_group(&catalogue, &regions, &request(2, None), &[], 1).resource_set, vec!["a".to_string()]);
}
