-- Upload ids are never handed out again: `dataset_uploads` is rebuilt with
-- AUTOINCREMENT (SQLite cannot add it to a table). Without it a finished
-- or cancelled upload's id went to the next upload, and a request still
-- holding the old one (a stale cancel, a late clean-up) could claim or
-- delete the new upload's row. Migrations run with foreign keys off; no
-- table refers to this one. The UNIQUE constraints bring their indexes.

CREATE TABLE dataset_uploads_rebuilt (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    version_id     INTEGER NOT NULL REFERENCES dataset_versions(id) ON DELETE CASCADE,
    name           TEXT    NOT NULL,
    temp_key       TEXT    NOT NULL UNIQUE,
    user_id        INTEGER NOT NULL REFERENCES users(id),
    -- Bytes reserved against the quota: the declared length (resumable
    -- uploads, a known Content-Length), NULL when unknown; set to the
    -- bytes received once the upload is complete and being placed.
    total_size     INTEGER CHECK (total_size IS NULL OR total_size >= 0),
    replace        INTEGER NOT NULL DEFAULT 0,
    -- 1: kept after a cut connection so it can resume; 0: one request only.
    resumable      INTEGER NOT NULL DEFAULT 0,
    created_at     INTEGER NOT NULL,
    -- The writer's lease (platform/src/datasets/writing.rs).
    writer         TEXT,
    writer_expires INTEGER NOT NULL DEFAULT 0,
    UNIQUE (version_id, name)
);

INSERT INTO dataset_uploads_rebuilt (id, version_id, name, temp_key, user_id, total_size, replace, resumable, created_at, writer, writer_expires)
    SELECT id, version_id, name, temp_key, user_id, total_size, replace, resumable, created_at, writer, writer_expires FROM dataset_uploads;

DROP TABLE dataset_uploads;
ALTER TABLE dataset_uploads_rebuilt RENAME TO dataset_uploads;
