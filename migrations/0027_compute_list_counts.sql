-- The compute tasks list is a window like the machines and tasks lists
-- (migration 0014): its per-state counts come from this table, kept by
-- triggers in the same transaction as every change to a compute task, so
-- a page reads one row per (group, person, state) however many tasks
-- there are. Columns are named as in `compute_tasks` so that the list
-- filters apply to both unchanged. A later migration that rebuilds
-- `compute_tasks` (create, copy, drop, rename) drops these triggers with
-- the old table and must create them again.

CREATE TABLE compute_task_counts (
    group_id     INTEGER NOT NULL,
    requester_id INTEGER NOT NULL,
    state        TEXT    NOT NULL,
    n            INTEGER NOT NULL,
    PRIMARY KEY (group_id, requester_id, state)
) WITHOUT ROWID;

INSERT INTO compute_task_counts (group_id, requester_id, state, n)
    SELECT group_id, requester_id, state, COUNT(*) FROM compute_tasks GROUP BY group_id, requester_id, state;

CREATE TRIGGER compute_task_counts_insert AFTER INSERT ON compute_tasks BEGIN
    INSERT INTO compute_task_counts (group_id, requester_id, state, n) VALUES (NEW.group_id, NEW.requester_id, NEW.state, 1)
        ON CONFLICT (group_id, requester_id, state) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER compute_task_counts_delete AFTER DELETE ON compute_tasks BEGIN
    UPDATE compute_task_counts SET n = n - 1
        WHERE group_id = OLD.group_id AND requester_id = OLD.requester_id AND state = OLD.state;
END;

CREATE TRIGGER compute_task_counts_update AFTER UPDATE OF group_id, requester_id, state ON compute_tasks
    WHEN OLD.group_id IS NOT NEW.group_id OR OLD.requester_id IS NOT NEW.requester_id OR OLD.state IS NOT NEW.state
BEGIN
    UPDATE compute_task_counts SET n = n - 1
        WHERE group_id = OLD.group_id AND requester_id = OLD.requester_id AND state = OLD.state;
    INSERT INTO compute_task_counts (group_id, requester_id, state, n) VALUES (NEW.group_id, NEW.requester_id, NEW.state, 1)
        ON CONFLICT (group_id, requester_id, state) DO UPDATE SET n = n + 1;
END;

-- The requester filter walks that person's tasks newest first (an index
-- on a column keeps its rows in id order per value); without it the
-- window read every task. The group and state filters already have
-- `compute_tasks_group(group_id, id)` and `compute_tasks_queue(state, id)`.
CREATE INDEX compute_tasks_requester ON compute_tasks(requester_id);
