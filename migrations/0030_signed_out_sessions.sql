-- Sessions signed out, kept until they would have expired anyway. A request
-- that was already running when its session signed out saves the session
-- again when it ends (tower-sessions writes a changed session back, and the
-- page guard's renewal of "last seen" changes it): without this list that
-- save would bring a signed-out session, and a stolen copy of its cookie,
-- back to life.
CREATE TABLE signed_out_sessions (
    id    TEXT    PRIMARY KEY,
    until INTEGER NOT NULL
);
