-- The image a snapshot's files come from at the root: the image its machine
-- was made with, or — for a machine itself made from (or reinstalled from)
-- a snapshot — that snapshot's base. A machine made from a snapshot runs
-- under an internal `snapshot:<ref>` image row that no group's image list
-- names, so without this the group's image rule was never applied to it
-- (platform/src/snapshots/create.rs applies it to the base). NULL: not
-- known (the chain passed through a snapshot deleted since, or a compute
-- task's image); a group that lists its images is then refused.

ALTER TABLE snapshots ADD COLUMN base_image_id INTEGER REFERENCES images(id);

-- Existing snapshots, from their machine as it is now (best effort: a
-- machine reinstalled since has another image; its snapshots stay NULL).
WITH RECURSIVE base(snapshot_id, image_id) AS (
    SELECT s.id, m.image_id FROM snapshots s JOIN machines m ON m.id = s.machine_id JOIN images i ON i.id = m.image_id
    WHERE i.internal = 0
    UNION
    SELECT s.id, b.image_id FROM snapshots s JOIN machines m ON m.id = s.machine_id JOIN images i ON i.id = m.image_id
    JOIN base b ON b.snapshot_id = m.from_snapshot_id
    WHERE i.internal = 1
)
UPDATE snapshots SET base_image_id = (SELECT image_id FROM base WHERE snapshot_id = snapshots.id);
