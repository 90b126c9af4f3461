-- GPU ids are never handed out again: `gpus` is rebuilt with AUTOINCREMENT
-- (SQLite cannot add it to a table). Without it, deleting the GPU with the
-- highest id (its node removed, or the card gone from its node) gave that
-- id to the next GPU registered, and the telemetry tables — keyed by
-- gpu_id without a foreign key, so a GPU's history outlives it — showed
-- the removed card's charts as the new card's.
--
-- machine_gpus and gpu_latest refer to gpus (gpu_latest ON DELETE
-- CASCADE): db::migrate runs migrations with foreign keys off, so the DROP
-- below deletes nothing else, and runs `PRAGMA foreign_key_check` after.
-- Columns and constraints as migration 0002 made them (no later migration
-- altered gpus); the UNIQUE constraints bring their indexes, and gpus has
-- no other index or trigger.

CREATE TABLE gpus_rebuilt (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    node_id   INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    idx       INTEGER NOT NULL,
    uuid      TEXT    NOT NULL UNIQUE,
    model     TEXT    NOT NULL,
    memory_mb INTEGER NOT NULL DEFAULT 0,
    simulated INTEGER NOT NULL DEFAULT 0,
    UNIQUE (node_id, idx)
);

INSERT INTO gpus_rebuilt (id, node_id, idx, uuid, model, memory_mb, simulated)
    SELECT id, node_id, idx, uuid, model, memory_mb, simulated FROM gpus;

DROP TABLE gpus;
ALTER TABLE gpus_rebuilt RENAME TO gpus;

-- AUTOINCREMENT only stays above ids the table has held since it was
-- made; GPUs deleted before this migration left history under their ids,
-- so the counter starts above every id any telemetry table still holds.
-- (The copy above made the row, renamed with the table, unless gpus was
-- empty.)
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'gpus', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'gpus');
UPDATE sqlite_sequence SET seq = max(
        seq,
        (SELECT coalesce(max(id), 0) FROM gpus),
        (SELECT coalesce(max(gpu_id), 0) FROM gpu_samples),
        (SELECT coalesce(max(gpu_id), 0) FROM gpu_samples_recent),
        (SELECT coalesce(max(gpu_id), 0) FROM gpu_rollup_1m),
        (SELECT coalesce(max(gpu_id), 0) FROM gpu_rollup_1h),
        (SELECT coalesce(max(gpu_id), 0) FROM gpu_latest),
        (SELECT coalesce(max(gpu_id), 0) FROM machine_gpus))
    WHERE name = 'gpus';
