-- The file a resumable upload holds bytes of, as the upload page names it
-- (X-Gantry-Fingerprint: the file's modification time and a hash of its
-- first and last bytes). The page's unfinished upload of a name and length
-- was continued for whatever file was chosen next with that name and
-- length, and the listed file was the first file's bytes followed by the
-- second's. Now an upload begun for a different fingerprint starts over.
-- NULL: begun by a script, which sends none (and is found, as before, by
-- name and length).
ALTER TABLE dataset_uploads ADD COLUMN fingerprint TEXT;
