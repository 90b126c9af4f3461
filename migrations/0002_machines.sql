-- Regions, worker nodes and their GPUs, the dev-machine image catalogue,
-- dev machines, the GPUs they hold, and the operation tasks on them.

-- Installation-wide values. instance_id names this installation's containers
-- and volumes, so installations sharing one Docker Engine never collide.
CREATE TABLE settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT INTO settings (key, value) VALUES ('instance_id', lower(hex(randomblob(4))));

CREATE TABLE regions (
    id         INTEGER PRIMARY KEY,
    code       TEXT    NOT NULL UNIQUE,
    name       TEXT    NOT NULL,
    created_at INTEGER NOT NULL
);
INSERT INTO regions (code, name, created_at) VALUES ('local', 'Local region', CAST(strftime('%s', 'now') AS INTEGER));

CREATE TABLE nodes (
    id              INTEGER PRIMARY KEY,
    name            TEXT    NOT NULL UNIQUE,
    region_id       INTEGER NOT NULL REFERENCES regions(id),
    -- '' means the local Docker socket; else unix:///path or tcp://host:port.
    docker_endpoint TEXT    NOT NULL DEFAULT '',
    executor        TEXT    NOT NULL DEFAULT 'docker' CHECK (executor IN ('docker', 'simulated')),
    state           TEXT    NOT NULL DEFAULT 'ready' CHECK (state IN ('ready', 'draining', 'down')),
    last_heartbeat  INTEGER NOT NULL DEFAULT 0,
    cpu_count       INTEGER NOT NULL DEFAULT 0,
    memory_mb       INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER NOT NULL
);

CREATE TABLE gpus (
    id        INTEGER PRIMARY KEY,
    node_id   INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    idx       INTEGER NOT NULL,
    uuid      TEXT    NOT NULL UNIQUE,
    model     TEXT    NOT NULL,
    memory_mb INTEGER NOT NULL DEFAULT 0,
    simulated INTEGER NOT NULL DEFAULT 0,
    UNIQUE (node_id, idx)
);

CREATE TABLE images (
    id          INTEGER PRIMARY KEY,
    name        TEXT    NOT NULL UNIQUE,
    reference   TEXT    NOT NULL,
    description TEXT    NOT NULL DEFAULT '',
    is_default  INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL
);

-- Images a group may use; an empty set means "any".
CREATE TABLE group_images (
    group_id INTEGER NOT NULL REFERENCES groups(id) ON DELETE CASCADE,
    image_id INTEGER NOT NULL REFERENCES images(id) ON DELETE CASCADE,
    PRIMARY KEY (group_id, image_id)
);

CREATE TABLE machines (
    id              INTEGER PRIMARY KEY,
    name            TEXT    NOT NULL,
    owner_id        INTEGER NOT NULL REFERENCES users(id),
    group_id        INTEGER NOT NULL REFERENCES groups(id),
    image_id        INTEGER NOT NULL REFERENCES images(id),
    gpu_count       INTEGER NOT NULL CHECK (gpu_count >= 1),
    gpu_model       TEXT    NOT NULL,
    node_id         INTEGER REFERENCES nodes(id),
    -- The data volume is named gantry-<instance_id>-m<id>-data (derived).
    volume_size_gb  INTEGER NOT NULL CHECK (volume_size_gb >= 1),
    -- Whether the volume's size is enforced (a loop-mounted block device).
    volume_enforced INTEGER NOT NULL DEFAULT 0,
    container_id    TEXT,
    state           TEXT    NOT NULL CHECK (state IN ('creating', 'running', 'stopped', 'restarting', 'reinstalling', 'deleting', 'deleted', 'failed')),
    exit_code       INTEGER,
    message         TEXT    NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);
-- A live machine's name is unique for its owner (it is the container's hostname).
CREATE UNIQUE INDEX machines_live_name ON machines(owner_id, name) WHERE state <> 'deleted';
CREATE INDEX machines_group ON machines(group_id);

-- The GPUs live machines hold. Keyed by GPU: one GPU, at most one machine.
CREATE TABLE machine_gpus (
    gpu_id     INTEGER PRIMARY KEY REFERENCES gpus(id),
    machine_id INTEGER NOT NULL REFERENCES machines(id) ON DELETE CASCADE
);
CREATE INDEX machine_gpus_machine ON machine_gpus(machine_id);

CREATE TABLE tasks (
    id           INTEGER PRIMARY KEY,
    kind         TEXT    NOT NULL CHECK (kind IN ('create', 'delete', 'restart', 'reinstall', 'snapshot')),
    machine_id   INTEGER REFERENCES machines(id),
    -- The machine's name as requested (refused creates have no machine row).
    machine_name TEXT    NOT NULL,
    requester_id INTEGER NOT NULL REFERENCES users(id),
    group_id     INTEGER NOT NULL REFERENCES groups(id),
    state        TEXT    NOT NULL CHECK (state IN ('pending', 'scheduled', 'running', 'succeeded', 'failed', 'cancelled')),
    progress     INTEGER NOT NULL DEFAULT 0 CHECK (progress BETWEEN 0 AND 100),
    message      TEXT    NOT NULL DEFAULT '',
    attempts     INTEGER NOT NULL DEFAULT 0,
    -- Earliest time the dispatcher may (re)try it: retry backoff.
    not_before   INTEGER NOT NULL DEFAULT 0,
    keep_volume  INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);
CREATE INDEX tasks_runnable ON tasks(state, not_before);
CREATE INDEX tasks_machine ON tasks(machine_id, id);
CREATE INDEX tasks_requester ON tasks(requester_id, id);
CREATE INDEX tasks_group ON tasks(group_id, id);
