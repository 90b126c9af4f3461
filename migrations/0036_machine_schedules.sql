-- Schedules and queued starts (issue 35, part 1). Each concern has its own
-- table, so no existing table changes shape.

-- A dev machine's schedule: daily stop and start times (HH:MM in its
-- owner's time zone) and a stop after N hours running. `checked_until`:
-- daily times up to this instant were handled (the last pass, or when the
-- schedule was set), so each occurrence fires once, even across restarts.
CREATE TABLE machine_schedules (
    machine_id       INTEGER PRIMARY KEY REFERENCES machines(id),
    stop_at          TEXT CHECK (stop_at IS NULL OR length(stop_at) = 5),
    start_at         TEXT CHECK (start_at IS NULL OR length(start_at) = 5),
    stop_after_hours INTEGER CHECK (stop_after_hours IS NULL OR stop_after_hours BETWEEN 1 AND 8760),
    checked_until    INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);

-- A user's time zone (IANA name, validated against the bundled rules);
-- none is UTC.
CREATE TABLE user_time_zones (
    user_id   INTEGER PRIMARY KEY REFERENCES users(id),
    time_zone TEXT    NOT NULL
);

-- The group's longest run without a stop, in hours (0: no limit); none
-- is no limit.
CREATE TABLE group_run_limits (
    group_id      INTEGER PRIMARY KEY REFERENCES groups(id),
    max_run_hours INTEGER NOT NULL CHECK (max_run_hours BETWEEN 0 AND 8760)
);

-- The max-run warning given to a machine's current run: one given before
-- its last start is of an earlier run and does not count.
CREATE TABLE machine_run_warnings (
    machine_id INTEGER PRIMARY KEY REFERENCES machines(id),
    warned_at  INTEGER NOT NULL,
    until      INTEGER NOT NULL
);

-- Starts waiting for GPUs: served first come, first served per group
-- (by queued_at, then id). A machine waits at most once.
CREATE TABLE start_queue (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    machine_id   INTEGER NOT NULL UNIQUE REFERENCES machines(id),
    group_id     INTEGER NOT NULL REFERENCES groups(id),
    requester_id INTEGER NOT NULL REFERENCES users(id),
    queued_at    INTEGER NOT NULL,
    why          TEXT    NOT NULL
);
CREATE INDEX start_queue_line ON start_queue(group_id, queued_at, id);
