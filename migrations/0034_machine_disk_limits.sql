-- A machine's own filesystem (its container's writable layer, everything
-- outside /data) is limited per group, snapshots count bytes as well as a
-- number, and nodes record their free disk (issue 33, item 8). Sizes are
-- MB of 1,000,000 bytes, as snapshot sizes are shown.

-- Per machine; 0: no limit. Enforced by the engine where its storage
-- driver can (--storage-opt size), else by the disk watcher.
ALTER TABLE groups ADD COLUMN root_disk_mb INTEGER NOT NULL DEFAULT 50000 CHECK (root_disk_mb >= 0);
-- The group's snapshots' images together; 0: no limit.
ALTER TABLE groups ADD COLUMN snapshot_disk_mb INTEGER NOT NULL DEFAULT 500000 CHECK (snapshot_disk_mb >= 0);

-- The disk watcher's last reading of the machine's writable layer (bytes,
-- when), and whether its owner has been warned since it was last under
-- the warning share (so a warning is written once, not every pass).
ALTER TABLE machines ADD COLUMN root_disk_bytes INTEGER;
ALTER TABLE machines ADD COLUMN root_disk_at INTEGER;
ALTER TABLE machines ADD COLUMN root_disk_warned INTEGER NOT NULL DEFAULT 0;

-- Free bytes on the disk holding the node's engine data, and total, as
-- last measured (NULL: nothing can measure it, e.g. a remote engine).
ALTER TABLE nodes ADD COLUMN disk_free_bytes INTEGER;
ALTER TABLE nodes ADD COLUMN disk_total_bytes INTEGER;
ALTER TABLE nodes ADD COLUMN disk_checked_at INTEGER;

-- machine_events gains the disk watcher's two kinds; SQLite cannot change
-- a CHECK constraint, so the table is rebuilt (db::migrate runs
-- migrations with foreign keys off; nothing refers to machine_events).
-- Columns and constraints as migration 0008 made them, no other migration
-- altered it; its one index is made again below.
CREATE TABLE machine_events_rebuilt (
    id         INTEGER PRIMARY KEY,
    machine_id INTEGER NOT NULL REFERENCES machines(id),
    at_ms      INTEGER NOT NULL,
    kind       TEXT    NOT NULL CHECK (kind IN ('reclaim_warning', 'reclaim_cleared', 'extended', 'reclaimed', 'restored',
                                                'rebalanced', 'rebalance_refused', 'snapshot',
                                                'disk_warning', 'disk_stopped')),
    detail     TEXT    NOT NULL DEFAULT ''
);
INSERT INTO machine_events_rebuilt (id, machine_id, at_ms, kind, detail)
    SELECT id, machine_id, at_ms, kind, detail FROM machine_events;
DROP TABLE machine_events;
ALTER TABLE machine_events_rebuilt RENAME TO machine_events;
CREATE INDEX machine_events_machine ON machine_events(machine_id, at_ms);
