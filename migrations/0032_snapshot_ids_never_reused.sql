-- Snapshot ids are never handed out again: `snapshots` is rebuilt with
-- AUTOINCREMENT (SQLite cannot add it to a table). Without it, deleting the
-- snapshot with the highest id gave that id to the next snapshot taken, and
-- with it the deleted one's image tag (`gantry-snap-<instance>:s<id>`,
-- platform/src/transitions/snapshot.rs) and the internal image row named
-- after that tag: a machine made or restored from the deleted snapshot
-- then named the new, unrelated one as its image, and anything holding the
-- old id without a foreign key (machines.from_snapshot_id and
-- restore_snapshot_id, task payloads) named the new snapshot.
--
-- snapshots refers to itself (parent_id ON DELETE SET NULL): db::migrate
-- runs migrations with foreign keys off, so the DROP below nulls nothing,
-- and runs `PRAGMA foreign_key_check` after. Columns and constraints as
-- migration 0008 made them plus base_image_id (migration 0028; no other
-- migration altered snapshots); the UNIQUE constraint brings its index,
-- the two indexes below are the only others, and snapshots has no trigger.
-- parent_id names `snapshots`, the table this one becomes once renamed.

CREATE TABLE snapshots_rebuilt (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
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
    created_at  INTEGER NOT NULL,
    base_image_id INTEGER REFERENCES images(id)
);

INSERT INTO snapshots_rebuilt (id, name, image_ref, machine_id, machine_name, node_id, owner_id, group_id, parent_id, origin, state,
                               size_bytes, message, created_at, base_image_id)
    SELECT id, name, image_ref, machine_id, machine_name, node_id, owner_id, group_id, parent_id, origin, state,
           size_bytes, message, created_at, base_image_id FROM snapshots;

DROP TABLE snapshots;
ALTER TABLE snapshots_rebuilt RENAME TO snapshots;

CREATE INDEX snapshots_group ON snapshots(group_id, id);
CREATE INDEX snapshots_machine ON snapshots(machine_id, id);

-- AUTOINCREMENT only stays above ids the table has held since it was made:
-- the counter starts above every snapshot id anything still holds —
-- machines and task payloads (no foreign key), and the internal image
-- rows named after a snapshot's tag, which outlive a deleted snapshot.
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'snapshots', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'snapshots');
UPDATE sqlite_sequence SET seq = max(
        seq,
        (SELECT coalesce(max(id), 0) FROM snapshots),
        (SELECT coalesce(max(from_snapshot_id), 0) FROM machines),
        (SELECT coalesce(max(restore_snapshot_id), 0) FROM machines),
        (SELECT coalesce(max(max(coalesce(CAST(json_extract(payload, '$.snapshot_id') AS INTEGER), 0),
                                 coalesce(CAST(json_extract(payload, '$.from_snapshot_id') AS INTEGER), 0))), 0)
           FROM tasks WHERE json_valid(payload)),
        (SELECT coalesce(max(CAST(substr(reference, length('gantry-snap-' || s.value || ':s') + 1) AS INTEGER)), 0)
           FROM images, settings s
           WHERE s.key = 'instance_id' AND internal = 1
             AND substr(reference, 1, length('gantry-snap-' || s.value || ':s')) = 'gantry-snap-' || s.value || ':s'))
    WHERE name = 'snapshots';
