-- The list pages' per-state counts, kept up to date by triggers in the
-- same transaction as every change to a machine or task: counting from an
-- index still read every row (12 ms for 50,000 tasks), counting from these
-- tables reads one row per (group, person, kind, state) whatever the
-- tables hold. Columns are named as in `machines` and `tasks` so that the
-- list filters apply to them unchanged. A later migration that rebuilds
-- `machines` or `tasks` (create, copy, drop, rename) drops their triggers
-- with the old table and must create them again.

CREATE TABLE machine_counts (
    group_id INTEGER NOT NULL,
    owner_id INTEGER NOT NULL,
    workload TEXT    NOT NULL,
    state    TEXT    NOT NULL,
    n        INTEGER NOT NULL,
    PRIMARY KEY (group_id, owner_id, workload, state)
) WITHOUT ROWID;

INSERT INTO machine_counts (group_id, owner_id, workload, state, n)
    SELECT group_id, owner_id, workload, state, COUNT(*) FROM machines GROUP BY group_id, owner_id, workload, state;

CREATE TRIGGER machine_counts_insert AFTER INSERT ON machines BEGIN
    INSERT INTO machine_counts (group_id, owner_id, workload, state, n) VALUES (NEW.group_id, NEW.owner_id, NEW.workload, NEW.state, 1)
        ON CONFLICT (group_id, owner_id, workload, state) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER machine_counts_delete AFTER DELETE ON machines BEGIN
    UPDATE machine_counts SET n = n - 1
        WHERE group_id = OLD.group_id AND owner_id = OLD.owner_id AND workload = OLD.workload AND state = OLD.state;
END;

CREATE TRIGGER machine_counts_update AFTER UPDATE OF group_id, owner_id, workload, state ON machines
    WHEN OLD.group_id IS NOT NEW.group_id OR OLD.owner_id IS NOT NEW.owner_id OR OLD.workload IS NOT NEW.workload OR OLD.state IS NOT NEW.state
BEGIN
    UPDATE machine_counts SET n = n - 1
        WHERE group_id = OLD.group_id AND owner_id = OLD.owner_id AND workload = OLD.workload AND state = OLD.state;
    INSERT INTO machine_counts (group_id, owner_id, workload, state, n) VALUES (NEW.group_id, NEW.owner_id, NEW.workload, NEW.state, 1)
        ON CONFLICT (group_id, owner_id, workload, state) DO UPDATE SET n = n + 1;
END;

CREATE TABLE task_counts (
    group_id     INTEGER NOT NULL,
    requester_id INTEGER NOT NULL,
    kind         TEXT    NOT NULL,
    state        TEXT    NOT NULL,
    n            INTEGER NOT NULL,
    PRIMARY KEY (group_id, requester_id, kind, state)
) WITHOUT ROWID;

INSERT INTO task_counts (group_id, requester_id, kind, state, n)
    SELECT group_id, requester_id, kind, state, COUNT(*) FROM tasks GROUP BY group_id, requester_id, kind, state;

CREATE TRIGGER task_counts_insert AFTER INSERT ON tasks BEGIN
    INSERT INTO task_counts (group_id, requester_id, kind, state, n) VALUES (NEW.group_id, NEW.requester_id, NEW.kind, NEW.state, 1)
        ON CONFLICT (group_id, requester_id, kind, state) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER task_counts_delete AFTER DELETE ON tasks BEGIN
    UPDATE task_counts SET n = n - 1
        WHERE group_id = OLD.group_id AND requester_id = OLD.requester_id AND kind = OLD.kind AND state = OLD.state;
END;

CREATE TRIGGER task_counts_update AFTER UPDATE OF group_id, requester_id, kind, state ON tasks
    WHEN OLD.group_id IS NOT NEW.group_id OR OLD.requester_id IS NOT NEW.requester_id OR OLD.kind IS NOT NEW.kind OR OLD.state IS NOT NEW.state
BEGIN
    UPDATE task_counts SET n = n - 1
        WHERE group_id = OLD.group_id AND requester_id = OLD.requester_id AND kind = OLD.kind AND state = OLD.state;
    INSERT INTO task_counts (group_id, requester_id, kind, state, n) VALUES (NEW.group_id, NEW.requester_id, NEW.kind, NEW.state, 1)
        ON CONFLICT (group_id, requester_id, kind, state) DO UPDATE SET n = n + 1;
END;

-- The reclaim banner on every page looks for the few warned or reclaimed
-- machines of one group; without this it read all of the group's rows.
CREATE INDEX machines_reclaim ON machines(group_id) WHERE reclaim_deadline IS NOT NULL OR state = 'reclaimed';

-- A state-filtered tasks window walks one state's tasks newest first
-- instead of sorting them (the (state, kind) index orders by kind first).
CREATE INDEX tasks_state ON tasks(state, id);
