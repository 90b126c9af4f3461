-- Single sign-on (issue #37): directory groups mapped to Gantry groups and
-- roles, and directory accounts linked to Gantry accounts.
--
-- A mapping: members of `directory_group` (an LDAP group DN or an OIDC
-- groups claim value, compared ignoring ASCII case) belong to `group_id`
-- with `role`. Several matching: the lowest priority chooses the group;
-- admin when any matching mapping grants it (gantry_core::sso_mapping).
CREATE TABLE sso_group_mappings (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    directory_group TEXT    NOT NULL,
    -- A group with mappings cannot be deleted from under them.
    group_id        INTEGER NOT NULL REFERENCES groups(id),
    role            TEXT    NOT NULL CHECK (role IN ('user', 'admin')),
    priority        INTEGER NOT NULL DEFAULT 100,
    created_at      INTEGER NOT NULL
);
CREATE UNIQUE INDEX sso_group_mappings_dir ON sso_group_mappings(lower(directory_group));

-- A Gantry account made by (or linked to) a directory sign-in: found again
-- by provider and subject (the LDAP DN, or the OIDC issuer and subject),
-- never by user name alone, so a local account of the same name is never
-- taken over.
CREATE TABLE external_identities (
    provider       TEXT    NOT NULL CHECK (provider IN ('ldap', 'oidc')),
    subject        TEXT    NOT NULL,
    user_id        INTEGER NOT NULL UNIQUE REFERENCES users(id) ON DELETE CASCADE,
    created_at     INTEGER NOT NULL,
    last_sign_in   INTEGER NOT NULL,
    -- Set when a sign-in found the account in no mapped group and disabled
    -- it: a later sign-in with a mapped group enables it again. An account
    -- an admin disabled stays disabled.
    disabled_by_sso INTEGER NOT NULL DEFAULT 0 CHECK (disabled_by_sso IN (0, 1)),
    PRIMARY KEY (provider, subject)
);
