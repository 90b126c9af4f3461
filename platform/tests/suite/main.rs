//! Every platform integration test in one test binary (SQLite and real
//! Docker), so the platform is linked once rather than once per file.
//! Run one group with `cargo test -p gantry-platform --test suite
//! reclaim_docker::`. `docker_tls` and `engine_races` stay binaries of
//! their own: they set `GANTRY_DOCKER_CERT_DIR` for the whole process.
//!
//! What these tests share with the server's is in `gantry-testkit`
//! (`engine`: the installation with a node and a dispatcher; `datasets`,
//! `store`, `telemetry`); `datasets_support` and `reclaim_common` are the
//! platform's own.

mod datasets_support;
mod reclaim_common;

mod accounts;
mod accounts_races;
mod admission;
mod collector_edges;
mod compute_cancel;
mod compute_docker;
mod compute_image_reach;
mod compute_leftovers;
mod compute_list;
mod compute_outcomes;
mod compute_queue_head;
mod compute_rules;
mod compute_sim;
mod compute_wedged_engine;
mod dataset_mounts;
mod dataset_version_ids;
mod datasets_expiry;
mod datasets_juicefs;
mod datasets_purge;
mod datasets_read_during_replace;
mod datasets_replace;
mod datasets_resume_faults;
mod datasets_stored_names;
mod datasets_upload;
mod datasets_upload_races;
mod datasets_version_deleted_mid_upload;
mod datasets_version_races;
mod db_cancellation;
mod delete_any_state;
mod disk_docker;
mod disk_quotas;
mod disk_watch;
mod dispatcher_shutdown;
mod docker_executor;
mod docker_slow_commit;
mod engine_docker;
mod engine_edges;
mod engine_invariant;
mod engine_text_private;
mod gpu_history;
mod gpu_reregistration;
mod gpus_left_to_collector;
mod group_access;
mod group_policy_rev;
mod job_machine_ops;
mod kept_volume_left_container;
mod list_counts;
mod list_plans;
mod machine_ownership;
mod machine_schedules;
mod machine_start_queue;
mod machine_stop_start;
mod machine_stop_start_docker;
mod machines_docker;
mod migrate_engine;
mod nodes_admin;
mod nodes_monitor;
mod notifications_delivery;
mod rebalance_docker;
mod rebalance_rules;
mod reclaim_docker;
mod reclaim_edges;
mod reclaim_give_up;
mod reclaim_migrate;
mod reclaim_retention;
mod reclaim_sim;
mod reclaim_snapshots;
mod reclaim_withdrawn;
mod snapshot_ids;
mod snapshots_docker;
mod snapshots_lost_node;
mod snapshots_owner;
mod ssh_keys;
mod sso_ldap;
mod stale_requests;
mod system_tasks;
mod telemetry_sampler;
mod telemetry_store;
mod terminal_sessions;
mod tokens_lifecycle;
mod volume_create_rollback;
mod volume_pool_docker;
mod volume_pool_files;
mod volume_reboot;
