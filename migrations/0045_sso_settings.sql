-- Single sign-on settings (issue #37), one row. With `local_passwords_off`
-- set, only the break-glass admin (this name, or --break-glass-admin) may
-- still sign in with a local password; everyone else signs in through the
-- directory.
CREATE TABLE sso_settings (
    id                  INTEGER PRIMARY KEY CHECK (id = 1),
    local_passwords_off INTEGER NOT NULL DEFAULT 0 CHECK (local_passwords_off IN (0, 1)),
    break_glass_admin   TEXT
);
INSERT INTO sso_settings (id, local_passwords_off, break_glass_admin) VALUES (1, 0, NULL);
