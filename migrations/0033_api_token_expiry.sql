-- API tokens expire (issue 33): a token made by whoever held a session for a
-- while must not work for ever. New tokens get the server's token lifetime
-- (`--token-lifetime-days`, 90 by default); the ones there are get 90 days
-- from when they were made (already past for some: those stop working now).
-- `tokens::authenticate` lets in only a token whose `expires_at` is still
-- ahead; a NULL would never be let in.
ALTER TABLE api_tokens ADD COLUMN expires_at INTEGER;
UPDATE api_tokens SET expires_at = created_at + 90 * 86400;

-- Disabling an account now revokes its tokens (re-enabling it used to bring
-- them back); the tokens of accounts disabled today are revoked with it, so
-- that enabling one of them later does not revive them either (audited,
-- one row per account, as `accounts::set_disabled` now writes).
INSERT INTO audit_log (at, actor_id, action, detail)
SELECT CAST(strftime('%s', 'now') AS INTEGER), NULL, 'token.revoke',
       'user ' || u.username || ' is disabled; ' || COUNT(*) || ' API token(s) revoked'
  FROM api_tokens t JOIN users u ON u.id = t.user_id
 WHERE t.revoked_at IS NULL AND u.disabled
 GROUP BY u.id;
UPDATE api_tokens SET revoked_at = CAST(strftime('%s', 'now') AS INTEGER)
 WHERE revoked_at IS NULL AND user_id IN (SELECT id FROM users WHERE disabled);
