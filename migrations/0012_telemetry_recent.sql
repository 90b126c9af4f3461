-- Recent raw samples, keyed by time first. A sampling pass writes one
-- sample of every GPU at the same instant: appended here it lands on a few
-- pages at the right edge of one B-tree, where in gpu_samples (keyed by
-- GPU first, for range reads of one GPU) it would split a page in the
-- middle of the tree for every GPU — five to seven times slower. Every ten
-- minutes the settled part is moved into gpu_samples sorted by GPU, many
-- samples per GPU at once (telemetry::store::move_settled). Readers of raw
-- samples read both tables; a sample is in exactly one of them.
CREATE TABLE gpu_samples_recent (
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
    PRIMARY KEY (at_ms, gpu_id)
) WITHOUT ROWID;

-- Samples before moved_to_ms live in gpu_samples: a late sample for such a
-- time is written there directly, so it cannot exist in both tables.
ALTER TABLE telemetry_state ADD COLUMN moved_to_ms INTEGER NOT NULL DEFAULT 0;

-- The cluster overview sums, per machine, the held minutes and utilisation
-- of hour rows over a period: with these columns in the index a week of
-- 1,000 GPUs (168,000 rows) is read from the index alone.
DROP INDEX gpu_rollup_1h_machine;
CREATE INDEX gpu_rollup_1h_machine ON gpu_rollup_1h(machine_id, bucket_ms, minutes, util_mean);
