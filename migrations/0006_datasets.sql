-- Datasets (PRODUCT C): definitions shared by the platform and every
-- region, their versions, the files in them, uploads in progress and the
-- byte quota of each group. Files live in two stores (the central one and
-- the owning region's); these rows list only files whose both copies were
-- verified.

CREATE TABLE datasets (
    id          INTEGER PRIMARY KEY,
    code        TEXT    NOT NULL UNIQUE,
    name        TEXT    NOT NULL,
    region_id   INTEGER NOT NULL REFERENCES regions(id),
    category    TEXT    NOT NULL CHECK (category IN ('images', 'text', 'audio', 'video', 'tabular', 'other')),
    description TEXT    NOT NULL DEFAULT '',
    -- 'group': only the owning group (and admins) see it; 'public': every group.
    visibility  TEXT    NOT NULL CHECK (visibility IN ('group', 'public')),
    group_id    INTEGER NOT NULL REFERENCES groups(id),
    created_by  INTEGER NOT NULL REFERENCES users(id),
    created_at  INTEGER NOT NULL
);
CREATE INDEX datasets_group ON datasets(group_id);

CREATE TABLE dataset_versions (
    id         INTEGER PRIMARY KEY,
    dataset_id INTEGER NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,
    name       TEXT    NOT NULL,
    -- Set once: a sealed version is read-only.
    sealed_at  INTEGER,
    created_by INTEGER NOT NULL REFERENCES users(id),
    created_at INTEGER NOT NULL,
    UNIQUE (dataset_id, name)
);

CREATE TABLE dataset_files (
    id          INTEGER PRIMARY KEY,
    version_id  INTEGER NOT NULL REFERENCES dataset_versions(id) ON DELETE CASCADE,
    name        TEXT    NOT NULL,
    size        INTEGER NOT NULL CHECK (size >= 0),
    sha256      TEXT    NOT NULL,
    uploaded_by INTEGER NOT NULL REFERENCES users(id),
    uploaded_at INTEGER NOT NULL,
    UNIQUE (version_id, name)
);

-- An upload in progress holds its name in the version (two uploads of one
-- name never race) and reserves its declared size against the quota.
-- temp_key names its temporary object in both stores.
CREATE TABLE dataset_uploads (
    id          INTEGER PRIMARY KEY,
    version_id  INTEGER NOT NULL REFERENCES dataset_versions(id) ON DELETE CASCADE,
    name        TEXT    NOT NULL,
    temp_key    TEXT    NOT NULL UNIQUE,
    user_id     INTEGER NOT NULL REFERENCES users(id),
    -- Declared length (resumable uploads, or a known Content-Length); NULL: unknown.
    total_size  INTEGER CHECK (total_size IS NULL OR total_size >= 0),
    replace     INTEGER NOT NULL DEFAULT 0,
    -- 1: kept after a cut connection so it can resume; 0: one request only.
    resumable   INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL,
    UNIQUE (version_id, name)
);

-- Bytes a group's datasets may hold; a group without a row gets the
-- server's default (--dataset-quota-gb).
CREATE TABLE dataset_quotas (
    group_id  INTEGER PRIMARY KEY REFERENCES groups(id) ON DELETE CASCADE,
    max_bytes INTEGER NOT NULL CHECK (max_bytes >= 0)
);
