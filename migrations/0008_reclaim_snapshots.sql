-- Idle reclaim, hot-GPU rebalancing and snapshots: the `reclaimed` machine
-- state, the reclaim/restore/rebalance task kinds, a task payload, the
-- settings row, machine events, snapshots and the per-machine flags.
--
-- `machines` and `tasks` are rebuilt because SQLite cannot change a CHECK
-- constraint in place (as 0003 did; `db::migrate` runs this with foreign
-- keys off and checks them afterwards). Every column earlier migrations
-- gave them is copied; platform/tests/reclaim_migrate.rs fails if one is
-- ever missed.

CREATE TABLE machines_new (
    id              INTEGER PRIMARY KEY,
    name            TEXT    NOT NULL,
    owner_id        INTEGER NOT NULL REFERENCES users(id),
    group_id        INTEGER NOT NULL REFERENCES groups(id),
    image_id        INTEGER NOT NULL REFERENCES images(id),
    gpu_count       INTEGER NOT NULL CHECK (gpu_count >= 1),
    gpu_model       TEXT    NOT NULL,
    node_id         INTEGER REFERENCES nodes(id),
    volume_name     TEXT    NOT NULL,
    volume_size_gb  INTEGER NOT NULL CHECK (volume_size_gb >= 1),
    volume_enforced INTEGER NOT NULL DEFAULT 0,
    cpu_millis      INTEGER NOT NULL DEFAULT 2000 CHECK (cpu_millis >= 100),
    memory_mb       INTEGER NOT NULL DEFAULT 4096 CHECK (memory_mb >= 64),
    pids_limit      INTEGER NOT NULL DEFAULT 4096 CHECK (pids_limit >= 16),
    container_id    TEXT,
    -- reclaimed: idle for too long; snapshotted, container removed, GPUs
    -- given back. Its volume and name stay, so it can be restored.
    state           TEXT    NOT NULL CHECK (state IN ('creating', 'running', 'stopped', 'restarting', 'reinstalling', 'deleting', 'deleted',
                                                      'failed', 'lost', 'reclaimed')),
    rev             INTEGER NOT NULL DEFAULT 0,
    exit_code       INTEGER,
    message         TEXT    NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    workload        TEXT    NOT NULL DEFAULT 'dev' CHECK (workload IN ('dev', 'job')),
    command         TEXT,
    sim_pattern     TEXT NULL CHECK (sim_pattern IS NULL OR sim_pattern IN ('idle', 'training', 'notebook', 'hot')),
    -- Idle reclaim: the current warning's deadline (unix s, NULL = not
    -- warned), extensions used on it, and an admin's exemption.
    reclaim_deadline   INTEGER,
    reclaim_extensions INTEGER NOT NULL DEFAULT 0,
    reclaim_exempt     INTEGER NOT NULL DEFAULT 0,
    -- The owner keeps this machine where it is (no hot-GPU rebalancing).
    rebalance_opt_out  INTEGER NOT NULL DEFAULT 0,
    -- The snapshot the machine was created, reinstalled or restored from.
    from_snapshot_id   INTEGER,
    -- The snapshot taken when it was reclaimed; restore starts from it.
    restore_snapshot_id INTEGER
);
INSERT INTO machines_new (id, name, owner_id, group_id, image_id, gpu_count, gpu_model, node_id, volume_name, volume_size_gb, volume_enforced,
                          cpu_millis, memory_mb, pids_limit, container_id, state, rev, exit_code, message, created_at, updated_at,
                          workload, command, sim_pattern)
SELECT id, name, owner_id, group_id, image_id, gpu_count, gpu_model, node_id, volume_name, volume_size_gb, volume_enforced,
       cpu_millis, memory_mb, pids_limit, container_id, state, rev, exit_code, message, created_at, updated_at,
       workload, command, sim_pattern
FROM machines;
DROP TABLE machines;
ALTER TABLE machines_new RENAME TO machines;
-- A reclaimed machine keeps its name and its volume: both stay reserved.
CREATE UNIQUE INDEX machines_live_name ON machines(owner_id, name) WHERE state NOT IN ('deleted', 'lost');
CREATE INDEX machines_group ON machines(group_id);
CREATE INDEX machines_node ON machines(node_id, state);
CREATE UNIQUE INDEX machines_live_volume ON machines(volume_name) WHERE state NOT IN ('deleted', 'lost');

CREATE TABLE tasks_new (
    id            INTEGER PRIMARY KEY,
    kind          TEXT    NOT NULL CHECK (kind IN ('create', 'delete', 'restart', 'reinstall', 'snapshot', 'reclaim', 'restore', 'rebalance')),
    machine_id    INTEGER REFERENCES machines(id),
    machine_name  TEXT    NOT NULL,
    requester_id  INTEGER NOT NULL REFERENCES users(id),
    group_id      INTEGER NOT NULL REFERENCES groups(id),
    state         TEXT    NOT NULL CHECK (state IN ('pending', 'scheduled', 'running', 'succeeded', 'failed', 'cancelled')),
    progress      INTEGER NOT NULL DEFAULT 0 CHECK (progress BETWEEN 0 AND 100),
    message       TEXT    NOT NULL DEFAULT '',
    attempts      INTEGER NOT NULL DEFAULT 0,
    not_before    INTEGER NOT NULL DEFAULT 0,
    keep_volume   INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    lease_owner   TEXT,
    lease_expires INTEGER NOT NULL DEFAULT 0,
    -- What the task works with beyond its machine, as JSON: the snapshot
    -- to take or start from, the GPUs a rebalance moves to.
    payload       TEXT    NOT NULL DEFAULT '{}'
);
INSERT INTO tasks_new (id, kind, machine_id, machine_name, requester_id, group_id, state, progress, message, attempts, not_before,
                       keep_volume, created_at, updated_at, lease_owner, lease_expires)
SELECT id, kind, machine_id, machine_name, requester_id, group_id, state, progress, message, attempts, not_before,
       keep_volume, created_at, updated_at, lease_owner, lease_expires
FROM tasks;
DROP TABLE tasks;
ALTER TABLE tasks_new RENAME TO tasks;
CREATE INDEX tasks_runnable ON tasks(state, not_before);
CREATE INDEX tasks_machine ON tasks(machine_id, id);
CREATE INDEX tasks_requester ON tasks(requester_id, id);
CREATE INDEX tasks_group ON tasks(group_id, id);
CREATE INDEX tasks_lease ON tasks(state, lease_expires);

-- The reclaim and rebalance settings, one row, changed by admins (audited).
CREATE TABLE reclaim_settings (
    id                 INTEGER PRIMARY KEY CHECK (id = 1),
    enabled            INTEGER NOT NULL DEFAULT 1,
    threshold_pct      REAL    NOT NULL DEFAULT 5,
    window_secs        INTEGER NOT NULL DEFAULT 7200,
    grace_secs         INTEGER NOT NULL DEFAULT 1800,
    extensions_allowed INTEGER NOT NULL DEFAULT 2,
    extension_secs     INTEGER NOT NULL DEFAULT 7200,
    hot_enabled        INTEGER NOT NULL DEFAULT 1,
    hot_util_pct       REAL    NOT NULL DEFAULT 90,
    hot_mem_pct        REAL    NOT NULL DEFAULT 95,
    hot_temp_c         REAL    NOT NULL DEFAULT 85,
    hot_window_secs    INTEGER NOT NULL DEFAULT 600,
    updated_at         INTEGER NOT NULL DEFAULT 0
);
INSERT INTO reclaim_settings (id) VALUES (1);

ALTER TABLE groups ADD COLUMN reclaim_exempt INTEGER NOT NULL DEFAULT 0;
-- How many snapshots a group may keep (reclaim snapshots do not count).
ALTER TABLE groups ADD COLUMN snapshot_quota INTEGER NOT NULL DEFAULT 10 CHECK (snapshot_quota >= 0);

-- A machine's history beyond its tasks: reclaim warnings, extensions,
-- reclaims, restores, rebalances (with why and the numbers).
CREATE TABLE machine_events (
    id         INTEGER PRIMARY KEY,
    machine_id INTEGER NOT NULL REFERENCES machines(id),
    at_ms      INTEGER NOT NULL,
    kind       TEXT    NOT NULL CHECK (kind IN ('reclaim_warning', 'reclaim_cleared', 'extended', 'reclaimed', 'restored',
                                                'rebalanced', 'rebalance_refused', 'snapshot')),
    detail     TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX machine_events_machine ON machine_events(machine_id, at_ms);

-- Snapshots: a machine's container committed to an image on its node's
-- engine. `image_ref` is unique per installation; `node_id` is where the
-- image lives (a machine made from it is placed there).
CREATE TABLE snapshots (
    id          INTEGER PRIMARY KEY,
    name        TEXT    NOT NULL,
    image_ref   TEXT    NOT NULL UNIQUE,
    machine_id  INTEGER NOT NULL REFERENCES machines(id),
    machine_name TEXT   NOT NULL,
    node_id     INTEGER REFERENCES nodes(id) ON DELETE SET NULL,
    owner_id    INTEGER NOT NULL REFERENCES users(id),
    group_id    INTEGER NOT NULL REFERENCES groups(id),
    parent_id   INTEGER REFERENCES snapshots(id) ON DELETE SET NULL,
    -- user: asked for by a person; reclaim: taken when the machine was reclaimed.
    origin      TEXT    NOT NULL CHECK (origin IN ('user', 'reclaim')),
    state       TEXT    NOT NULL CHECK (state IN ('creating', 'ready', 'failed')),
    size_bytes  INTEGER NOT NULL DEFAULT 0,
    message     TEXT    NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL
);
CREATE INDEX snapshots_group ON snapshots(group_id, id);
CREATE INDEX snapshots_machine ON snapshots(machine_id, id);
