-- GPUs given back while the container pinned to them may still run. A
-- delete or create that gives up on an unreachable engine closes its
-- machine and refunds the group at once (platform/src/dispatch/finish.rs),
-- leaving the container to the collector. Offered again before the
-- collector removed it, such a GPU went to a new machine whose container
-- ran next to the old one on the same card. Everything that offers GPUs
-- skips one listed here (as it skips gpus_gone); the collector deletes the
-- row once the node's engine lists no container of that machine
-- (platform/src/reconcile.rs). Removing the node deletes its GPUs, and so
-- their rows here.

CREATE TABLE gpus_left_to_collector (
    gpu_id     INTEGER PRIMARY KEY REFERENCES gpus(id) ON DELETE CASCADE,
    -- The closed machine whose container may still hold the GPU.
    machine_id INTEGER NOT NULL,
    since      INTEGER NOT NULL
);
