import { test, expect } from '@playwright/test';
import { ADMIN_PASSWORD, hydrated, navLink, signIn, signInOk, uniqueName } from './helpers';

test('admin signs in and sees the dashboard with user, group and quota', async ({ page }) => {
  await page.goto('/');
  await expect(page).toHaveURL(/\/login\?next=\//);
  await hydrated(page);
  await signIn(page, 'admin', ADMIN_PASSWORD);
  await expect(page).toHaveURL(/\/$/);
  await expect(page.getByTestId('dash-user')).toHaveText('admin');
  await expect(page.getByTestId('dash-group')).toHaveText('default');
  await expect(page.getByTestId('quota')).toContainText('GPUs in use');
  await expect(page.getByTestId('whoami')).toContainText('admin');
});

test('after hydration, navigation and the create-user form work without reloads', async ({ page }) => {
  await signInOk(page, 'admin', ADMIN_PASSWORD);
  await hydrated(page);
  // Mark the document: a full page load would lose this.
  await page.evaluate(() => ((window as any).__sameDocument = true));
  await navLink(page, 'Admin').click();
  await expect(page).toHaveURL(/\/admin$/);
  await expect(page.getByTestId('users')).toContainText('admin');

  const name = uniqueName('user');
  const form = page.getByTestId('create-user');
  // A name the server refuses: it says why, and the password typed stays.
  await form.getByLabel('Username').fill('Not Valid');
  await form.getByLabel('Password').fill('a-good-password');
  await form.getByRole('button', { name: 'Create user' }).click();
  await expect(page.getByTestId('form-error')).toContainText('may contain only lowercase letters');
  await expect(form.getByLabel('Password')).toHaveValue('a-good-password');
  expect(await page.evaluate(() => (window as any).__sameDocument)).toBe(true);
  await form.getByLabel('Username').fill(name);
  await form.getByLabel('Password').fill('a-good-password');
  await form.getByRole('button', { name: 'Create user' }).click();
  await expect(page.getByTestId('users')).toContainText(name);
  expect(await page.evaluate(() => (window as any).__sameDocument)).toBe(true);

  // The same name again: the server refuses and says why.
  await form.getByLabel('Username').fill(name);
  await form.getByLabel('Password').fill('a-good-password');
  await form.getByRole('button', { name: 'Create user' }).click();
  await expect(page.getByTestId('form-error')).toHaveText(`the username "${name}" is taken`);
});

test('bad sign-ins show a clear message and stay signed out', async ({ page }) => {
  await signIn(page, 'admin', 'definitely-wrong');
  await expect(page.getByTestId('form-error')).toHaveText('wrong username or password');
  await signIn(page, 'nobody-here', 'whatever-pass');
  await expect(page.getByTestId('form-error')).toHaveText('wrong username or password');
  await signIn(page, 'x'.repeat(40), 'whatever-pass');
  await expect(page.getByTestId('form-error')).toHaveText('username must be at most 32 characters');
  await page.goto('/');
  await expect(page).toHaveURL(/\/login/);
});

test('a regular user has no admin console', async ({ page }) => {
  const name = uniqueName('plain');
  await signInOk(page, 'admin', ADMIN_PASSWORD);
  await page.goto('/admin');
  const form = page.getByTestId('create-user');
  await hydrated(page);
  await form.getByLabel('Username').fill(name);
  await form.getByLabel('Password').fill('plain-password');
  await form.getByRole('button', { name: 'Create user' }).click();
  await expect(page.getByTestId('users')).toContainText(name);
  await page.getByRole('button', { name: 'Sign out' }).click();
  await expect(page).toHaveURL(/\/login/);

  await signInOk(page, name, 'plain-password');
  await expect(page.getByTestId('dash-user')).toHaveText(name);
  await expect(navLink(page, 'Admin')).toHaveCount(0);
  const res = await page.goto('/admin');
  expect(res?.status()).toBe(403);
  await expect(page.getByTestId('forbidden')).toBeVisible();
});

test.describe('with JavaScript disabled', () => {
  test.use({ javaScriptEnabled: false });

  test('the same sign-in works through plain HTML forms', async ({ page }) => {
    await signIn(page, 'admin', 'wrong-again-1', { js: false });
    await expect(page.getByTestId('form-error')).toHaveText('wrong username or password');
    await signIn(page, 'admin', ADMIN_PASSWORD, { js: false });
    await expect(page).toHaveURL(/\/$/);
    await expect(page.getByTestId('dash-user')).toHaveText('admin');
    await expect(page.getByTestId('quota')).toContainText('GPUs in use');
    await page.getByRole('button', { name: 'Sign out' }).click();
    await expect(page).toHaveURL(/\/login/);
  });
});
