-- Dataset version ids are never handed out again: `dataset_versions` is
-- rebuilt with AUTOINCREMENT (SQLite cannot add it to a table). Without it,
-- deleting the version with the highest id gave that id to the next
-- version created, and work still holding the old id could take the new
-- version for the deleted one: a replace being undone checks that its
-- version still exists before it puts the listed file back, and would have
-- put the deleted version's old file under a recreated version's name.
--
-- dataset_files, dataset_uploads and machine_datasets refer to this table
-- (ON DELETE CASCADE): db::migrate runs migrations with foreign keys off,
-- so the DROP below deletes nothing else, and runs `PRAGMA
-- foreign_key_check` after. Columns and constraints as migration 0006 made
-- them (no later migration altered dataset_versions); the UNIQUE
-- constraint brings its index, and the table has no other index or trigger.

CREATE TABLE dataset_versions_rebuilt (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset_id INTEGER NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,
    name       TEXT    NOT NULL,
    -- Set once: a sealed version is read-only.
    sealed_at  INTEGER,
    created_by INTEGER NOT NULL REFERENCES users(id),
    created_at INTEGER NOT NULL,
    UNIQUE (dataset_id, name)
);

INSERT INTO dataset_versions_rebuilt (id, dataset_id, name, sealed_at, created_by, created_at)
    SELECT id, dataset_id, name, sealed_at, created_by, created_at FROM dataset_versions;

DROP TABLE dataset_versions;
ALTER TABLE dataset_versions_rebuilt RENAME TO dataset_versions;

-- AUTOINCREMENT only stays above ids the table has held since it was made:
-- queued compute tasks name their mounts' versions by id in JSON (no
-- foreign key), so the counter starts above those too.
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'dataset_versions', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'dataset_versions');
UPDATE sqlite_sequence SET seq = max(
        seq,
        (SELECT coalesce(max(id), 0) FROM dataset_versions),
        (SELECT coalesce(max(version_id), 0) FROM machine_datasets),
        (SELECT coalesce(max(CAST(json_extract(j.value, '$.version_id') AS INTEGER)), 0)
           FROM compute_tasks c, json_each(c.datasets) j))
    WHERE name = 'dataset_versions';
