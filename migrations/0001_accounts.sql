-- Accounts, groups, sessions, login throttling and the audit log.
-- Times are UTC unix seconds (INTEGER), portable to Postgres as BIGINT.

CREATE TABLE groups (
    id                   INTEGER PRIMARY KEY,
    name                 TEXT    NOT NULL UNIQUE,
    -- Most GPUs the group may hold at once, and how many it holds now.
    -- gpus_in_use is changed only in the allocation/release transactions.
    gpu_quota            INTEGER NOT NULL DEFAULT 0 CHECK (gpu_quota >= 0),
    gpus_in_use          INTEGER NOT NULL DEFAULT 0 CHECK (gpus_in_use >= 0),
    max_gpus_per_machine INTEGER NOT NULL DEFAULT 8 CHECK (max_gpus_per_machine >= 1),
    created_at           INTEGER NOT NULL
);

-- Permissions: an empty set means "any".
CREATE TABLE group_gpu_models (
    group_id INTEGER NOT NULL REFERENCES groups(id) ON DELETE CASCADE,
    model    TEXT    NOT NULL,
    PRIMARY KEY (group_id, model)
);

CREATE TABLE users (
    id            INTEGER PRIMARY KEY,
    username      TEXT    NOT NULL UNIQUE,
    password_hash TEXT    NOT NULL,
    role          TEXT    NOT NULL CHECK (role IN ('user', 'admin')),
    group_id      INTEGER NOT NULL REFERENCES groups(id),
    created_at    INTEGER NOT NULL
);
CREATE INDEX users_group ON users(group_id);

-- Failed logins per key ('user:NAME' or 'addr:IP') inside the current window.
CREATE TABLE login_failures (
    key          TEXT    PRIMARY KEY,
    failures     INTEGER NOT NULL,
    window_start INTEGER NOT NULL
);

CREATE TABLE audit_log (
    id       INTEGER PRIMARY KEY,
    at       INTEGER NOT NULL,
    actor_id INTEGER REFERENCES users(id),
    action   TEXT    NOT NULL,
    detail   TEXT    NOT NULL
);
CREATE INDEX audit_log_at ON audit_log(at);

-- tower-sessions' SQLite store (same shape as its own migrate()).
CREATE TABLE tower_sessions (
    id          TEXT    PRIMARY KEY NOT NULL,
    data        BLOB    NOT NULL,
    expiry_date INTEGER NOT NULL
);
