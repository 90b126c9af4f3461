-- Regions with their images, the master image catalogue and its links,
-- compute tasks (batch jobs matched to a region), and personal API tokens.

ALTER TABLE regions ADD COLUMN description TEXT NOT NULL DEFAULT '';
ALTER TABLE nodes ADD COLUMN arch TEXT NOT NULL DEFAULT 'amd64' CHECK (arch IN ('amd64', 'arm64'));

-- An image a region can run: where it lives, for which architecture, what for.
CREATE TABLE region_images (
    id         INTEGER PRIMARY KEY,
    region_id  INTEGER NOT NULL REFERENCES regions(id) ON DELETE CASCADE,
    reference  TEXT    NOT NULL,
    arch       TEXT    NOT NULL CHECK (arch IN ('amd64', 'arm64')),
    kind       TEXT    NOT NULL CHECK (kind IN ('training', 'inference', 'notebook', 'other')),
    created_at INTEGER NOT NULL,
    UNIQUE (region_id, reference, arch)
);

-- The platform's catalogue: what an image offers, whatever region has it.
CREATE TABLE master_images (
    id                  INTEGER PRIMARY KEY,
    name                TEXT    NOT NULL UNIQUE,
    interpreter         TEXT    NOT NULL,
    interpreter_version TEXT    NOT NULL,
    framework           TEXT    NOT NULL,
    framework_version   TEXT    NOT NULL,
    created_at          INTEGER NOT NULL
);

CREATE TABLE master_image_links (
    master_image_id INTEGER NOT NULL REFERENCES master_images(id) ON DELETE CASCADE,
    region_image_id INTEGER NOT NULL REFERENCES region_images(id) ON DELETE CASCADE,
    PRIMARY KEY (master_image_id, region_image_id)
);

-- Personal API tokens: only a SHA-256 of the secret is kept.
CREATE TABLE api_tokens (
    id           INTEGER PRIMARY KEY,
    user_id      INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name         TEXT    NOT NULL,
    secret_hash  TEXT    NOT NULL UNIQUE,
    -- The first characters of the token, to tell tokens apart in lists.
    prefix       TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER
);
CREATE INDEX api_tokens_user ON api_tokens(user_id);

-- A compute task runs on a machine row of workload 'job' (so allocation,
-- quota, dispatch, leases and the collector are the dev machines' own).
ALTER TABLE machines ADD COLUMN workload TEXT NOT NULL DEFAULT 'dev' CHECK (workload IN ('dev', 'job'));
-- JSON argv for a job's container; NULL: the image's own command.
ALTER TABLE machines ADD COLUMN command TEXT;

CREATE TABLE compute_tasks (
    id                  INTEGER PRIMARY KEY,
    name                TEXT    NOT NULL,
    requester_id        INTEGER NOT NULL REFERENCES users(id),
    group_id            INTEGER NOT NULL REFERENCES groups(id),
    framework           TEXT    NOT NULL,
    framework_version   TEXT    NOT NULL,
    interpreter         TEXT    NOT NULL,
    interpreter_version TEXT    NOT NULL,
    -- JSON argv (a "shell" task is ["/bin/sh", "-c", SCRIPT]).
    command             TEXT    NOT NULL,
    gpu_count           INTEGER NOT NULL CHECK (gpu_count >= 1),
    gpu_model           TEXT,
    cpu_millis          INTEGER NOT NULL,
    memory_mb           INTEGER NOT NULL,
    time_limit_secs     INTEGER NOT NULL CHECK (time_limit_secs >= 1),
    state               TEXT    NOT NULL CHECK (state IN ('pending', 'scheduled', 'running', 'succeeded', 'failed', 'cancelled')),
    -- The last matching decision (JSON: sets, seed, outcome) and why.
    decision            TEXT,
    message             TEXT    NOT NULL DEFAULT '',
    region_id           INTEGER REFERENCES regions(id),
    region_image_id     INTEGER REFERENCES region_images(id),
    machine_id          INTEGER REFERENCES machines(id),
    exit_code           INTEGER,
    -- The end of the output, kept after the container is gone.
    logs_tail           TEXT    NOT NULL DEFAULT '',
    cancel_requested    INTEGER NOT NULL DEFAULT 0,
    created_at          INTEGER NOT NULL,
    started_at          INTEGER,
    finished_at         INTEGER,
    updated_at          INTEGER NOT NULL
);
CREATE INDEX compute_tasks_queue ON compute_tasks(state, id);
CREATE INDEX compute_tasks_group ON compute_tasks(group_id, id);
CREATE UNIQUE INDEX compute_tasks_machine ON compute_tasks(machine_id) WHERE machine_id IS NOT NULL;

-- Images made for compute tasks from region images: not offered for dev
-- machines, but machines.image_id needs a row.
ALTER TABLE images ADD COLUMN internal INTEGER NOT NULL DEFAULT 0;
