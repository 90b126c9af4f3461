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
  webServer: {
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
    },
  },
});
