import { test, expect, type Page } from '@playwright/test';
import { ADMIN_PASSWORD, hydrated, navLink, signInOk, uniqueName, setDefaultQuota, createUser } from './helpers';

// Kept data volumes from the owner's side: delete a machine keeping its
// volume, create a new machine on it, keep it again, then delete it from
// the "Kept volumes" card. Also the create form's CPU and memory fields.

async function deleteMachine(page: Page, name: string, keep: boolean) {
  await page.locator(`[data-testid="machine-row"][data-name="${name}"]`).getByRole('link', { name }).click();
  await expect(page).toHaveURL(/\/machines\/\d+$/);
  await hydrated(page);
  const form = page.getByTestId('delete-machine');
  if (keep) await form.getByLabel('Keep the data volume').check();
  page.once('dialog', (d) => d.accept());
  await form.getByRole('button', { name: 'Delete machine' }).click();
  await expect(page.getByTestId('operation-ok')).toContainText('queued');
  await expect(page.locator('[data-testid="task-row"]').first()).toHaveAttribute('data-state', 'succeeded', { timeout: 60_000 });
  await navLink(page, 'Machines').click();
  await expect(page).toHaveURL(/\/machines$/);
  await hydrated(page);
}

async function createMachine(page: Page, name: string) {
  const create = page.getByTestId('create-machine');
  await create.getByLabel('Name').fill(name);
  await create.getByLabel('GPU count').fill('1');
  await create.getByRole('button', { name: 'Create machine' }).click();
  await expect(page.getByTestId('create-ok')).toContainText(name);
  const row = page.locator(`[data-testid="machine-row"][data-name="${name}"]`);
  await expect(row).toHaveAttribute('data-state', 'running', { timeout: 60_000 });
  return row;
}

test('a kept volume carries a new machine and can then be deleted', async ({ page }) => {
  test.setTimeout(180_000);
  const user = uniqueName('keep');
  await signInOk(page, 'admin', ADMIN_PASSWORD);
  await expect(await setDefaultQuota(page, 2)).toContainText('/ 2');
  await createUser(page, user, 'keep-password-1');
  await page.getByRole('button', { name: 'Sign out' }).click();
  await expect(page).toHaveURL(/\/login/);

  await signInOk(page, user, 'keep-password-1');
  await navLink(page, 'Machines').click();
  await expect(page).toHaveURL(/\/machines$/);
  await hydrated(page);

  // CPUs and memory: the server parses them and says what is wrong.
  const create = page.getByTestId('create-machine');
  const first = uniqueName('vol');
  await create.getByLabel('Name').fill(first);
  await create.getByLabel('CPUs').fill('1,5');
  await create.getByRole('button', { name: 'Create machine' }).click();
  await expect(page.getByTestId('form-error')).toHaveText('CPUs must be a number such as 2 or 0.5 (at most three decimals)');
  await create.getByLabel('CPUs').fill('0.5');
  await create.getByLabel('Memory (MB)').fill('256');
  await createMachine(page, first);

  // Deleted with its volume kept: the card lists it.
  await deleteMachine(page, first, true);
  const kept = page.getByTestId('kept-volume').filter({ hasText: first });
  await expect(kept).toHaveCount(1);
  const volume = (await kept.getAttribute('data-name'))!;

  // A new machine on that volume; the volume is then no longer "kept".
  const choice = page.getByTestId('create-machine').getByLabel('Data volume');
  const value = (await choice.locator('option', { hasText: volume }).getAttribute('value'))!;
  await choice.selectOption(value);
  const second = uniqueName('vol');
  const row = await createMachine(page, second);
  await expect(row).toContainText(volume);
  await expect(page.locator(`[data-testid="kept-volume"][data-name="${volume}"]`)).toHaveCount(0);

  // Kept once more, then deleted from the card (confirming the dialog).
  await deleteMachine(page, second, true);
  const again = page.locator(`[data-testid="kept-volume"][data-name="${volume}"]`);
  await expect(again).toHaveCount(1);
  page.once('dialog', (d) => d.accept());
  await again.getByRole('button', { name: `Delete volume ${volume}` }).click();
  await expect(page.getByTestId('kept-deleted')).toContainText(volume);
  await expect(again).toHaveCount(0);
});
