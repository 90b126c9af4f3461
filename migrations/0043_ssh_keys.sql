-- SSH public keys (issue #34): each identifies one account to the SSH
-- gateway. A key belongs to one account only: its SHA-256 fingerprint is
-- unique across the installation.
CREATE TABLE ssh_keys (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id      INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name         TEXT    NOT NULL,
    -- "ssh-ed25519", "ecdsa-sha2-nistp256", "ssh-rsa", ...
    algorithm    TEXT    NOT NULL,
    -- Key size in bits (RSA: the modulus; others: the curve's).
    bits         INTEGER NOT NULL,
    -- "SHA256:..." as `ssh-keygen -lf` prints it.
    fingerprint  TEXT    NOT NULL UNIQUE,
    -- The key in OpenSSH's one-line form, without its comment.
    public_key   TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER
);
CREATE INDEX ssh_keys_user ON ssh_keys(user_id, id);
