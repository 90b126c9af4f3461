-- One request writes an upload at a time: the writer's lease on the row
-- (platform/src/datasets/writing.rs). NULL: nobody is writing; an expired
-- lease (a process that died mid-write) lets the next request in.
ALTER TABLE dataset_uploads ADD COLUMN writer TEXT;
ALTER TABLE dataset_uploads ADD COLUMN writer_expires INTEGER NOT NULL DEFAULT 0;
