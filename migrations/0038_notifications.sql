-- Notifications (issue 35, part 2). A notification is written in the
-- commit of the event it reports (a reclaim warning, a compute task's end,
-- a quota change...), together with one delivery row per channel its user
-- chose for its kind (the outbox): it exists if and only if the event
-- committed, and a delivery is never lost to a crash between the two.
CREATE TABLE notifications (
    id         INTEGER PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    kind       TEXT    NOT NULL,
    subject    TEXT    NOT NULL,
    body       TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    -- NULL while unread.
    read_at    INTEGER
);
CREATE INDEX notifications_user ON notifications(user_id, id);
CREATE INDEX notifications_unread ON notifications(user_id) WHERE read_at IS NULL;

-- Each user's channels. The portal always shows every notification; email
-- and webhook get the kinds listed in their column (comma-separated kind
-- names; empty: none). The webhook secret signs bodies (HMAC-SHA256), so it
-- is kept as is: it must be read back to sign.
CREATE TABLE notification_settings (
    user_id        INTEGER PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    email          TEXT,
    email_kinds    TEXT    NOT NULL DEFAULT '',
    webhook_url    TEXT,
    webhook_secret TEXT,
    webhook_kinds  TEXT    NOT NULL DEFAULT '',
    updated_at     INTEGER NOT NULL
);

-- One send of one notification by one channel, to the target chosen when it
-- was queued. `sending` rows are claimed under a lease (lease_owner,
-- lease_expires, fenced by attempts) so two servers never send one twice; a
-- claim whose lease ran out is claimed again.
CREATE TABLE notification_deliveries (
    id              INTEGER PRIMARY KEY,
    notification_id INTEGER NOT NULL REFERENCES notifications(id) ON DELETE CASCADE,
    user_id         INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    channel         TEXT    NOT NULL CHECK (channel IN ('email', 'webhook')),
    target          TEXT    NOT NULL,
    state           TEXT    NOT NULL CHECK (state IN ('pending', 'sending', 'sent', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    lease_owner     TEXT,
    lease_expires   INTEGER,
    last_error      TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);
CREATE INDEX notification_deliveries_due ON notification_deliveries(state, next_attempt_at);
CREATE INDEX notification_deliveries_user ON notification_deliveries(user_id, id);

-- Every attempt and how it went, listed for the user.
CREATE TABLE notification_attempts (
    id          INTEGER PRIMARY KEY,
    delivery_id INTEGER NOT NULL REFERENCES notification_deliveries(id) ON DELETE CASCADE,
    attempt     INTEGER NOT NULL,
    at          INTEGER NOT NULL,
    ok          INTEGER NOT NULL CHECK (ok IN (0, 1)),
    -- The HTTP status of a webhook's answer, when there was one.
    status_code INTEGER,
    error       TEXT
);
CREATE INDEX notification_attempts_delivery ON notification_attempts(delivery_id, id);
