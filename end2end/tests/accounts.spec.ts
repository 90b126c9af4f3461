import { test, expect } from '@playwright/test';
import { ADMIN_PASSWORD, hydrated, signIn, signInOk, uniqueName, createUser } from './helpers';

// Account lifecycle (issue 11): an admin disables a user (whose open page
// then goes to the sign-in page, and who cannot sign in), enables them
// again, resets their password; the user must choose a new one first.

test('admin disables a user and resets a password; the user is forced to change it', async ({ browser }) => {
  test.setTimeout(120_000);
  const admin = await (await browser.newContext()).newPage();
  const user = await (await browser.newContext()).newPage();
  const name = uniqueName('acct');
  await signInOk(admin, 'admin', ADMIN_PASSWORD);
  await createUser(admin, name, 'acct-password-1');
  await signInOk(user, name, 'acct-password-1');
  await user.goto('/machines');
  await hydrated(user);

  const row = admin.locator(`[data-testid="user-row"][data-name="${name}"]`);
  await row.getByRole('button', { name: 'Disable' }).click();
  await expect(admin.getByTestId('user-changed')).toContainText(`${name} is now disabled`);
  await expect(row.getByTestId('user-disabled')).toBeVisible();
  // The user's open page learns at its next request.
  await expect(user).toHaveURL(/\/login\?next=/, { timeout: 45_000 });
  await signIn(user, name, 'acct-password-1');
  await expect(user.getByTestId('form-error')).toContainText('disabled');

  await row.getByRole('button', { name: 'Enable' }).click();
  await expect(admin.getByTestId('user-changed')).toContainText(`${name} is now enabled`);
  await row.getByLabel(`Temporary password for ${name}`).fill('temporary-pass-1');
  await row.getByRole('button', { name: 'Reset password' }).click();
  await expect(admin.getByTestId('user-changed')).toContainText('temporary password');

  await signIn(user, name, 'temporary-pass-1');
  await expect(user).toHaveURL(/\/account\/password$/);
  await expect(user.getByTestId('must-change')).toBeVisible();
  // Anything else waits for the new password.
  await user.goto('/machines');
  await expect(user).toHaveURL(/\/account\/password$/);
  await hydrated(user);
  const form = user.getByTestId('change-password');
  await form.getByLabel('Current password').fill('temporary-pass-1');
  await form.getByLabel('New password', { exact: true }).fill('my-own-pass-2');
  await form.getByLabel('New password again').fill('my-own-pass-2');
  await form.getByRole('button', { name: 'Change password' }).click();
  await expect(user.getByTestId('password-changed')).toBeVisible();
  await user.goto('/machines');
  await expect(user).toHaveURL(/\/machines$/);

  // The audit log has each change, newest first, filtered by action.
  await admin.goto('/admin/audit?action=user.');
  await hydrated(admin);
  const actions = await admin.locator('[data-testid="audit-row"]').evaluateAll((rows) => rows.slice(0, 4).map((r) => r.getAttribute('data-action')));
  expect(actions).toEqual(['user.change_password', 'user.reset_password', 'user.enable', 'user.disable']);
});
