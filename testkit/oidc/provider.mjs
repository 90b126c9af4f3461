// A real OpenID Connect provider for Gantry's tests: the certified
// `oidc-provider` package (npm) on 127.0.0.1, port 0 (or the config's
// `port`), printing "PORT <n>" on stdout once it answers. Started by
// testkit/src/oidc.rs (server tests), which kills it by PID when done, and
// by end2end/playwright.config.ts (Chromium) on a fixed port, since Gantry
// is given its issuer URL before either starts.
//
// Argument: JSON {client_id, client_secret, redirect_uris,
// post_logout_redirect_uris, users: {name: {email, groups}}, port?}. Its own
// developer sign-in pages take any password for a listed user (devInteractions).
//
// Test controls (loopback only, never part of a real provider):
//   POST /__test/rotate         new signing key, new key id; the old one is no longer published
//   POST /__test/mode/normal    ID tokens as oidc-provider signs them
//   POST /__test/mode/rogue     ID tokens re-signed by a key it never publishes (same key id)
//   POST /__test/mode/expired   ID tokens re-signed by its real key, expired an hour ago

import http from 'node:http';
import { decodeJwt, decodeProtectedHeader, exportJWK, generateKeyPair, importJWK, SignJWT } from 'jose';
import Provider from 'oidc-provider';

const config = JSON.parse(process.argv[2] || '{}');
// Only the port goes to stdout, whose reader stops after it: anything else
// (oidc-provider's notes) goes to stderr, and a closed stdout is no crash.
console.log = console.info = console.error;
process.stdout.on('error', () => {});
const users = config.users || {};
let generation = 0;
let signingJwk;
let rogueKey;
let mode = 'normal';
let handler;

async function newSigningJwk() {
  generation += 1;
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  return { ...(await exportJWK(privateKey)), kid: `test-key-${generation}-${Date.now()}`, alg: 'RS256', use: 'sig' };
}

async function tamper(idToken) {
  const claims = decodeJwt(idToken);
  const { kid } = decodeProtectedHeader(idToken);
  let key;
  if (mode === 'expired') {
    const now = Math.floor(Date.now() / 1000);
    claims.iat = now - 7200;
    claims.exp = now - 3600;
    key = await importJWK(signingJwk, 'RS256');
  } else {
    key = rogueKey;
  }
  return new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid }).sign(key);
}

function makeProvider(issuer) {
  const provider = new Provider(issuer, {
    clients: [{
      client_id: config.client_id,
      client_secret: config.client_secret,
      redirect_uris: config.redirect_uris,
      post_logout_redirect_uris: config.post_logout_redirect_uris || [],
      grant_types: ['authorization_code'],
      response_types: ['code'],
    }],
    jwks: { keys: [signingJwk] },
    cookies: { keys: ['gantry-test-cookie-key'] },
    pkce: { required: () => true },
    claims: {
      openid: ['sub'],
      profile: ['preferred_username', 'name'],
      email: ['email', 'email_verified'],
      groups: ['groups'],
    },
    scopes: ['openid', 'profile', 'email', 'groups'],
    // Scope claims in the ID token itself (as Keycloak and Entra put them).
    conformIdTokenClaims: false,
    features: { devInteractions: { enabled: true }, rpInitiatedLogout: { enabled: true } },
    async findAccount(ctx, id) {
      const user = users[id];
      if (!user) return undefined;
      return {
        accountId: id,
        async claims() {
          return {
            sub: `sub-${id}`, preferred_username: id, name: id,
            email: user.email, email_verified: true, groups: user.groups || [],
          };
        },
      };
    },
  });
  provider.use(async (ctx, next) => {
    await next();
    if (ctx.path === '/token' && mode !== 'normal' && ctx.body && ctx.body.id_token) {
      ctx.body = { ...ctx.body, id_token: await tamper(ctx.body.id_token) };
    }
  });
  return provider;
}

function control(req, res, issuer) {
  const done = (status, body) => { res.writeHead(status, { 'content-type': 'text/plain' }); res.end(body); };
  if (req.method !== 'POST') return done(405, 'POST only');
  if (req.url === '/__test/rotate') {
    newSigningJwk().then((jwk) => {
      signingJwk = jwk;
      handler = makeProvider(issuer).callback();
      done(200, jwk.kid);
    }, (e) => done(500, String(e)));
    return undefined;
  }
  const m = /^\/__test\/mode\/(normal|rogue|expired)$/.exec(req.url);
  if (!m) return done(404, 'unknown control');
  mode = m[1];
  return done(200, mode);
}

signingJwk = await newSigningJwk();
rogueKey = (await generateKeyPair('RS256')).privateKey;
const server = http.createServer((req, res) => {
  if (req.url.startsWith('/__test/')) return control(req, res, server.issuer);
  return handler(req, res);
});
server.listen(Number(config.port) || 0, '127.0.0.1', () => {
  const { port } = server.address();
  server.issuer = `http://127.0.0.1:${port}`;
  handler = makeProvider(server.issuer).callback();
  process.stdout.write(`PORT ${port}\n`);
});
// The test harness ends it with SIGTERM/SIGKILL; a closed stdin (parent gone) ends it too.
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
