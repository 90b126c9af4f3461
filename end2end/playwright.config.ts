import { defineConfig } from '@playwright/test';

// Gantry's end-to-end tests drive Debian's Chromium (no browser download)
// against the real server, which Playwright starts and stops itself.
const port = process.env.GANTRY_E2E_PORT ?? '3300';
const baseURL = `http://127.0.0.1:${port}`;
// Paths below are relative to the repository root, the server's cwd. The
// server binary and its site can be copies taken right after a build
// (GANTRY_E2E_BIN, GANTRY_E2E_SITE_ROOT), so another build in the same
// target directory cannot pair this bundle with a different server.
const dataDir = process.env.GANTRY_E2E_DATA_DIR ?? 'target/e2e-data';
const siteRoot = process.env.GANTRY_E2E_SITE_ROOT ?? 'target/site';
// A real OpenID Connect provider (testkit/oidc/provider.mjs, oidc-provider
// from npm) on a fixed loopback port: Gantry discovers it at its start, so
// it must be named in Gantry's environment and answer first. Its users and
// groups are the ones tests/oidc.spec.ts signs in as.
const oidcPort = process.env.GANTRY_E2E_OIDC_PORT ?? '3310';
export const oidc = {
  issuer: `http://127.0.0.1:${oidcPort}`,
  clientId: 'gantry-e2e',
  clientSecret: 'gantry-e2e-secret',
  displayName: 'Test IdP',
};
const oidcConfig = JSON.stringify({
  port: Number(oidcPort),
  client_id: oidc.clientId,
  client_secret: oidc.clientSecret,
  redirect_uris: [`${baseURL}/auth/oidc/callback`],
  post_logout_redirect_uris: [`${baseURL}/login`],
  users: {
    'sso-ana': { email: 'sso-ana@example.org', groups: ['e2e-gpu-users'] },
    'sso-ben': { email: 'sso-ben@example.org', groups: ['e2e-gpu-users-nojs'] },
    'sso-eve': { email: 'sso-eve@example.org', groups: ['e2e-outsiders'] },
  },
});

export default defineConfig({
  testDir: './tests',
  timeout: 60_000,
  expect: { timeout: 15_000 },
  fullyParallel: false,
  workers: 1,
  retries: 0,
  reporter: [['list']],
  use: {
    baseURL,
    trace: 'retain-on-failure',
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
      args: [
        '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic',
        '--disable-background-networking', '--disable-component-update',
        '--disable-sync', '--no-first-run',
      ],
    },
  },
  // In this order: Gantry's start discovers the provider.
  webServer: [{
    command: `node testkit/oidc/provider.mjs '${oidcConfig}'`,
    url: `${oidc.issuer}/.well-known/openid-configuration`,
    reuseExistingServer: false,
    timeout: 30_000,
    stdout: 'ignore',
    stderr: 'pipe',
    cwd: '..',
  }, {
    // The previous run's machines go first (scripts/e2e-clean.sh), then its data.
    command: `bash scripts/e2e-clean.sh ${dataDir}; rm -rf ${dataDir} && ${process.env.GANTRY_E2E_BIN ?? 'target/debug/gantry'} serve`,
    url: `${baseURL}/healthz`,
    reuseExistingServer: false,
    timeout: 120_000,
    stdout: 'pipe',
    stderr: 'pipe',
    cwd: '..',
    env: {
      GANTRY_LISTEN: `127.0.0.1:${port}`,
      GANTRY_DATA_DIR: dataDir,
      GANTRY_SITE_ROOT: siteRoot,
      GANTRY_ADMIN_PASSWORD: process.env.GANTRY_E2E_ADMIN_PASSWORD ?? 'e2e-admin-password',
      RUST_LOG: 'warn',
      // reclaim.spec.ts sets a one-minute idle window and waits for the
      // loop to act on it: a pass every 2 s instead of every minute.
      GANTRY_RECLAIM_INTERVAL_SECS: '2',
      // The local node's disk is this machine's, which a CI machine may
      // fill past the default 10 GB free-disk floor with its own builds;
      // the floor is tested in Rust with figures the tests set.
      GANTRY_NODE_DISK_FLOOR_GB: '0',
      // No SSH gateway: its default 127.0.0.1:2222 may be another server's.
      GANTRY_SSH_LISTEN: '',
      GANTRY_OIDC_ISSUER: oidc.issuer,
      GANTRY_OIDC_CLIENT_ID: oidc.clientId,
      GANTRY_OIDC_CLIENT_SECRET: oidc.clientSecret,
      GANTRY_OIDC_SCOPES: 'openid profile email groups',
      GANTRY_OIDC_DISPLAY_NAME: oidc.displayName,
    },
  }],
});
