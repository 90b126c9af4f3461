import { test, expect, type Page } from '@playwright/test';
import { ADMIN_PASSWORD, hydrated, navLink, signInOk, uniqueName, setDefaultQuota, createUser } from './helpers';

// One user's whole journey with a dev machine, on the server's real
// executor (Docker when `make test` started dockerd).

async function quotaText(page: Page) {
  return `${await page.getByTestId('quota-used').first().innerText()} / ${await page.getByTestId('quota-total').first().innerText()}`;
}

test('a user creates a machine, watches it run, deletes it and gets the quota back', async ({ page }) => {
  test.setTimeout(120_000);
  const user = uniqueName('dev');

  // The admin gives the default group two GPUs and makes an account.
  await signInOk(page, 'admin', ADMIN_PASSWORD);
  await expect(await setDefaultQuota(page, 2)).toContainText('0 / 2');
  await createUser(page, user, 'dev-password-1');
  await page.getByRole('button', { name: 'Sign out' }).click();
  await expect(page).toHaveURL(/\/login/);

  // The user creates a machine and sees it reach "running" without reloading.
  await signInOk(page, user, 'dev-password-1');
  await navLink(page, 'Machines').click();
  await expect(page).toHaveURL(/\/machines$/);
  await hydrated(page);
  expect(await quotaText(page)).toBe('0 / 2');
  const create = page.getByTestId('create-machine');
  const name = uniqueName('box');
  await create.getByLabel('Name').fill(name);
  await create.getByLabel('GPU count').fill('1');
  await create.getByRole('button', { name: 'Create machine' }).click();
  await expect(page.getByTestId('create-ok')).toContainText(name);
  const row = page.locator(`[data-testid="machine-row"][data-name="${name}"]`);
  await expect(row).toHaveAttribute('data-state', 'running', { timeout: 60_000 });
  await expect.poll(() => quotaText(page)).toBe('1 / 2');

  // Asking for more than the quota allows is refused with the numbers.
  await create.getByLabel('Name').fill(uniqueName('big'));
  await create.getByLabel('GPU count').fill('2');
  await create.getByRole('button', { name: 'Create machine' }).click();
  await expect(page.getByTestId('form-error')).toHaveText('group default holds 1 of 2 GPUs; this machine asks for 2');

  // Delete it (confirming the dialog) and see the quota come back.
  await row.getByRole('link', { name }).click();
  await expect(page).toHaveURL(/\/machines\/\d+$/);
  await hydrated(page);
  page.once('dialog', (d) => d.accept());
  await page.getByTestId('delete-machine').getByRole('button', { name: 'Delete machine' }).click();
  await expect(page.getByTestId('operation-ok')).toContainText('queued');
  await expect(page.locator('[data-testid="task-row"]').first()).toContainText('succeeded', { timeout: 60_000 });
  await navLink(page, 'Machines').click();
  // The list has loaded (a table, or the line saying there is none) before
  // the row is looked for: a count of 0 holds on any page without the list.
  await expect(page.locator('[data-testid="machines"], [data-testid="no-machines"]').first()).toBeVisible();
  await expect(page.locator(`[data-testid="machine-row"][data-name="${name}"]`)).toHaveCount(0);
  await expect.poll(() => quotaText(page)).toBe('0 / 2');
});
