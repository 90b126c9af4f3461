-- What a download needs to know that the bytes it opened are the listed
-- file's. A replace moves its new copies onto the listed file's key before
-- its row is rewritten (and a failed one moves them back): meanwhile the
-- key may hold bytes the row does not describe.
--   placing:  1 from the moment a replace may move copies until its row is
--             rewritten or the listed file is back (0 otherwise);
--   placings: how many replaces began placing; a download reads it before
--             and after opening the file, and a change means a replace
--             came between.
ALTER TABLE dataset_files ADD COLUMN placing INTEGER NOT NULL DEFAULT 0;
ALTER TABLE dataset_files ADD COLUMN placings INTEGER NOT NULL DEFAULT 0;
