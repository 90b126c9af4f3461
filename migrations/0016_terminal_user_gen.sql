-- The session generation of the account that opened a terminal, as it was
-- then. Disabling an account, demoting it or resetting its password bumps
-- `users.session_gen`; the terminal watcher closes every open terminal
-- whose account no longer has the generation it was opened with, so a
-- shell does not outlive the account's right to it.
ALTER TABLE terminal_sessions ADD COLUMN user_gen INTEGER NOT NULL DEFAULT 0;
