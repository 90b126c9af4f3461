-- GPUs their node no longer reports, kept only because a machine holds
-- them. Registration deletes a GPU that is no longer reported but keeps
-- one a machine still holds, so the machine is not disturbed
-- (platform/src/cluster.rs, sync_gpus). Without a mark, that row became an
-- ordinary free GPU once its machine let it go: admissions gave it out (a
-- container asked for a UUID the host does not have), and the capacity
-- pages and the compute matcher counted it. Everything that offers GPUs
-- skips one listed here, and releasing its machine deletes its gpus row
-- (ids are never reused, migration 0018, so its telemetry stays its own).
--
-- A table of its own rather than a column on gpus: the mark is rare and
-- says nothing about the card, and gpus keeps the shape migration 0018
-- gave it (whose test compares it). Deleting the GPU deletes its mark.

CREATE TABLE gpus_gone (
    gpu_id  INTEGER PRIMARY KEY REFERENCES gpus(id) ON DELETE CASCADE,
    -- When registration first found it missing: how long it has been gone.
    since   INTEGER NOT NULL
);
