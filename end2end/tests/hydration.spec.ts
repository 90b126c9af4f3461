import { test, expect, type Page } from '@playwright/test';
import { ADMIN_PASSWORD, hydrated, signInOk } from './helpers';

// A resource read outside <Suspense>/<Transition> (and outside an effect)
// is one hydration cannot wait for: the browser may see nothing yet where
// the server rendered data. The debug wasm that these tests run warns
// about every such read in the console. Polled pages read their data from
// the poll timer and keep a chart's last good answer; both must go
// through an effect or sit inside the page's <Transition>.

const POLLED = ['/machines', '/tasks', '/compute', '/snapshots', '/admin/overview', '/admin/terminals', '/admin/nodes/1'];

async function polledOnce(page: Page) {
  // The first refresh comes after the timer has ticked (and read `busy`) a few times.
  await expect.poll(async () => Number((await page.locator('body').getAttribute('data-polls')) ?? '0'), { timeout: 30_000 }).toBeGreaterThan(0);
}

test('polled pages read their data only where hydration waits for it', async ({ page, context }) => {
  test.setTimeout(120_000);
  await signInOk(page, 'admin', ADMIN_PASSWORD);
  const warnings: string[] = [];
  const pages = await Promise.all(POLLED.map(() => context.newPage()));
  for (const [i, p] of pages.entries()) {
    p.on('console', (m) => {
      if (/reading a resource in .hydrate. mode outside/i.test(m.text())) warnings.push(`${POLLED[i]}: ${m.text().slice(0, 160)}`);
    });
  }
  await Promise.all(pages.map(async (p, i) => {
    await p.goto(POLLED[i]);
    await hydrated(p);
    await polledOnce(p);
  }));
  expect(warnings).toEqual([]);
});
