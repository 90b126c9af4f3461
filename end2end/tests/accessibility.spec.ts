import { test, expect } from '@playwright/test';
import { Checker, type Scheme } from './axe';
import { make, remove, type Made } from './a11y-fixture';
import { ADMIN_PASSWORD, hydrated, signIn, signInOk } from './helpers';

// Every page of the portal under axe-core (WCAG 2.1 A and AA): signed out
// and signed in as the admin, with JavaScript on and off, in the light and
// the dark colour scheme (the stylesheet follows the system's). A check
// fails on any serious or critical violation and lists every page's
// violations at once. Then the layout at a 1366 × 768 screen: the cluster
// heatmap inside its card, the snapshot name a one-line field.

// Not serial: a failed configuration must not skip the others. After a
// failure Playwright starts a new worker, whose beforeAll makes its own data
// once the old worker's afterAll has removed the first.
const made: Partial<Made> = {};

test.beforeAll(async ({ browser }) => {
  test.setTimeout(240_000);
  const context = await browser.newContext();
  try {
    await make(await context.newPage(), made);
  } finally {
    await context.close();
  }
});

test.afterAll(async ({ browser }) => {
  test.setTimeout(180_000);
  const context = await browser.newContext();
  const page = await context.newPage();
  await signInOk(page, 'admin', ADMIN_PASSWORD);
  await remove(page, made);
  await context.close();
});

/** The signed-in pages, the admin's console included; each route of
 * app/src/shell.rs once, with the data `make` created where a route takes an id. */
function signedInPages(m: Partial<Made>): string[] {
  return [
    '/',
    '/machines',
    `/machines/${m.machineId}`,
    '/snapshots',
    '/compute',
    `/compute/${m.computeId}`,
    '/tasks',
    '/datasets',
    `/datasets/${m.dataset}`,
    `/datasets/${m.dataset}/v1`,
    '/tokens',
    '/account/password',
    '/admin',
    '/admin/groups',
    '/admin/nodes',
    `/admin/nodes/${m.nodeId}`,
    '/admin/overview',
    '/admin/images',
    '/admin/regions',
    '/admin/region-images',
    '/admin/catalogue',
    '/admin/terminals',
    '/admin/reclaim',
    '/admin/audit',
    '/no-such-page',
  ];
}

for (const js of [true, false]) {
  for (const scheme of ['light', 'dark'] as Scheme[]) {
    test(`every page passes axe with JavaScript ${js ? 'on' : 'off'}, ${scheme} scheme`, async ({ browser }) => {
      test.setTimeout(180_000);
      const checker = await Checker.open(browser, js, scheme);
      const page = checker.page;
      const found: string[] = [];
      try {
        // Signed out: the sign-in page, then as a refused sign-in leaves it
        // (an unknown name: the admin's sign-in throttle is not touched).
        found.push(await checker.check('/login'));
        await signIn(page, 'no-such-user', 'not-the-password', { js });
        await expect(page.getByTestId('form-error')).toBeVisible();
        found.push(await checker.checkCurrent());

        await signIn(page, 'admin', ADMIN_PASSWORD, { js });
        await expect(page.getByTestId('whoami')).toContainText('admin');
        for (const path of signedInPages(made)) found.push(await checker.check(path));
      } finally {
        await checker.close();
      }
      // The list once, in the message (not again as the received value).
      const report = found.filter((f) => f !== '').join('\n');
      expect(report === '', `axe found serious or critical violations:\n${report}`).toBe(true);
    });
  }
}

test('at 1366 × 768 the heatmap stays inside its card and the snapshot name is one line', async ({ browser }) => {
  const context = await browser.newContext({ viewport: { width: 1366, height: 768 } });
  const page = await context.newPage();
  try {
    await signIn(page, 'admin', ADMIN_PASSWORD);
    await expect(page.getByTestId('whoami')).toContainText('admin');

    // The simulated node's eight GPUs are a row of the heatmap; no cell's
    // right edge is beyond the right edge of the card holding the map.
    await page.goto('/admin/overview');
    await hydrated(page);
    const heatmap = page.getByTestId('heatmap');
    const card = page.locator('section.card').filter({ has: heatmap });
    const cardBox = (await card.boundingBox())!;
    const row = heatmap.locator('.heat-node').filter({ has: page.locator(`a[title="charts of node ${made.node}"]`) });
    await expect(row.locator('.heat-cell')).toHaveCount(8);
    const cells = heatmap.locator('.heat-cell');
    for (let i = 0; i < (await cells.count()); i++) {
      const box = (await cells.nth(i).boundingBox())!;
      expect(box.x + box.width, `cell ${i} of the heatmap`).toBeLessThanOrEqual(cardBox.x + cardBox.width);
    }

    // The snapshot name: a single-line text input, about as tall as a line.
    await page.goto(`/machines/${made.machineId}`);
    await hydrated(page);
    const field = page.getByTestId('snapshot-name');
    expect(await field.evaluate((el) => el.tagName)).toBe('INPUT');
    await expect(field).toHaveAttribute('type', 'text');
    const fieldBox = (await field.boundingBox())!;
    const buttonBox = (await page.getByTestId('snapshot-take').boundingBox())!;
    expect(fieldBox.height).toBeLessThan(2 * buttonBox.height);
    expect(fieldBox.height).toBeLessThan(60);
  } finally {
    await context.close();
  }
});
