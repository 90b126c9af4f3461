-- The portal's list pages read one window of rows plus per-state counts.
-- These covering indexes let the counts come from the index alone, so a
-- page costs the same with 50 or 50,000 rows behind it.
CREATE INDEX machines_list ON machines(group_id, workload, state);
CREATE INDEX machines_list_all ON machines(workload, state);
CREATE INDEX tasks_counts ON tasks(group_id, state);
CREATE INDEX tasks_counts_all ON tasks(state, kind);
