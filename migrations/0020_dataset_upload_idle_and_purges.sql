-- A resumable upload expires once nobody has touched it for the expiry
-- (Limits::resumable_expiry_secs), not once it is that old: a large file
-- sent over days stays while it is being sent. Set when the upload is
-- begun or resumed and whenever a writer claims, renews or releases it
-- (platform/src/datasets/writing.rs). Rows from before count as touched
-- when they were created.
ALTER TABLE dataset_uploads ADD COLUMN touched_at INTEGER NOT NULL DEFAULT 0;
UPDATE dataset_uploads SET touched_at = created_at;

-- The files of a deleted version still to be removed from the stores
-- (platform/src/datasets/purge.rs). Written in the transaction that
-- deletes the version's row, removed once both stores are clean, so a
-- request that hangs up or a process that stops halfway leaves a row to
-- retry rather than files outside every quota. While one is pending a new
-- version of the same name is refused: it would share the prefix.
-- No foreign key: the files must go even if the dataset goes first.
CREATE TABLE dataset_purges (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset_id     INTEGER NOT NULL,
    version_name   TEXT    NOT NULL,
    -- `{code}/{version}/` in both stores.
    prefix         TEXT    NOT NULL,
    -- Whose store holds the second copy.
    region_code    TEXT    NOT NULL,
    -- The temporary objects of the version's unfinished uploads (JSON array).
    temp_keys      TEXT    NOT NULL DEFAULT '[]',
    created_at     INTEGER NOT NULL,
    -- The runner's lease, as an upload's writer's: one runner at a time, so
    -- a slow runner never deletes files of a version created after another
    -- runner finished.
    runner         TEXT,
    runner_expires INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX dataset_purges_prefix ON dataset_purges (prefix);
