//! A group's allowed images and regions (PRODUCT A.2), like its GPU
//! models: an empty list allows all. Dev machines are refused a disallowed
//! image or a node of a disallowed region, with the rule named and nothing
//! changed; a compute task whose only regions are disallowed fails at
//! submit; the matcher places only in allowed regions.

use crate::reclaim_common;
use gantry_testkit::engine;

use engine::{compute_job, env, torch_catalogue, Env, IMAGE};
use gantry_platform::{
    accounts::User,
    catalogue, cluster,
    compute::{self, Command},
    executor::{Executor, SimulatedExecutor},
    gpus::{self, SimulatedGpus},
    images,
    policy_access::{self, AccessChange},
    PlatformError,
};

async fn group_id(env: &Env) -> i64 {
    env.scalar("SELECT id FROM groups WHERE name = 'ml-team'").await
}

async fn set(env: &Env, images: Option<Vec<i64>>, regions: Option<Vec<i64>>) -> Result<(), PlatformError> {
    policy_access::set_group_access(&env.pool, None, group_id(env).await, &AccessChange { images, regions }).await
}

/// Region `east` with no node yet; returns its id.
async fn east(env: &Env, admin: &User) -> i64 {
    catalogue::create_region(&env.pool, admin.id, "east", "East", "").await.unwrap().id
}

/// A node in `region` with 2 simulated GPUs of the env's model.
async fn node_in(env: &Env, name: &str, region: &str) -> i64 {
    let found = gpus::simulated(name, &SimulatedGpus { count: 2, model: "SIM-A100".into(), memory_mb: 81_920 });
    let endpoint = format!("simulated://{name}");
    let registration = cluster::NodeRegistration {
        name,
        region_code: region,
        docker_endpoint: &endpoint,
        volume_dir: "",
        executor: "simulated",
        cpu_count: 2,
        memory_mb: 1 << 20,
        gpus: &found,
    };
    let id = cluster::register_node(&env.pool, registration).await.unwrap();
    env.dispatcher.fleet.insert(id, Executor::from(SimulatedExecutor::new()));
    id
}

async fn refused(env: &Env, user: &User, name: &str, image: Option<i64>) -> String {
    let mut req = env.create(user, name, 1);
    req.image_id = image;
    match env.admissions.create(req).await {
        Err(PlatformError::Refused(why)) => why,
        other => panic!("{name}: expected a refusal, got {other:?}"),
    }
}

async fn admitted(env: &Env, user: &User, name: &str, image: Option<i64>) -> String {
    let mut req = env.create(user, name, 1);
    req.image_id = image;
    env.admissions.create(req).await.unwrap_or_else(|e| panic!("{name}: {e}")).node_name
}

gantry_testkit::timed_test! {
    async fn a_disallowed_image_is_refused_with_the_rule_and_changes_nothing() {
        let env = env("simulated", 4, 8).await;
        let alice = env.user("alice", "ml-team").await;
        let other = images::create_image(&env.pool, None, "other", "gantry/other:1", "", false).await.unwrap();
        set(&env, Some(vec![other.id]), None).await.unwrap();
        assert_eq!(policy_access::group_access(&env.pool, group_id(&env).await).await.unwrap().images, vec![(other.id, "other".to_string())]);

        let why = refused(&env, &alice, "on-default", None).await;
        assert!(why.contains("group ml-team may not use image devbox") && why.contains("it may use only other"), "{why}");
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 0);
        assert_eq!(env.scalar("SELECT COUNT(*) FROM machines").await, 0);

        admitted(&env, &alice, "on-other", Some(other.id)).await;
        // An empty list allows every image again.
        set(&env, Some(vec![]), None).await.unwrap();
        admitted(&env, &alice, "on-default", None).await;
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 2);

        // Unknown and internal images are refused; the list stays as it was.
        set(&env, Some(vec![other.id]), None).await.unwrap();
        let internal = sqlx::query("INSERT INTO images (name, reference, description, is_default, internal, created_at) VALUES ('job:x', 'x', '', 0, 1, 0)")
            .execute(&env.pool)
            .await
            .unwrap()
            .last_insert_rowid();
        for bad in [vec![other.id, 9999], vec![internal]] {
            match set(&env, Some(bad.clone()), Some(vec![])).await {
                Err(PlatformError::BadRequest(m)) => assert!(m.contains("there is no image #"), "{m}"),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        assert_eq!(env.scalar("SELECT COUNT(*) FROM group_images").await, 1);
        let audit = env.text("SELECT group_concat(detail, ' | ') FROM audit_log WHERE action = 'group.access'").await;
        assert!(audit.contains("images all → other") && audit.contains("images other → all"), "{audit}");
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_dev_machine_goes_only_to_nodes_of_allowed_regions() {
        let env = env("simulated", 4, 8).await;
        let root = reclaim_common::admin(&env.pool).await;
        let alice = env.user("alice", "ml-team").await;
        let east = east(&env, &root).await;
        let local = env.scalar("SELECT id FROM regions WHERE code = 'local'").await;

        // The only node is in `local`, which the group may not use.
        set(&env, None, Some(vec![east])).await.unwrap();
        let why = refused(&env, &alice, "box", None).await;
        assert!(why.contains("group ml-team may not use region local") && why.contains("it may use only east"), "{why}");
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 0);
        assert_eq!(env.scalar("SELECT COUNT(*) FROM machines").await, 0);
        assert_eq!(env.scalar("SELECT COUNT(*) FROM machine_gpus").await, 0);

        // A node in east: every machine goes there, however many fit on local.
        node_in(&env, "east-1", "east").await;
        assert_eq!(admitted(&env, &alice, "e1", None).await, "east-1");
        assert_eq!(admitted(&env, &alice, "e2", None).await, "east-1");
        let why = refused(&env, &alice, "e3", None).await;
        assert!(why.contains("it may use only east"), "east is full, the refusal says why local was not used: {why}");

        // Allowed again: local takes machines; an empty list allows all.
        set(&env, None, Some(vec![local])).await.unwrap();
        assert_ne!(admitted(&env, &alice, "l1", None).await, "east-1");
        set(&env, None, Some(vec![])).await.unwrap();
        admitted(&env, &alice, "any", None).await;
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 4);

        // An unknown region changes nothing.
        match set(&env, None, Some(vec![east, 9999])).await {
            Err(PlatformError::BadRequest(m)) => assert!(m.contains("there is no region #9999"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(env.scalar("SELECT COUNT(*) FROM group_regions").await, 0);
        env.assert_quota_consistent().await;
    }
}

fn job(name: &str) -> compute::SubmitCompute {
    compute_job(name, Command::Argv(vec!["true".into()]))
}

gantry_testkit::timed_test! {
    async fn a_compute_task_whose_only_region_is_disallowed_fails_at_submit() {
        let env = env("simulated", 4, 8).await;
        env.use_executor(Executor::from(SimulatedExecutor::new()));
        let root = reclaim_common::admin(&env.pool).await;
        torch_catalogue(&env, &root).await;
        let alice = env.user("alice", "ml-team").await;
        let east = east(&env, &root).await;
        let local = env.scalar("SELECT id FROM regions WHERE code = 'local'").await;

        set(&env, None, Some(vec![east])).await.unwrap();
        let t = compute::submit(&env.pool, &env.admissions, &alice, &job("nowhere")).await.unwrap();
        assert_eq!(t.state, gantry_core::task::TaskState::Failed, "{}", t.message);
        for w in ["can never start", "group ml-team may not use region local", "with an image for PyTorch 2.4", "it may use only east"] {
            assert!(t.message.contains(w), "{:?} lacks {w:?}", t.message);
        }
        assert_eq!(env.scalar("SELECT COUNT(*) FROM machines").await, 0);

        // An image in east too, but no node there: the nodes rule it out.
        let image = catalogue::create_region_image(&env.pool, root.id, "east", IMAGE, "amd64", "training").await.unwrap();
        let master = env.scalar("SELECT id FROM master_images").await;
        catalogue::set_link(&env.pool, root.id, master, image.id, true).await.unwrap();
        let t = compute::submit(&env.pool, &env.admissions, &alice, &job("no-node")).await.unwrap();
        assert_eq!(t.state, gantry_core::task::TaskState::Failed, "{}", t.message);
        assert!(t.message.contains("may not use region local, the only region with a node that can hold 1 GPU(s)"), "{}", t.message);

        // Allowed: it runs in local; cleared: every region again.
        set(&env, None, Some(vec![local])).await.unwrap();
        let t = compute::submit(&env.pool, &env.admissions, &alice, &job("local")).await.unwrap();
        assert_eq!(t.state, gantry_core::task::TaskState::Scheduled, "{}", t.message);
        set(&env, None, Some(vec![])).await.unwrap();
        let t = compute::submit(&env.pool, &env.admissions, &alice, &job("any")).await.unwrap();
        assert_eq!(t.state, gantry_core::task::TaskState::Scheduled, "{}", t.message);
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn the_matcher_places_only_in_allowed_regions() {
        let env = env("simulated", 4, 8).await;
        env.use_executor(Executor::from(SimulatedExecutor::new()));
        let root = reclaim_common::admin(&env.pool).await;
        let master = torch_catalogue(&env, &root).await;
        let alice = env.user("alice", "ml-team").await;
        let east = east(&env, &root).await;
        let image = catalogue::create_region_image(&env.pool, root.id, "east", IMAGE, "amd64", "training").await.unwrap();
        catalogue::set_link(&env.pool, root.id, master, image.id, true).await.unwrap();
        node_in(&env, "east-1", "east").await;

        set(&env, None, Some(vec![east])).await.unwrap();
        for i in 0..2 {
            let t = compute::submit(&env.pool, &env.admissions, &alice, &job(&format!("t{i}"))).await.unwrap();
            assert_eq!(t.state, gantry_core::task::TaskState::Scheduled, "{}", t.message);
            let region = env.text(&format!("SELECT r.code FROM compute_tasks c JOIN regions r ON r.id = c.region_id WHERE c.id = {}", t.id)).await;
            assert_eq!(region, "east");
        }
        // East is full now; local has free GPUs but is not the group's.
        let t = compute::submit(&env.pool, &env.admissions, &alice, &job("waits")).await.unwrap();
        assert_eq!(t.state, gantry_core::task::TaskState::Pending, "{}", t.message);
        assert!(t.message.contains("the group may use only region(s) east"), "{}", t.message);
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn an_admin_sets_how_many_snapshots_a_group_keeps() {
        let env = env("simulated", 2, 2).await;
        env.use_executor(Executor::from(SimulatedExecutor::new()));
        let root = reclaim_common::admin(&env.pool).await;
        let alice = env.user("alice", "ml-team").await;
        let g = group_id(&env).await;
        let m = env.admissions.create(env.create(&alice, "dev", 1)).await.unwrap().machine_id;
        env.drive().await;
        let unchanged = AccessChange::default();
        let edit = |quota: Option<i64>| gantry_platform::policy::update_group_policy_and_access(&env.pool, Some(root.id), g, 2, 2, &[], &unchanged, None, quota);

        // Out of range: refused, nothing changed.
        let refused = edit(Some(-1)).await.unwrap_err();
        assert!(refused.to_string().contains("snapshot quota"), "{refused}");
        assert_eq!(env.scalar(&format!("SELECT snapshot_quota FROM groups WHERE id = {g}")).await, 10);

        assert_eq!(edit(Some(1)).await.unwrap().snapshot_quota, 1);
        let audited = env.text("SELECT detail FROM audit_log WHERE action = 'group.update' ORDER BY id DESC LIMIT 1").await;
        assert!(audited.contains("snapshot quota 10 → 1"), "{audited}");
        // Left out of an edit, it stays.
        assert_eq!(edit(None).await.unwrap().snapshot_quota, 1);

        gantry_platform::snapshots::request(&env.pool, &alice, m, "first").await.unwrap();
        env.drive().await;
        let refused = gantry_platform::snapshots::request(&env.pool, &alice, m, "second").await.unwrap_err();
        assert!(refused.to_string().contains("keeps 1 of its 1 snapshot"), "{refused}");
    }
}

gantry_testkit::timed_test! {
    async fn a_region_image_address_is_checked_like_a_machine_image_reference() {
        let env = env("simulated", 2, 2).await;
        let root = env.user("root", "ml-team").await;
        let rows = "SELECT COUNT(*) FROM region_images";
        let before = env.scalar(rows).await;
        for bad in ["--privileged", "img;rm -rf /", "a\u{7}b", "../../etc", "name:tag\u{202e}", "-", "img\"x"] {
            let got = catalogue::create_region_image(&env.pool, root.id, "local", bad, "amd64", "training").await;
            // Control characters are refused as unprintable; the rest as references.
            assert!(matches!(got, Err(PlatformError::BadRequest(ref m)) if m.contains("is not an image reference") || m.contains("printable")), "{bad:?}: {got:?}");
        }
        assert_eq!(env.scalar(rows).await, before, "nothing was stored");
        // The engine's grammar: a repository path in lower case, one tag, a real digest.
        for bad in ["registry.example/ML/torch:2.4", "torch:2.4:cuda", "torch@latest"] {
            let got = catalogue::create_region_image(&env.pool, root.id, "local", bad, "amd64", "training").await;
            assert!(matches!(got, Err(PlatformError::BadRequest(ref m)) if m.contains("is not an image reference")), "{bad:?}: {got:?}");
        }
        let digest = "ab".repeat(32);
        catalogue::create_region_image(&env.pool, root.id, "local", &format!("registry.example:5000/team/torch:2.4-cuda12@sha256:{digest}"), "amd64", "training").await.unwrap();
    }
}

gantry_testkit::timed_test! {
    async fn an_image_description_with_control_characters_is_refused_and_nothing_stored() {
        let env = engine::env("simulated", 1, 1).await;
        let before = env.scalar("SELECT COUNT(*) FROM images").await;
        let audited = env.scalar("SELECT COUNT(*) FROM audit_log").await;
        for bad in ["a\u{1b}[2Jb", "two\nlines", "nul\0"] {
            let err = images::create_image(&env.pool, None, "torch", "gantry/torch:1", bad, false).await.unwrap_err();
            assert!(matches!(&err, PlatformError::BadRequest(m) if m.contains("printable")), "{bad:?}: {err}");
        }
        assert_eq!(env.scalar("SELECT COUNT(*) FROM images").await, before);
        assert_eq!(env.scalar("SELECT COUNT(*) FROM audit_log").await, audited);
    }
}
