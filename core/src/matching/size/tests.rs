use super::*;
use proptest::prelude::*;

fn node(name: &str, gpus: &[(&str, u32)], cpus: i64, memory_mb: i64) -> NodeSize {
    NodeSize {
        name: name.into(),
        gpus: gpus.iter().map(|(m, n)| (m.to_string(), *n)).collect(),
        cpu_millis: cpus * 1000,
        memory_mb,
    }
}

fn need(gpus: u32, model: Option<&str>, cpus: i64, memory_mb: i64) -> Need {
    Need { gpus, gpu_model: model.map(String::from), cpu_millis: cpus * 1000, memory_mb }
}

const EVERYWHERE: &str = "in any region";

#[test]
fn a_node_big_enough_when_idle_is_enough() {
    let nodes = [node("a", &[("A100", 4)], 16, 65_536)];
    assert_eq!(never_fits(&nodes, &need(4, Some("A100"), 16, 65_536), &[], EVERYWHERE), None);
    assert_eq!(never_fits(&nodes, &need(2, None, 1, 1024), &[], EVERYWHERE), None);
}

#[test]
fn too_many_gpus_of_the_model_is_never() {
    let nodes = [node("a", &[("A100", 4)], 16, 65_536), node("b", &[("A100", 2), ("H100", 8)], 64, 1 << 20)];
    let why = never_fits(&nodes, &need(5, Some("A100"), 1, 1024), &[], "in region east").unwrap();
    assert!(why.starts_with("no node in region east could hold it"), "{why}");
    assert!(why.contains("asks for 5 A100 GPU(s), 1 CPU(s) and 1024 MB of memory"), "{why}");
    assert!(
        why.contains("the most a node there has is 4 A100 GPU(s) (a), 64 CPU(s) (b) and 1048576 MB of memory (b)"),
        "{why}"
    );
    assert!(!why.contains("no one node"), "{why}");
}

#[test]
fn a_model_no_node_has_is_never() {
    let nodes = [node("a", &[("A100", 4)], 16, 65_536)];
    let why = never_fits(&nodes, &need(1, Some("a100"), 1, 1024), &[], EVERYWHERE).unwrap();
    assert!(why.contains("the most a node there has is 0 a100 GPU(s)"), "{why}");
}

#[test]
fn cpu_or_memory_beyond_every_node_is_never() {
    let nodes = [node("a", &[("A100", 4)], 16, 65_536)];
    let why = never_fits(&nodes, &need(1, None, 32, 1024), &[], EVERYWHERE).unwrap();
    assert!(why.contains("32 CPU(s)") && why.contains("16 CPU(s) (a)"), "{why}");
    let why = never_fits(&nodes, &need(1, None, 1, 100_000), &[], EVERYWHERE).unwrap();
    assert!(why.contains("100000 MB") && why.contains("65536 MB of memory (a)"), "{why}");
}

#[test]
fn enough_of_each_but_not_on_one_node_says_so() {
    // a has the GPUs, b the CPUs.
    let nodes = [node("a", &[("A100", 8)], 4, 65_536), node("b", &[("A100", 1)], 64, 65_536)];
    let why = never_fits(&nodes, &need(8, Some("A100"), 32, 1024), &[], EVERYWHERE).unwrap();
    assert!(why.ends_with("; no one node has all of it"), "{why}");
}

#[test]
fn a_node_without_a_declared_size_is_never_counted_out_on_cpu_or_memory() {
    let nodes = [node("small", &[("A100", 2)], 2, 1024), node("unknown", &[("A100", 2)], 0, 0)];
    assert_eq!(never_fits(&nodes, &need(2, Some("A100"), 128, 1 << 30), &[], EVERYWHERE), None);
    let why = never_fits(&nodes, &need(3, Some("A100"), 1, 1024), &[], EVERYWHERE).unwrap();
    assert!(why.contains("CPUs and memory without limit (unknown declares no size)"), "{why}");
}

#[test]
fn any_model_means_a_model_the_group_may_use() {
    let nodes = [node("a", &[("A100", 2), ("L4", 8)], 16, 65_536)];
    let allowed = ["A100".to_string()];
    assert_eq!(never_fits(&nodes, &need(8, None, 1, 1024), &[], EVERYWHERE), None);
    let why = never_fits(&nodes, &need(8, None, 1, 1024), &allowed, EVERYWHERE).unwrap();
    assert!(why.contains("8 GPU(s) of one model the group may use (A100)") && why.contains("has is 2 GPU(s)"), "{why}");
}

#[test]
fn no_node_at_all_is_left_to_wait() {
    assert_eq!(never_fits(&[], &need(1, None, 1, 1024), &[], EVERYWHERE), None);
}

#[test]
fn a_model_is_known_only_when_spelt_exactly() {
    let models: BTreeSet<String> = ["A100", "H100"].iter().map(|m| m.to_string()).collect();
    assert_eq!(unknown_model("A100", &models), None);
    assert_eq!(unknown_model("anything", &BTreeSet::new()), None, "no GPU yet: nothing to compare with");
    let why = unknown_model("a100", &models).unwrap();
    assert!(
        why.contains("\"a100\"")
            && why.contains("the cluster has A100, H100")
            && why.ends_with("did you mean \"A100\"?"),
        "{why}"
    );
    let why = unknown_model("V100", &models).unwrap();
    assert!(why.ends_with("the cluster has A100, H100"), "{why}");
}

const MODELS: [&str; 3] = ["A100", "H100", "L4"];

fn arb_node() -> impl Strategy<Value = NodeSize> {
    (prop::collection::btree_map(0usize..3, 0u32..=8, 0..=3), prop_oneof![Just(0i64), 1i64..=64], 0i64..=8).prop_map(
        |(gpus, cpus, mem)| NodeSize {
            name: format!("n{cpus}-{mem}"),
            gpus: gpus.into_iter().map(|(m, n)| (MODELS[m].to_string(), n)).collect(),
            cpu_millis: cpus * 1000,
            memory_mb: if cpus == 0 { 0 } else { mem * 8192 },
        },
    )
}

fn arb_need() -> impl Strategy<Value = Need> {
    (0u32..=10, prop::option::of(0usize..4), 100i64..=80_000, 64i64..=80_000).prop_map(
        |(gpus, model, cpu_millis, memory_mb)| Need {
            gpus,
            // Index 3 is a model no node has.
            gpu_model: model.map(|m| MODELS.get(m).copied().unwrap_or("V100").to_string()),
            cpu_millis,
            memory_mb,
        },
    )
}

/// Written apart from `could_hold`: a node holds it when each of GPUs of
/// one (wanted, allowed) model, CPU and memory suffices.
fn oracle(nodes: &[NodeSize], need: &Need, allowed: &[String]) -> bool {
    nodes.iter().any(|n| {
        let gpu_ok = n.gpus.iter().any(|(m, c)| {
            let wanted = match &need.gpu_model {
                Some(w) => w == m,
                None => allowed.is_empty() || allowed.contains(m),
            };
            wanted && *c >= need.gpus
        }) || need.gpus == 0;
        let size_ok = n.cpu_millis == 0 || (n.cpu_millis >= need.cpu_millis && n.memory_mb >= need.memory_mb);
        gpu_ok && size_ok
    })
}

proptest! {
    #[test]
    fn never_exactly_when_no_node_could_hold_it(nodes in prop::collection::vec(arb_node(), 0..5), need in arb_need(), allow_a100 in any::<bool>()) {
        let allowed: Vec<String> = if allow_a100 { vec!["A100".into()] } else { vec![] };
        let never = never_fits(&nodes, &need, &allowed, EVERYWHERE);
        prop_assert_eq!(never.is_some(), !nodes.is_empty() && !oracle(&nodes, &need, &allowed));
        if let Some(why) = never {
            // The numbers asked are in the reason.
            let asked = format!("{} CPU(s) and {} MB of memory on one node", need.cpu_millis as f64 / 1000.0, need.memory_mb);
            prop_assert!(why.contains(&format!("asks for {} ", need.gpus)) && why.contains(&asked), "{}", why);
        }
    }

    #[test]
    fn a_smaller_task_or_one_more_node_never_turns_fitting_into_never(
        nodes in prop::collection::vec(arb_node(), 1..5), extra in arb_node(), need in arb_need(), less in 0u32..=10,
    ) {
        if never_fits(&nodes, &need, &[], EVERYWHERE).is_none() {
            let smaller = Need { gpus: need.gpus.saturating_sub(less), cpu_millis: need.cpu_millis / 2, memory_mb: need.memory_mb / 2, ..need.clone() };
            prop_assert!(never_fits(&nodes, &smaller, &[], EVERYWHERE).is_none());
            let mut more = nodes.clone();
            more.push(extra);
            prop_assert!(never_fits(&more, &need, &[], EVERYWHERE).is_none());
        }
    }
}
