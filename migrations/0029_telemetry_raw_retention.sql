-- How long this installation keeps raw GPU samples (GANTRY_TELEMETRY_RAW_HOURS),
-- written by the server at each start. The idle and hot windows are read
-- from raw samples only, so a window longer than this could never be
-- covered: saving one is refused (gantry_core::reclaim::windows_outlast_samples).
ALTER TABLE reclaim_settings ADD COLUMN telemetry_raw_secs INTEGER NOT NULL DEFAULT 86400 CHECK (telemetry_raw_secs > 0);
