-- Node ids are never handed out again: `nodes` is rebuilt with
-- AUTOINCREMENT (SQLite cannot add it to a table). Without it, removing the
-- node with the highest id gave that id to the next node added, and every
-- server that had cached the removed node's engine by id (each process
-- keeps its own, platform/src/fleet.rs) drove the old host for the new
-- node's machines: creates and deletes on the wrong engine, the reconciler
-- comparing the new node's machines with the old engine's containers. The
-- telemetry tables keep a node id without a foreign key too, so a new
-- node's charts would have shown the removed node's history.
--
-- gpus, machines, kept_volumes and snapshots refer to nodes: db::migrate
-- runs migrations with foreign keys off, so the DROP below deletes or
-- nulls nothing, and runs `PRAGMA foreign_key_check` after. Columns and
-- constraints as migrations 0003 and 0005 (arch) left them; the UNIQUE
-- constraint brings its index, and nodes has no other index or trigger.

CREATE TABLE nodes_rebuilt (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    name            TEXT    NOT NULL UNIQUE,
    region_id       INTEGER NOT NULL REFERENCES regions(id),
    -- Always explicit: unix:///path, tcp://host:port, tls://host:port, or
    -- simulated://NAME for the in-process simulated executor.
    docker_endpoint TEXT    NOT NULL CHECK (docker_endpoint <> ''),
    executor        TEXT    NOT NULL DEFAULT 'docker' CHECK (executor IN ('docker', 'simulated')),
    state           TEXT    NOT NULL DEFAULT 'ready' CHECK (state IN ('ready', 'draining', 'down', 'lost')),
    -- Why it is down/lost, for the console and its machines' pages.
    state_reason    TEXT    NOT NULL DEFAULT '',
    -- Where loop-device volume images live on that host; '' = no block
    -- volumes on this node (plain named volumes, size not enforced).
    volume_dir      TEXT    NOT NULL DEFAULT '',
    last_heartbeat  INTEGER NOT NULL DEFAULT 0,
    cpu_count       INTEGER NOT NULL DEFAULT 0,
    memory_mb       INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER NOT NULL,
    arch            TEXT    NOT NULL DEFAULT 'amd64' CHECK (arch IN ('amd64', 'arm64'))
);

INSERT INTO nodes_rebuilt (id, name, region_id, docker_endpoint, executor, state, state_reason, volume_dir, last_heartbeat, cpu_count, memory_mb, created_at, arch)
    SELECT id, name, region_id, docker_endpoint, executor, state, state_reason, volume_dir, last_heartbeat, cpu_count, memory_mb, created_at, arch FROM nodes;

DROP TABLE nodes;
ALTER TABLE nodes_rebuilt RENAME TO nodes;

-- AUTOINCREMENT only stays above ids the table has held since it was made:
-- the counter starts above every node id anything still holds.
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'nodes', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'nodes');
UPDATE sqlite_sequence SET seq = max(
        seq,
        (SELECT coalesce(max(id), 0) FROM nodes),
        (SELECT coalesce(max(node_id), 0) FROM machines),
        (SELECT coalesce(max(node_id), 0) FROM snapshots),
        (SELECT coalesce(max(node_id), 0) FROM kept_volumes),
        (SELECT coalesce(max(node_id), 0) FROM gpu_samples),
        (SELECT coalesce(max(node_id), 0) FROM gpu_samples_recent),
        (SELECT coalesce(max(node_id), 0) FROM gpu_rollup_1m),
        (SELECT coalesce(max(node_id), 0) FROM gpu_rollup_1h))
    WHERE name = 'nodes';
