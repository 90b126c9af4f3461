import { test, expect, type Page } from '@playwright/test';
import { ADMIN_PASSWORD, hydrated, navLink, signInOk, uniqueName, setDefaultQuota } from './helpers';

// Portal hardening (issue 11) in the browser: pages hydrate under the CSP
// with no violation; polling never resets the "keep the data volume" box;
// a hydrated page whose session ended goes to the sign-in page.

/** Collects CSP violations (console and the DOM event) on a page. */
function watchCsp(page: Page) {
  const violations: string[] = [];
  page.on('console', (m) => {
    if (/Content Security Policy|Refused to (execute|load|apply|compile)/i.test(m.text())) violations.push(m.text());
  });
  page.on('pageerror', (e) => violations.push(`page error: ${e.message}`));
  return violations;
}

async function polls(page: Page) {
  return Number((await page.locator('body').getAttribute('data-polls')) ?? '0');
}

test('pages hydrate under the CSP with no violation', async ({ page }) => {
  const violations = watchCsp(page);
  await page.goto('/login');
  await hydrated(page);
  await signInOk(page, 'admin', ADMIN_PASSWORD);
  for (const path of ['/', '/machines', '/tasks', '/compute', '/tokens', '/account/password', '/admin', '/admin/nodes', '/admin/audit']) {
    await page.goto(path);
    await hydrated(page);
  }
  // Client-side navigation too.
  await navLink(page, 'Machines').click();
  await expect(page).toHaveURL(/\/machines$/);
  const csp = (await page.request.get('/machines')).headers()['content-security-policy'];
  expect(csp).toContain("frame-ancestors 'none'");
  expect(violations).toEqual([]);
});

test('the keep-volume box survives three polls and the volume is kept', async ({ page }) => {
  test.setTimeout(180_000);
  // The machine page also loads the terminal's scripts: no violation there either.
  const violations = watchCsp(page);
  await signInOk(page, 'admin', ADMIN_PASSWORD);
  await setDefaultQuota(page, 2);
  await page.goto('/machines');
  await hydrated(page);
  const name = uniqueName('keep');
  const create = page.getByTestId('create-machine');
  await create.getByLabel('Name').fill(name);
  await create.getByLabel('GPU count').fill('1');
  await create.getByRole('button', { name: 'Create machine' }).click();
  await expect(page.getByTestId('create-ok')).toContainText(name);
  await page.getByTestId('create-ok').getByRole('link', { name }).click();
  await expect(page).toHaveURL(/\/machines\/\d+$/);
  await hydrated(page);
  await expect(page.getByTestId('machine-facts')).toContainText('running', { timeout: 60_000 });

  const keep = page.getByTestId('delete-machine').getByLabel('Keep the data volume');
  await keep.check();
  const before = await polls(page);
  // Three refreshes of the page's data, counted, not slept through.
  await expect.poll(() => polls(page), { timeout: 60_000 }).toBeGreaterThanOrEqual(before + 3);
  await expect(keep).toBeChecked();
  // A refresh that fails (the network drops) keeps the page as it was and
  // says so; once back, the notice goes and the box is still ticked.
  await page.context().setOffline(true);
  await expect(page.getByTestId('live-notice')).toBeVisible({ timeout: 60_000 });
  await expect(keep).toBeChecked();
  await page.context().setOffline(false);
  await expect(page.getByTestId('live-notice')).toHaveCount(0, { timeout: 60_000 });
  await expect(keep).toBeChecked();

  let question = '';
  page.once('dialog', (d) => {
    question = d.message();
    d.accept();
  });
  await page.getByTestId('delete-machine').getByRole('button', { name: 'Delete machine' }).click();
  await expect(page.getByTestId('operation-ok')).toContainText('queued');
  expect(question).toContain(name);
  expect(question).toContain('KEPT');
  await expect(page.locator('[data-testid="task-row"]').first()).toHaveAttribute('data-state', 'succeeded', { timeout: 60_000 });
  await navLink(page, 'Machines').click();
  await hydrated(page);
  await expect(page.getByTestId('kept-volume').filter({ hasText: name })).toHaveCount(1);
  expect(violations).toEqual([]);
});

test('a hydrated page whose session ended goes to the sign-in page', async ({ page }) => {
  test.setTimeout(90_000);
  await signInOk(page, 'admin', ADMIN_PASSWORD);
  await page.goto('/machines');
  await hydrated(page);
  // The session ends behind the page's back (as after the idle limit).
  await page.context().clearCookies();
  await expect(page).toHaveURL(/\/login\?next=\/machines/, { timeout: 45_000 });
  await hydrated(page);
  await page.getByLabel('Username').fill('admin');
  await page.getByLabel('Password').fill(ADMIN_PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page).toHaveURL(/\/machines$/);
});

test('a crafted error link shows nothing in the sign-in form', async ({ page }) => {
  const forged = Buffer.from('{"Invalid":"ATTACKER says call 555"}').toString('base64url');
  await page.goto(`/login?__path=%2Fapi%2Flogin&__err=${forged}`);
  await hydrated(page);
  // The query is never read: outcomes travel in the session.
  await expect(page.getByText('ATTACKER')).toHaveCount(0);
  await expect(page.getByTestId('form-error')).toHaveCount(0);
});
