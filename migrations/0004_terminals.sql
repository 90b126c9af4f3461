-- Browser terminal sessions (issue 10): who opened a terminal on which
-- machine, when, from which server process, and when and why it closed.
-- The audit log gets a row at open and at close as well; this table is
-- what the admin console lists and how an admin's "close" reaches the
-- server process that holds the session.
CREATE TABLE terminal_sessions (
    id                 INTEGER PRIMARY KEY,
    machine_id         INTEGER NOT NULL REFERENCES machines(id),
    user_id            INTEGER NOT NULL REFERENCES users(id),
    -- Random id of the gantry process holding the WebSocket.
    server             TEXT    NOT NULL,
    client_addr        TEXT    NOT NULL DEFAULT '',
    opened_at          INTEGER NOT NULL,
    -- Renewed by the holding process while the session is open; a session
    -- whose process died is closed by whichever process sees it stale.
    seen_at            INTEGER NOT NULL,
    closed_at          INTEGER,
    close_reason       TEXT    NOT NULL DEFAULT '',
    -- Set when an admin asks for the session to be closed.
    close_requested_by INTEGER REFERENCES users(id)
);
CREATE INDEX terminal_sessions_open ON terminal_sessions (server) WHERE closed_at IS NULL;
CREATE INDEX terminal_sessions_recent ON terminal_sessions (opened_at);
