-- Sealed dataset versions mounted read-only into a machine (dev machine or
-- compute task). The host directory is resolved once, when the request is
-- accepted, so every later (re)start, reinstall, restore or move of the
-- machine mounts the same files. A live machine's mount keeps its version
-- from being deleted (checked by the platform); a closed machine's rows go
-- with the version.
CREATE TABLE machine_datasets (
    machine_id INTEGER NOT NULL REFERENCES machines(id) ON DELETE CASCADE,
    version_id INTEGER NOT NULL REFERENCES dataset_versions(id) ON DELETE CASCADE,
    host_dir   TEXT    NOT NULL,
    target     TEXT    NOT NULL,
    PRIMARY KEY (machine_id, version_id)
);
CREATE INDEX machine_datasets_version ON machine_datasets(version_id);

-- A compute task's resolved mounts (JSON list), handed to its machine when
-- the matcher admits it.
ALTER TABLE compute_tasks ADD COLUMN datasets TEXT NOT NULL DEFAULT '[]';
