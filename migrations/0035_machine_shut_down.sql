-- Stop and start (issue 35, part 1). A machine its owner stopped is put
-- away as the idle reclaim puts one away (snapshot, container removed,
-- GPUs back: state `reclaimed`); this says it was its owner's stop, so the
-- portal shows it as "shut down" with a Start button rather than as an
-- idle machine to restore. Only read while the state is `reclaimed`; each
-- reclaim or stop sets it again.
ALTER TABLE machines ADD COLUMN shut_down INTEGER NOT NULL DEFAULT 0 CHECK (shut_down IN (0, 1));
