-- Regions a group may use (PRODUCT A.2), like group_gpu_models and
-- group_images: no rows for a group means "every region". Dev machines go
-- only to nodes of these regions, compute tasks are matched only to them.
CREATE TABLE group_regions (
    group_id  INTEGER NOT NULL REFERENCES groups(id) ON DELETE CASCADE,
    region_id INTEGER NOT NULL REFERENCES regions(id) ON DELETE CASCADE,
    PRIMARY KEY (group_id, region_id)
);
