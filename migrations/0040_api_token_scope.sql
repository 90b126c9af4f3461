-- A token's scope (issue 35): read (GET only), write (what its owner may,
-- but the admin console), admin (an admin's, admin console included).
-- Tokens made before scopes existed did everything their owner could but
-- the admin console (which had no API): they become write.
ALTER TABLE api_tokens ADD COLUMN scope TEXT NOT NULL DEFAULT 'write'
    CHECK (scope IN ('read', 'write', 'admin'));
