-- The list windows walk an index newest first and stop after one page.
-- Three cases had no index in id order and sorted every matching row in a
-- temporary B-tree instead (1.6 ms for 5,000 machines, growing with the
-- table): an admin's unfiltered machines list (`machines_list_all` is
-- ordered by state first), the owner filter, and the task kind filter. An
-- index on a column keeps its rows in rowid (= id) order per value.
-- `platform/tests/suite/list_plans.rs` checks every filter combination.
CREATE INDEX machines_recent ON machines(workload, id) WHERE state <> 'deleted';
CREATE INDEX machines_owner ON machines(owner_id);
CREATE INDEX tasks_kind ON tasks(kind);
