import { test, expect, type Page, type APIRequestContext, type Route } from '@playwright/test';
import { ADMIN_PASSWORD, hydrated, navLink, signInOk, uniqueName, setDefaultQuota, createUser } from './helpers';

// Idle reclaim in Chromium: the admin sets a one-minute idle window (the
// server runs the reclaim loop every 2 s in these tests), a user's machine
// whose simulated GPUs idle is warned with the time left, extended once,
// reclaimed, and restored in one click; snapshots are listed. What a user
// ticks or types on the machine and snapshots pages survives their polling.

const BASE = `http://127.0.0.1:${process.env.GANTRY_E2E_PORT ?? '3300'}`;

async function serverFn(request: APIRequestContext, path: string, form: Record<string, string>) {
  const res = await request.post(path, { form, headers: { Origin: BASE } });
  expect(res.status(), `${path}: ${await res.text()}`).toBe(200);
}

async function saveSettings(page: Page, s: { window: string; grace: string; extensions: string; extension: string }) {
  await page.goto('/admin/reclaim');
  await hydrated(page);
  const form = page.getByTestId('reclaim-settings');
  await form.getByTestId('reclaim-window').fill(s.window);
  await form.getByTestId('reclaim-grace').fill(s.grace);
  await form.getByTestId('reclaim-extensions').fill(s.extensions);
  await form.getByTestId('reclaim-extension').fill(s.extension);
  await form.getByTestId('reclaim-save').click();
  await expect(page.getByTestId('reclaim-saved')).toHaveText('Settings saved.');
}

test('an idle machine is warned with the time left, extended, reclaimed and restored in one click', async ({ page, browser }) => {
  test.setTimeout(300_000);
  const user = uniqueName('idler');
  const admin = await browser.newContext();
  const adminPage = await admin.newPage();
  await signInOk(adminPage, 'admin', ADMIN_PASSWORD);
  await setDefaultQuota(adminPage, 4);
  await createUser(adminPage, user, 'idle-password-1');
  // A bad value is refused and changes nothing.
  await adminPage.goto('/admin/reclaim');
  await hydrated(adminPage);
  await adminPage.getByTestId('reclaim-window').fill('0');
  await adminPage.getByTestId('reclaim-save').click();
  await expect(adminPage.getByTestId('form-error')).toContainText('window');
  await saveSettings(adminPage, { window: '1', grace: '1', extensions: '1', extension: '0.25' });

  try {
    await signInOk(page, user, 'idle-password-1');
    await navLink(page, 'Machines').click();
    await hydrated(page);
    const create = page.getByTestId('create-machine');
    const name = uniqueName('idle');
    await create.getByLabel('Name').fill(name);
    await create.getByLabel('GPU count').fill('1');
    await create.getByRole('button', { name: 'Create machine' }).click();
    await page.getByTestId('create-ok').getByRole('link', { name }).click();
    await expect(page).toHaveURL(/\/machines\/\d+$/);
    const id = page.url().split('/').pop()!;
    await hydrated(page);
    await expect(page.getByTestId('machine-state')).toHaveText('running', { timeout: 60_000 });

    // Its simulated GPUs go idle (the admin's pattern control).
    await serverFn(admin.request, '/api/admin/set_sim_pattern', { machine_id: id, pattern: 'idle' });

    // A snapshot by hand is listed on the machine page.
    await page.getByTestId('snapshot-name').fill('by hand');
    await page.getByTestId('snapshot-take').click();
    await expect(page.locator('[data-testid="machine-snapshot"][data-name="by hand"]')).toContainText('ready', { timeout: 60_000 });

    // After a minute of idle samples: the warning, with the time left.
    const notice = page.getByTestId('machine-reclaim-notice');
    await expect(notice).toContainText(`machine ${name} will be snapshotted and its GPUs returned in`, { timeout: 150_000 });
    await expect(notice).toContainText(/in \d+ s \(at \d{4}-\d\d-\d\d \d\d:\d\d UTC\)/);
    await expect(page.locator('[data-testid="machine-event"][data-kind="reclaim_warning"]')).toHaveCount(1);
    // The machines page's banner says so too.
    await navLink(page, 'Machines').click();
    await expect(page.locator(`[data-testid="reclaim-notice"][data-machine="${name}"]`)).toContainText('Idle:');
    await page.goBack();
    await hydrated(page);

    // Extended once; no second extension is offered.
    await page.getByTestId('machine-reclaim').getByTestId('reclaim-extend').click();
    await expect(page.getByTestId('reclaim-extended')).toContainText('Extended: reclaimed no earlier than');
    await expect(page.getByTestId('machine-reclaim').getByTestId('reclaim-extend')).toHaveCount(0);
    await expect(page.locator('[data-testid="machine-event"][data-kind="extended"]')).toHaveCount(1);

    // Still idle after the extended deadline: reclaimed.
    await expect(page.getByTestId('machine-state')).toHaveText('reclaimed', { timeout: 120_000 });
    await expect(page.getByTestId('machine-reclaim-notice')).toContainText('was reclaimed after being idle');
    await navLink(page, 'Snapshots').click();
    await expect(page.locator('[data-testid="snapshot"]').filter({ hasText: 'idle reclaim' })).toContainText(name);
    await expect(page.locator('[data-testid="snapshot"][data-name="by hand"]')).toContainText('ready');
    await page.goBack();
    await hydrated(page);

    // One click brings it back.
    await page.getByTestId('machine-reclaim').getByTestId('reclaim-restore').click();
    await expect(page.getByTestId('machine-state')).toHaveText('running', { timeout: 60_000 });
    await expect(page.locator('[data-testid="machine-event"][data-kind="restored"]')).toHaveCount(1, { timeout: 20_000 });

    // Leave no machine behind: later specs count the default group's GPUs.
    await serverFn(page.request, '/api/machine_operation', { machine_id: String(id), operation: 'delete' });
    await expect(page.getByTestId('machine-state')).toHaveText('deleted', { timeout: 60_000 });
  } finally {
    // Later specs run on this server: back to the default window.
    await serverFn(admin.request, '/api/save_reclaim_settings', {
      enabled: 'on', threshold_pct: '5', window_min: '120', grace_min: '30', extensions_allowed: '2', extension_min: '120',
      hot_enabled: 'on', hot_util_pct: '90', hot_mem_pct: '95', hot_temp_c: '85', hot_window_min: '10',
    });
    await admin.close().catch(() => {}); // never hide the test's own failure
  }
});

test('the opt-out box and a snapshot row\'s inputs keep what the user did across polls', async ({ page }) => {
  test.setTimeout(180_000);
  await signInOk(page, 'admin', ADMIN_PASSWORD);
  await setDefaultQuota(page, 4);
  await navLink(page, 'Machines').click();
  await hydrated(page);
  const create = page.getByTestId('create-machine');
  const name = uniqueName('keep');
  await create.getByLabel('Name').fill(name);
  await create.getByLabel('GPU count').fill('1');
  await create.getByRole('button', { name: 'Create machine' }).click();
  await page.getByTestId('create-ok').getByRole('link', { name }).click();
  await expect(page).toHaveURL(/\/machines\/\d+$/);
  const id = page.url().split('/').pop()!;
  await hydrated(page);
  // Two refreshes of the page: by the second, the first has certainly been merged.
  const twoPolls = async () => {
    const polls = async () => Number((await page.locator('body').getAttribute('data-polls')) ?? 0);
    const from = await polls();
    await expect.poll(polls, { timeout: 30_000 }).toBeGreaterThanOrEqual(from + 2);
  };
  try {
    await expect(page.getByTestId('machine-state')).toHaveText('running', { timeout: 60_000 });

    // Ticked and not yet saved: still ticked after the card's refreshes,
    // and through failed ones: the card stays, saying it could not refresh.
    const box = page.getByTestId('rebalance-opt-out');
    await expect(box).not.toBeChecked();
    await box.check();
    // The page's refreshes (not its other requests) answer 500.
    const failRefresh = (r: Route) => (r.request().headers()['x-gantry-poll'] ? r.fulfill({ status: 500, contentType: 'text/plain', body: 'busy' }) : r.continue());
    await page.route(`**/machines/${id}`, failRefresh);
    await expect(page.getByTestId('live-notice')).toContainText('Could not refresh', { timeout: 30_000 });
    await expect(page.getByTestId('machine-reclaim')).toBeVisible();
    await expect(box).toBeChecked();
    await page.unroute(`**/machines/${id}`, failRefresh);
    await expect(page.getByTestId('live-notice')).toHaveCount(0, { timeout: 30_000 });
    await expect.soft(box).toBeChecked();

    // A name typed into a snapshot's "new machine from it" form stays.
    await page.getByTestId('snapshot-name').fill('typed');
    await page.getByTestId('snapshot-take').click();
    await expect(page.locator('[data-testid="machine-snapshot"][data-name="typed"]')).toContainText('ready', { timeout: 60_000 });
    await navLink(page, 'Snapshots').click();
    const row = page.locator('[data-testid="snapshot"][data-name="typed"]').filter({ hasText: name });
    const input = row.getByLabel('New machine name');
    await input.fill('from-typed');
    await input.evaluate((el) => ((el as any).__typedInto = true));
    // Another snapshot appears above it (newest first) while it is typed.
    await serverFn(page.request, '/api/take_snapshot', { machine_id: id, name: 'later' });
    const later = page.locator('[data-testid="snapshot"][data-name="later"]').filter({ hasText: name });
    await expect(later).toContainText('ready', { timeout: 60_000 });
    await twoPolls();
    await expect(input).toHaveValue('from-typed');
    expect(await input.evaluate((el) => (el as any).__typedInto === true)).toBe(true);
  } finally {
    // Later specs count the default group's GPUs.
    await serverFn(page.request, '/api/machine_operation', { machine_id: id, operation: 'delete' }).catch(() => {});
    await page.goto(`/machines/${id}`);
    await expect(page.getByTestId('machine-state')).toHaveText('deleted', { timeout: 60_000 });
  }
});
