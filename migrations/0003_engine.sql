-- The exact engine: task leases, explicit node endpoints and the `lost`
-- state, machines that name their volume and carry container limits, kept
-- volumes, and group limits for CPU and memory.
--
-- SQLite cannot change a CHECK constraint in place, so `nodes` and
-- `machines` are rebuilt (SQLite's documented procedure: new table, copy,
-- drop, rename). `db::migrate` runs migrations with foreign keys off and
-- runs `PRAGMA foreign_key_check` afterwards, as that procedure requires.

CREATE TABLE nodes_new (
    id              INTEGER PRIMARY KEY,
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
    created_at      INTEGER NOT NULL
);
INSERT INTO nodes_new (id, name, region_id, docker_endpoint, executor, state, last_heartbeat, cpu_count, memory_mb, created_at)
SELECT id, name, region_id,
       CASE WHEN docker_endpoint <> '' THEN docker_endpoint
            WHEN executor = 'simulated' THEN 'simulated://' || name
            ELSE 'unix:///var/run/docker.sock' END,
       executor, state, last_heartbeat, cpu_count, memory_mb, created_at
FROM nodes;
DROP TABLE nodes;
ALTER TABLE nodes_new RENAME TO nodes;

CREATE TABLE machines_new (
    id              INTEGER PRIMARY KEY,
    name            TEXT    NOT NULL,
    owner_id        INTEGER NOT NULL REFERENCES users(id),
    group_id        INTEGER NOT NULL REFERENCES groups(id),
    image_id        INTEGER NOT NULL REFERENCES images(id),
    gpu_count       INTEGER NOT NULL CHECK (gpu_count >= 1),
    gpu_model       TEXT    NOT NULL,
    node_id         INTEGER REFERENCES nodes(id),
    -- The Docker volume mounted at /data: gantry-<instance>-m<id>-data for
    -- a new one, or a kept volume this machine was created on.
    volume_name     TEXT    NOT NULL,
    volume_size_gb  INTEGER NOT NULL CHECK (volume_size_gb >= 1),
    volume_enforced INTEGER NOT NULL DEFAULT 0,
    -- Container limits (Docker NanoCPUs / 1e6, Memory, PidsLimit).
    cpu_millis      INTEGER NOT NULL DEFAULT 2000 CHECK (cpu_millis >= 100),
    memory_mb       INTEGER NOT NULL DEFAULT 4096 CHECK (memory_mb >= 64),
    pids_limit      INTEGER NOT NULL DEFAULT 4096 CHECK (pids_limit >= 16),
    container_id    TEXT,
    state           TEXT    NOT NULL CHECK (state IN ('creating', 'running', 'stopped', 'restarting', 'reinstalling', 'deleting', 'deleted', 'failed', 'lost')),
    -- Bumped by every write of the transition module: the reconciler's
    -- compare-and-set uses it, so a stale observation never overwrites.
    rev             INTEGER NOT NULL DEFAULT 0,
    exit_code       INTEGER,
    message         TEXT    NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);
INSERT INTO machines_new (id, name, owner_id, group_id, image_id, gpu_count, gpu_model, node_id, volume_name, volume_size_gb,
                          volume_enforced, container_id, state, exit_code, message, created_at, updated_at)
SELECT id, name, owner_id, group_id, image_id, gpu_count, gpu_model, node_id,
       'gantry-' || (SELECT value FROM settings WHERE key = 'instance_id') || '-m' || id || '-data',
       volume_size_gb, volume_enforced, container_id, state, exit_code, message, created_at, updated_at
FROM machines;
DROP TABLE machines;
ALTER TABLE machines_new RENAME TO machines;
CREATE UNIQUE INDEX machines_live_name ON machines(owner_id, name) WHERE state NOT IN ('deleted', 'lost');
CREATE INDEX machines_group ON machines(group_id);
CREATE INDEX machines_node ON machines(node_id, state);
-- One live machine per volume: two containers never share a data disk.
CREATE UNIQUE INDEX machines_live_volume ON machines(volume_name) WHERE state NOT IN ('deleted', 'lost');

-- Leases: a claimed task records the process that runs it and until when;
-- only an expired lease lets another process resume it.
ALTER TABLE tasks ADD COLUMN lease_owner TEXT;
ALTER TABLE tasks ADD COLUMN lease_expires INTEGER NOT NULL DEFAULT 0;
CREATE INDEX tasks_lease ON tasks(state, lease_expires);

-- Volumes whose machine was deleted with "keep the data volume": listed
-- for their owner, attachable to a new machine on the same node, deletable.
CREATE TABLE kept_volumes (
    id              INTEGER PRIMARY KEY,
    name            TEXT    NOT NULL UNIQUE,
    node_id         INTEGER NOT NULL REFERENCES nodes(id),
    owner_id        INTEGER NOT NULL REFERENCES users(id),
    group_id        INTEGER NOT NULL REFERENCES groups(id),
    size_gb         INTEGER NOT NULL,
    enforced        INTEGER NOT NULL DEFAULT 0,
    from_machine    TEXT    NOT NULL,
    kept_at         INTEGER NOT NULL
);
CREATE INDEX kept_volumes_group ON kept_volumes(group_id);

-- Per-machine container limits a group may ask for.
ALTER TABLE groups ADD COLUMN max_cpus_per_machine INTEGER NOT NULL DEFAULT 16 CHECK (max_cpus_per_machine >= 1);
ALTER TABLE groups ADD COLUMN max_memory_gb_per_machine INTEGER NOT NULL DEFAULT 64 CHECK (max_memory_gb_per_machine >= 1);
