import { test, expect, type Page } from '@playwright/test';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ADMIN_PASSWORD, hydrated, navLink, signInOk, uniqueName, setDefaultQuota, createUser } from './helpers';

// Cancelling a task that has not started: a create waits for an engine that
// answered when its node was added and has gone away since (the node's
// socket is a link to the second engine's, removed after adding), so the
// dispatcher keeps it scheduled between retries. Its requester cancels it.

const endpoint = process.env.GANTRY_E2E_NODE2_ENDPOINT;

async function quotaText(page: Page) {
  return `${await page.getByTestId('quota-used').first().innerText()} / ${await page.getByTestId('quota-total').first().innerText()}`;
}

test('a create waiting for an unreachable engine can be cancelled by its requester', async ({ page }) => {
  test.skip(!endpoint?.startsWith('unix://'), 'GANTRY_E2E_NODE2_ENDPOINT (a unix:// socket from scripts/dockerd2.sh) is unset');
  test.setTimeout(180_000);
  const dir = mkdtempSync(join(tmpdir(), 'gantry-e2e-flaky-'));
  const link = join(dir, 'docker.sock');
  symlinkSync(endpoint!.slice('unix://'.length), link);
  const node = uniqueName('flaky');
  const model = `E2E-FLAKY-GPU-${Date.now().toString(36)}`;
  const user = uniqueName('wait');

  try {
    await signInOk(page, 'admin', ADMIN_PASSWORD);
    await page.goto('/admin/nodes');
    await hydrated(page);
    const add = page.getByTestId('add-node');
    await add.getByLabel('Name').fill(node);
    await add.getByLabel('Endpoint').fill(`unix://${link}`);
    await add.getByLabel('GPU count').fill('1');
    await add.getByLabel('GPU model').fill(model);
    await add.getByRole('button', { name: 'Add node' }).click();
    await expect(add.getByTestId('node-added')).toBeVisible();
  } finally {
    // From now on the node's engine does not answer.
    rmSync(dir, { recursive: true, force: true });
  }
  await expect(await setDefaultQuota(page, 2)).toContainText('0 / 2');
  await createUser(page, user, 'wait-password-1');
  await page.getByRole('button', { name: 'Sign out' }).click();
  await expect(page).toHaveURL(/\/login/);

  await signInOk(page, user, 'wait-password-1');
  await navLink(page, 'Machines').click();
  await expect(page).toHaveURL(/\/machines$/);
  await hydrated(page);
  const create = page.getByTestId('create-machine');
  const name = uniqueName('stuck');
  await create.getByLabel('Name').fill(name);
  await create.getByLabel('GPU count').fill('1');
  await create.getByLabel('GPU model').selectOption(model);
  await create.getByRole('button', { name: 'Create machine' }).click();
  await expect(page.getByTestId('create-ok')).toContainText(`on ${node}`);
  await expect.poll(() => quotaText(page)).toBe('1 / 2');

  // Retries back off exponentially: by the third, the task sits scheduled
  // for seconds at a time, so the click cannot catch it running.
  await navLink(page, 'Tasks').click();
  await expect(page).toHaveURL(/\/tasks$/);
  await hydrated(page);
  const task = page.locator('[data-testid="task-row"][data-kind="create"]').filter({ hasText: name });
  await expect(task).toContainText('retry 3 of', { timeout: 60_000 });
  await expect(task).toHaveAttribute('data-state', 'scheduled');
  await task.getByRole('button', { name: /^Cancel task \d+$/ }).click();
  await expect(page.getByTestId('cancel-ok')).toContainText('cancelled');
  await expect(task).toHaveAttribute('data-state', 'cancelled');
  await expect(task.getByRole('button', { name: /^Cancel task/ })).toHaveCount(0);

  // The machine is gone and its GPU is back.
  await navLink(page, 'Machines').click();
  await expect(page).toHaveURL(/\/machines$/);
  await expect(page.locator('[data-testid="machines"], [data-testid="no-machines"]').first()).toBeVisible();
  await expect(page.locator(`[data-testid="machine-row"][data-name="${name}"]`)).toHaveCount(0);
  await expect.poll(() => quotaText(page)).toBe('0 / 2');

  // The node stays ready until its heartbeat goes stale; mark it lost so
  // that no later request is packed onto its free GPU.
  await page.getByRole('button', { name: 'Sign out' }).click();
  await signInOk(page, 'admin', ADMIN_PASSWORD);
  await page.goto('/admin/nodes');
  await hydrated(page);
  const row = page.locator(`[data-testid="node-row"][data-name="${node}"]`);
  await row.getByLabel(`Why ${node} is lost`).fill('its engine socket was removed');
  await row.getByLabel('I understand its machines will be released').check();
  await row.getByRole('button', { name: 'Mark lost' }).click();
  await expect(row).toHaveAttribute('data-state', 'lost');
  await expect(page.getByTestId('node-lost-ok')).toContainText('0 machine(s) released');
});
