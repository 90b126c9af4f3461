-- GPU telemetry: raw samples, 1-minute and 1-hour rollups, the latest
-- reading per GPU, and the simulated source's pattern per machine.
-- Times here are unix MILLISECONDS (at_ms, bucket_ms): samples come every
-- few seconds and a chart needs finer than a second.

-- Raw samples. machine_id is the machine that held the GPU when the sample
-- was taken, deliberately without a foreign key: the history stays
-- attributed after the machine moves or is deleted. Values NVML reports
-- as whole numbers (utilisation, temperature, watts) are stored whole, which
-- SQLite keeps in one or two bytes instead of eight.
CREATE TABLE gpu_samples (
    gpu_id       INTEGER NOT NULL,
    at_ms        INTEGER NOT NULL,
    node_id      INTEGER NOT NULL,
    machine_id   INTEGER NULL,
    util_pct     REAL    NOT NULL,
    mem_used_mb  INTEGER NOT NULL,
    mem_total_mb INTEGER NOT NULL,
    temp_c       REAL    NOT NULL,
    power_w      REAL    NOT NULL,
    throttled    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (gpu_id, at_ms)
) WITHOUT ROWID;

-- Rollups: one row per GPU, bucket and holding machine (0 = free), so a
-- bucket in which the GPU changed hands stays attributed to both holders.
-- `minutes` is how many 1-minute buckets a row covers (1 for gpu_rollup_1m):
-- GPU-hours held are counted from it, independent of the sample interval.
CREATE TABLE gpu_rollup_1m (
    gpu_id      INTEGER NOT NULL,
    bucket_ms   INTEGER NOT NULL,
    machine_id  INTEGER NOT NULL,
    node_id     INTEGER NOT NULL,
    samples     INTEGER NOT NULL,
    minutes     INTEGER NOT NULL,
    util_mean   REAL    NOT NULL,
    util_max    REAL    NOT NULL,
    mem_mean    REAL    NOT NULL,
    mem_max     INTEGER NOT NULL,
    mem_total   INTEGER NOT NULL,
    temp_mean   REAL    NOT NULL,
    temp_max    REAL    NOT NULL,
    power_mean  REAL    NOT NULL,
    power_max   REAL    NOT NULL,
    PRIMARY KEY (gpu_id, bucket_ms, machine_id)
) WITHOUT ROWID;
CREATE INDEX gpu_rollup_1m_machine ON gpu_rollup_1m(machine_id, bucket_ms);

CREATE TABLE gpu_rollup_1h (
    gpu_id      INTEGER NOT NULL,
    bucket_ms   INTEGER NOT NULL,
    machine_id  INTEGER NOT NULL,
    node_id     INTEGER NOT NULL,
    samples     INTEGER NOT NULL,
    minutes     INTEGER NOT NULL,
    util_mean   REAL    NOT NULL,
    util_max    REAL    NOT NULL,
    mem_mean    REAL    NOT NULL,
    mem_max     INTEGER NOT NULL,
    mem_total   INTEGER NOT NULL,
    temp_mean   REAL    NOT NULL,
    temp_max    REAL    NOT NULL,
    power_mean  REAL    NOT NULL,
    power_max   REAL    NOT NULL,
    PRIMARY KEY (gpu_id, bucket_ms, machine_id)
) WITHOUT ROWID;
CREATE INDEX gpu_rollup_1h_machine ON gpu_rollup_1h(machine_id, bucket_ms);

-- The newest reading of every GPU (heatmap, /metrics): one row per GPU,
-- replaced on each pass. `source` is 'nvml' or 'simulated', shown as such.
CREATE TABLE gpu_latest (
    gpu_id       INTEGER PRIMARY KEY REFERENCES gpus(id) ON DELETE CASCADE,
    at_ms        INTEGER NOT NULL,
    machine_id   INTEGER NULL,
    util_pct     REAL    NOT NULL,
    mem_used_mb  INTEGER NOT NULL,
    mem_total_mb INTEGER NOT NULL,
    temp_c       REAL    NOT NULL,
    power_w      REAL    NOT NULL,
    throttled    INTEGER NOT NULL DEFAULT 0,
    source       TEXT    NOT NULL CHECK (source IN ('nvml', 'simulated')),
    processes    TEXT    NOT NULL DEFAULT '[]'
);

-- How far the rollups have been computed (unix ms of the first minute not
-- yet rolled up), in one row.
CREATE TABLE telemetry_state (
    id             INTEGER PRIMARY KEY CHECK (id = 1),
    rolled_to_ms   INTEGER NOT NULL
);
INSERT INTO telemetry_state (id, rolled_to_ms) VALUES (1, 0);

-- Pattern of the simulated source for a machine's GPUs: NULL = from the
-- image label gantry.sim-pattern, else 'notebook'. Set by an admin.
ALTER TABLE machines ADD COLUMN sim_pattern TEXT NULL
    CHECK (sim_pattern IS NULL OR sim_pattern IN ('idle', 'training', 'notebook', 'hot'));
