import { expect, type Page } from '@playwright/test';

export const ADMIN_PASSWORD = process.env.GANTRY_E2E_ADMIN_PASSWORD ?? 'e2e-admin-password';

/** Waits until live.js has taken the page over (it sets `data-hydrated`). */
export async function hydrated(page: Page) {
  await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');
}

export async function signIn(page: Page, username: string, password: string, opts = { js: true }) {
  await page.goto('/login');
  if (opts.js) await hydrated(page);
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/** Signs in and waits until the dashboard it lands on has loaded (the
 * session cookie is set and the client-side navigation has settled). */
export async function signInOk(page: Page, username: string, password: string) {
  await signIn(page, username, password);
  await expect(page.getByTestId('whoami')).toContainText(username);
  await expect(page.getByTestId('quota')).toBeVisible();
}

/** The main navigation's link, not same-named links in the page. */
export function navLink(page: Page, name: string) {
  return page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name });
}

/** A name no other test uses, valid under Gantry's naming rules. */
export function uniqueName(prefix: string) {
  return `${prefix}-${Date.now().toString(36)}${Math.floor(Math.random() * 1e4)}`;
}

/** As an admin: sets the default group's GPU quota and returns its row in
 * the groups table, for the caller's own check of what it shows. */
export async function setDefaultQuota(page: Page, gpus: number) {
  await page.goto('/admin/groups');
  await hydrated(page);
  const policy = page.locator('[data-testid="group-policy"][data-name="default"]');
  await policy.getByLabel('GPU quota').fill(String(gpus));
  await policy.getByRole('button', { name: 'Save' }).click();
  return page.locator('[data-testid="group-row"][data-name="default"]');
}

/** As an admin: makes an account in the default group. */
export async function createUser(page: Page, username: string, password: string) {
  await page.goto('/admin');
  await hydrated(page);
  const form = page.getByTestId('create-user');
  await form.getByLabel('Username').fill(username);
  await form.getByLabel('Password').fill(password);
  await form.getByRole('button', { name: 'Create user' }).click();
  await expect(page.getByTestId('users')).toContainText(username);
}

/** Waits until live.js has refreshed the page `n` more times (counted on `<body>`, not slept through). */
export async function afterPolls(page: Page, n = 2) {
  const count = async () => Number((await page.locator('body').getAttribute('data-polls')) ?? 0);
  const from = await count();
  await expect.poll(count, { timeout: 30_000 * n }).toBeGreaterThanOrEqual(from + n);
}
