import { test, expect, type APIRequestContext } from '@playwright/test';
import { ADMIN_PASSWORD, hydrated, navLink, signIn, signInOk, uniqueName, setDefaultQuota, createUser } from './helpers';

// GPU charts in Chromium: a user's machine page shows its GPUs'
// utilisation chart with data and the reclaim/hot thresholds with
// JavaScript off; with JavaScript on the chart gains new samples without a
// reload; the admin overview shows the machine in the heatmap.

const BASE = `http://127.0.0.1:${process.env.GANTRY_E2E_PORT ?? '3300'}`;

async function serverFn(request: APIRequestContext, path: string, form: Record<string, string>) {
  const res = await request.post(path, { form, headers: { Origin: BASE } });
  expect(res.status(), `${path}: ${await res.text()}`).toBe(200);
}

test('the machine page charts its GPUs without JavaScript and updates live with it', async ({ page, browser }) => {
  test.setTimeout(240_000);
  const user = uniqueName('charter');
  const admin = await browser.newContext();
  const adminPage = await admin.newPage();
  await signInOk(adminPage, 'admin', ADMIN_PASSWORD);
  await setDefaultQuota(adminPage, 4);
  await createUser(adminPage, user, 'chart-password-1');

  await signInOk(page, user, 'chart-password-1');
  await navLink(page, 'Machines').click();
  await hydrated(page);
  const create = page.getByTestId('create-machine');
  const name = uniqueName('chart');
  await create.getByLabel('Name').fill(name);
  await create.getByLabel('GPU count').fill('1');
  await create.getByRole('button', { name: 'Create machine' }).click();
  const row = page.locator(`[data-testid="machine-row"][data-name="${name}"]`);
  await expect(row).toHaveAttribute('data-state', 'running', { timeout: 90_000 });
  await row.getByRole('link', { name }).click();
  await expect(page).toHaveURL(/\/machines\/\d+$/);
  const id = page.url().split('/').pop()!;
  // A steady training series: clearly above the reclaim line.
  await serverFn(admin.request, '/api/admin/set_sim_pattern', { machine_id: id, pattern: 'training' });

  // JavaScript off: the server renders the chart, with data once the
  // sampler has taken a pass (every 10 s by default).
  const nojs = await browser.newContext({ javaScriptEnabled: false });
  const plain = await nojs.newPage();
  await signIn(plain, user, 'chart-password-1', { js: false });
  await expect(plain).toHaveURL(/\/$/);
  // What the chart section said last, so a failure explains itself.
  let seen = '';
  try {
    await expect
      .poll(async () => {
        await plain.goto(`/machines/${id}`);
        seen = (await plain.getByTestId('machine-charts').textContent()) ?? '(no chart section)';
        // Before the first sample the page says so and has no chart: a
        // plain getAttribute would wait for the chart forever, and this
        // poll would never load the page again.
        const chart = plain.getByTestId('machine-util-chart');
        if ((await chart.count()) === 0) return 0;
        return Number((await chart.getAttribute('data-points')) ?? '0');
      }, { timeout: 60_000, intervals: [2_000] })
      .toBeGreaterThan(0);
  } catch (e) {
    throw new Error(`no samples charted within 60 s; the chart section last said: ${seen}\n${e}`);
  }
  const chart = plain.getByTestId('machine-util-chart');
  await expect(chart.locator('path.series')).toHaveCount(1);
  await expect(chart.locator('line[data-threshold="reclaim"]')).toHaveCount(1);
  await expect(chart.locator('line[data-threshold="hot"]')).toHaveCount(1);
  await expect(plain.getByTestId('machine-mem-chart')).toBeVisible();
  await expect(plain.getByTestId('machine-charts')).toContainText('simulated');
  // Ranges are links: 24 h works without JavaScript too.
  await plain.getByTestId('machine-charts').getByRole('link', { name: '24h' }).click();
  await expect(plain).toHaveURL(/range=24h/);
  await expect(plain.getByTestId('machine-charts')).toBeVisible();
  await nojs.close();

  // JavaScript on: new samples appear without reloading the page.
  await page.goto(`/machines/${id}`);
  await hydrated(page);
  const live = page.getByTestId('machine-util-chart');
  await expect(live).toHaveAttribute('data-points', /[1-9]/);
  const before = Number(await live.getAttribute('data-last'));
  await page.evaluate(() => ((window as unknown as { chartMarker: number }).chartMarker = 7));
  await expect
    .poll(async () => Number(await page.getByTestId('machine-util-chart').getAttribute('data-last')), { timeout: 90_000, intervals: [1_000] })
    .toBeGreaterThan(before);
  expect(await page.evaluate(() => (window as unknown as { chartMarker?: number }).chartMarker)).toBe(7);

  // The admin's cluster overview: the machine's GPU in the heatmap.
  await adminPage.goto('/admin/overview');
  await expect(adminPage.getByTestId('heatmap')).toContainText(name.slice(0, 8));
  await expect(adminPage.getByTestId('held-vs-used')).toBeVisible();
  await admin.close();
});
