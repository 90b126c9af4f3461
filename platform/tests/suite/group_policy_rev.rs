//! A group's policy revision (`policy_rev`, migration 0024): the Groups
//! page posts every field of a group's policy, so a save based on an older
//! revision would write back what its page showed and undo the edit made
//! since. Such a save is refused with nothing changed; every policy or
//! access edit bumps the revision, GPUs taken by machines do not.

use crate::reclaim_common;
use gantry_testkit::engine;

use engine::{env, Env};
use gantry_platform::{
    accounts, catalogue,
    policy::{self, update_group_policy_at_rev},
    policy_access::{self, AccessChange},
    PlatformError,
};

async fn ml(env: &Env) -> accounts::Group {
    let id = env.scalar("SELECT id FROM groups WHERE name = 'ml-team'").await;
    accounts::group_by_id(&env.pool, id).await.unwrap()
}

/// (GPU quota, snapshot quota, allowed region codes, policy_rev) as stored.
async fn stored(env: &Env, g: i64) -> (i64, i64, Vec<String>, i64) {
    let (quota, snapshots, rev) =
        sqlx::query_as("SELECT gpu_quota, snapshot_quota, policy_rev FROM groups WHERE id = ?")
            .bind(g)
            .fetch_one(&env.pool)
            .await
            .unwrap();
    let regions =
        policy_access::group_access(&env.pool, g).await.unwrap().regions.into_iter().map(|(_, c)| c).collect();
    (quota, snapshots, regions, rev)
}

gantry_testkit::timed_test! {
    async fn a_save_based_on_an_older_revision_is_refused_and_changes_nothing() {
        let env = env("simulated", 2, 16).await;
        let root = reclaim_common::admin(&env.pool).await;
        let east = catalogue::create_region(&env.pool, root.id, "east", "East", "").await.unwrap().id;
        // Admin B loads the page: every region, quota 16.
        let seen_by_b = ml(&env).await;
        let g = seen_by_b.id;
        assert_eq!((seen_by_b.gpu_quota, policy_access::group_access(&env.pool, g).await.unwrap().regions.len()), (16, 0));

        // Admin A, from a page loaded at the same time, restricts ml to east and cuts its quota.
        let only_east = AccessChange { images: None, regions: Some(vec![east]) };
        let a = update_group_policy_at_rev(&env.pool, Some(root.id), g, 8, 2, &[], &only_east, None, None, Some(seen_by_b.policy_rev)).await.unwrap();
        assert_eq!(a.policy_rev, seen_by_b.policy_rev + 1, "a saved edit bumps the revision once");
        let after_a = stored(&env, g).await;
        assert_eq!((after_a.0, after_a.2.clone()), (8, vec!["east".to_string()]));
        let audits = env.scalar("SELECT COUNT(*) FROM audit_log").await;

        // B changes only the snapshot quota; the form posts what B's page showed.
        let all_regions = AccessChange { images: Some(vec![]), regions: Some(vec![]) };
        let refused = update_group_policy_at_rev(&env.pool, Some(root.id), g, 16, 2, &[], &all_regions, Some((4, 16)), Some(3), Some(seen_by_b.policy_rev))
            .await
            .unwrap_err();
        assert!(matches!(refused, PlatformError::Conflict(_)), "{refused:?}");
        let says = refused.to_string();
        assert!(says.contains("group ml-team was changed by someone else") && says.contains("reload") && says.contains("nothing was saved"), "{says}");
        assert_eq!(stored(&env, g).await, after_a, "A's restriction and quota stand, the revision is unchanged");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM audit_log").await, audits, "nothing audited");

        // After a reload B sees A's values and the current revision: saved.
        let reloaded = ml(&env).await;
        let saved = update_group_policy_at_rev(&env.pool, Some(root.id), g, 8, 2, &[], &only_east, None, Some(3), Some(reloaded.policy_rev)).await.unwrap();
        assert_eq!(saved.policy_rev, reloaded.policy_rev + 1);
        assert_eq!(stored(&env, g).await, (8, 3, vec!["east".to_string()], reloaded.policy_rev + 1));
    }
}

gantry_testkit::timed_test! {
    async fn every_policy_writer_bumps_the_revision_and_machines_do_not() {
        let env = env("simulated", 2, 2).await;
        let root = reclaim_common::admin(&env.pool).await;
        let g = ml(&env).await.id;
        let rev = || async { ml(&env).await.policy_rev };

        let before = rev().await;
        policy_access::set_group_access(&env.pool, Some(root.id), g, &AccessChange { images: Some(vec![]), regions: None }).await.unwrap();
        assert_eq!(rev().await, before + 1, "the access lists alone");
        policy::update_machine_limits(&env.pool, Some(root.id), g, 4, 16).await.unwrap();
        assert_eq!(rev().await, before + 2, "the per-machine limits alone");
        policy::update_group_policy(&env.pool, Some(root.id), g, 2, 2, &[]).await.unwrap();
        assert_eq!(rev().await, before + 3, "the unchecked edit of scripts");

        // A page loaded before any of those is refused.
        let stale = update_group_policy_at_rev(&env.pool, None, g, 2, 2, &[], &AccessChange::default(), None, None, Some(before + 1)).await;
        assert!(matches!(stale, Err(PlatformError::Conflict(_))), "{stale:?}");

        // GPUs taken by a machine are no edit of the policy: an open page stays current.
        let alice = env.user("alice", "ml-team").await;
        env.admissions.create(env.create(&alice, "dev", 1)).await.unwrap();
        assert_eq!(env.scalar(&format!("SELECT gpus_in_use FROM groups WHERE id = {g}")).await, 1);
        assert_eq!(rev().await, before + 3);
    }
}
