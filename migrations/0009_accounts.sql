-- Account lifecycle: disabled accounts, temporary passwords, ending an
-- account's sessions at once, and user ids that are never reused.
--
-- `users` is rebuilt with AUTOINCREMENT (SQLite cannot add it to a table):
-- without it a deleted user's id could be handed to the next account, and
-- anything still naming the old id (a leftover session, an audit row) would
-- attach to the new one. Migrations run with foreign keys off, so dropping
-- the old table cascades nothing; the ids are copied as they are.

CREATE TABLE users_rebuilt (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    username             TEXT    NOT NULL UNIQUE,
    password_hash        TEXT    NOT NULL,
    role                 TEXT    NOT NULL CHECK (role IN ('user', 'admin')),
    group_id             INTEGER NOT NULL REFERENCES groups(id),
    created_at           INTEGER NOT NULL,
    -- A disabled account cannot sign in and its open sessions answer 401.
    disabled             INTEGER NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1)),
    -- Set when an admin sets a temporary password: the next sign-in must
    -- choose a new one before anything else.
    must_change_password INTEGER NOT NULL DEFAULT 0 CHECK (must_change_password IN (0, 1)),
    -- Sessions remember the generation they were made in; bumping it
    -- (disable, role change, password change or reset) ends them all.
    session_gen          INTEGER NOT NULL DEFAULT 0
);

INSERT INTO users_rebuilt (id, username, password_hash, role, group_id, created_at)
    SELECT id, username, password_hash, role, group_id, created_at FROM users;

DROP TABLE users;
ALTER TABLE users_rebuilt RENAME TO users;
CREATE INDEX users_group ON users(group_id);

-- The audit page filters by actor and action, newest first.
CREATE INDEX audit_log_actor ON audit_log(actor_id, id);
CREATE INDEX audit_log_action ON audit_log(action, id);
