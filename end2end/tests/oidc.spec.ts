import { test, expect, type Page } from '@playwright/test';
import { oidc } from '../playwright.config';
import { ADMIN_PASSWORD, hydrated, signIn, signInOk } from './helpers';

// Signing in through a real OpenID Connect provider in Chromium, with
// JavaScript on and off: testkit/oidc/provider.mjs (oidc-provider from npm),
// started by playwright.config.ts before Gantry, with its developer sign-in
// pages (any password for a listed user) and consent page. Its users:
// sso-ana (group e2e-gpu-users), sso-ben (e2e-gpu-users-nojs), sso-eve
// (e2e-outsiders, mapped nowhere).

// The provider's pages import a web font: only loopback is reached.
test.beforeEach(async ({ context }) => {
  await context.route(/^https?:\/\/(?!127\.0\.0\.1[:/])/, (route) => route.abort());
});

/** As admin, on Admin → Sign-in: maps `directoryGroup` to Gantry's default
 * group as users (once: a mapping already there is kept), then signs out. */
async function mapGroup(page: Page, directoryGroup: string, js: boolean) {
  if (js) await signInOk(page, 'admin', ADMIN_PASSWORD);
  else await signIn(page, 'admin', ADMIN_PASSWORD, { js: false });
  await page.goto('/admin/sign-in');
  if (js) await hydrated(page);
  const row = page.locator(`[data-testid="sso-mapping-row"][data-name="${directoryGroup}"]`);
  const mappings = page.getByTestId('sso-mappings');
  await expect(mappings).toBeVisible();
  if ((await row.count()) === 0) {
    const form = page.getByTestId('add-sso-mapping');
    await form.getByLabel('Directory group').fill(directoryGroup);
    await form.getByLabel('Gantry group').selectOption('default');
    await form.getByLabel('Role').selectOption('user');
    await form.getByRole('button', { name: 'Add mapping' }).click();
  }
  await expect(row).toContainText('default');
  await expect(row).toContainText('user');
  await page.getByRole('button', { name: 'Sign out' }).click();
  await expect(page).toHaveURL(/\/login/);
}

/** From Gantry's sign-in page through the provider's sign-in (and consent,
 * when it asks) as `user`. */
async function throughProvider(page: Page, user: string, js: boolean) {
  await page.goto('/login');
  if (js) await hydrated(page);
  await page.getByRole('link', { name: `Sign in with ${oidc.displayName}` }).click();
  await expect(page).toHaveURL(new RegExp(`^${oidc.issuer}/interaction/`));
  await page.getByPlaceholder('Enter any login').fill(user);
  await page.getByPlaceholder('and password').fill('any-password');
  await page.getByRole('button', { name: 'Sign-in' }).click();
  // The provider asks for consent the first time a user signs in to this client.
  const consent = page.getByRole('button', { name: 'Continue' });
  await expect(consent.or(page.getByTestId('whoami')).or(page.getByTestId('oidc-error'))).toBeVisible();
  if (await consent.isVisible()) await consent.click();
}

/** Signed in as `user`: sign-out, then the offer to sign out of the provider
 * too, which ends the provider's session (its sign-in form asks again). */
async function signOutOfBoth(page: Page, user: string, js: boolean) {
  await expect(page.getByTestId('dash-user')).toHaveText(user);
  await expect(page.getByTestId('dash-group')).toHaveText('default');
  await page.getByRole('button', { name: 'Sign out' }).click();
  await expect(page).toHaveURL(/\/login\?signed_out=oidc/);
  await expect(page.getByTestId('oidc-signed-out')).toContainText('You are signed out of Gantry.');
  await page.getByRole('link', { name: `Sign out of ${oidc.displayName} too` }).click();
  await expect(page).toHaveURL(new RegExp(`^${oidc.issuer}/session/end`));
  await page.getByRole('button', { name: 'Yes, sign me out' }).click();
  await expect(page).toHaveURL(/\/login$/);
  // Out of Gantry: its pages send the browser to the sign-in page.
  await page.goto('/');
  await expect(page).toHaveURL(/\/login\?next=/);
  if (js) await hydrated(page);
  // The provider no longer knows the browser: a new sign-in asks for a login.
  await page.getByRole('link', { name: `Sign in with ${oidc.displayName}` }).click();
  await expect(page.getByPlaceholder('Enter any login')).toBeVisible();
}

test('an admin maps a directory group; its member signs in through the provider and out of both', async ({ page }) => {
  await mapGroup(page, 'e2e-gpu-users', true);
  await expect(page.getByRole('link', { name: `Sign in with ${oidc.displayName}` })).toBeVisible();
  await throughProvider(page, 'sso-ana', true);
  await expect(page).toHaveURL(/\/$/);
  await expect(page.getByTestId('whoami')).toContainText('sso-ana');
  await signOutOfBoth(page, 'sso-ana', true);
});

test('a provider user in no mapped group is told so and stays signed out', async ({ page }) => {
  await throughProvider(page, 'sso-eve', true);
  await expect(page).toHaveURL(/\/login\?sso=no_group/);
  await expect(page.getByTestId('oidc-error')).toHaveText(
    'Your account is in no group that may use Gantry — ask your administrator.',
  );
  await page.goto('/');
  await expect(page).toHaveURL(/\/login/);
});

test.describe('with JavaScript disabled', () => {
  test.use({ javaScriptEnabled: false });

  test('the mapping, the sign-in through the provider and both sign-outs work through plain HTML', async ({ page }) => {
    await mapGroup(page, 'e2e-gpu-users-nojs', false);
    await throughProvider(page, 'sso-ben', false);
    await expect(page).toHaveURL(/\/$/);
    await expect(page.getByTestId('whoami')).toContainText('sso-ben');
    await signOutOfBoth(page, 'sso-ben', false);
  });
});
