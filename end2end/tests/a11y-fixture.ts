import { expect, type Page } from '@playwright/test';
import { ADMIN_PASSWORD, hydrated, setDefaultQuota, signInOk, uniqueName } from './helpers';

// What the accessibility and layout checks need on the pages they visit:
// as the admin, a running machine with a snapshot, a personal token, a
// compute task (refused for want of an image: it has a page and starts no
// container), a dataset with a version, and a simulated node with eight GPUs in
// a region of its own (the heatmap then has a row as wide as the one that
// ran off its card). `remove` takes away what holds containers, images or
// GPUs, so neither this run's leftovers nor its node meet later specs.

export type Made = {
  machine: string;
  machineId: string;
  snapshot: string;
  computeId: string;
  dataset: string;
  node: string;
  nodeId: string;
};

/** Fills `made` in as it goes, so what a failure left half made is still removed. */
export async function make(page: Page, made: Partial<Made>) {
  await signInOk(page, 'admin', ADMIN_PASSWORD);
  await setDefaultQuota(page, 2);

  // A machine, running, with a snapshot.
  await page.goto('/machines');
  await hydrated(page);
  const create = page.getByTestId('create-machine');
  made.machine = uniqueName('a11y');
  await create.getByLabel('Name').fill(made.machine);
  await create.getByLabel('GPU count').fill('1');
  await create.getByRole('button', { name: 'Create machine' }).click();
  const row = page.locator(`[data-testid="machine-row"][data-name="${made.machine}"]`);
  await expect(row).toHaveAttribute('data-state', 'running', { timeout: 90_000 });
  await row.getByRole('link', { name: made.machine }).click();
  await expect(page).toHaveURL(/\/machines\/\d+$/);
  made.machineId = page.url().split('/').pop()!;
  await hydrated(page);
  made.snapshot = 'a11y snapshot';
  await page.getByTestId('snapshot-name').fill(made.snapshot);
  await page.getByTestId('snapshot-take').click();
  await expect(page.locator(`[data-testid="machine-snapshot"][data-name="${made.snapshot}"]`)).toContainText('ready', { timeout: 60_000 });

  // A personal token, listed with its state; it submits a compute task
  // through the JSON API for a framework in no catalogue: refused at once,
  // the task has its page, and no container starts. (A master image made
  // for it would stay in the catalogue, where it is the compute form's first
  // choice for every later spec: there is no deleting one.)
  await page.goto('/tokens');
  await hydrated(page);
  const token = page.getByTestId('create-token');
  await token.getByLabel('Name').fill(uniqueName('a11ytok'));
  await token.getByLabel('Your password').fill(ADMIN_PASSWORD);
  await token.getByRole('button', { name: 'Create token' }).click();
  const secret = await page.getByTestId('token-secret').inputValue();
  expect(secret).toMatch(/^gnt_/);
  const submitted = await page.request.post('/api/v1/compute-tasks', {
    headers: { Authorization: `Bearer ${secret}` },
    data: {
      name: 'a11y-task', framework: uniqueName('a11yfw'), framework_version: '1.0',
      interpreter: 'Python', interpreter_version: '3.12', shell: 'echo hello', gpus: 1,
    },
  });
  expect(submitted.status(), await submitted.text()).toBe(201);
  made.computeId = String((await submitted.json()).id);
  await page.goto(`/compute/${made.computeId}`);
  await expect(page.getByTestId('task-state')).toHaveText('failed');

  // A dataset with version v1.
  made.dataset = uniqueName('a11yds');
  await page.goto('/datasets');
  await hydrated(page);
  const dataset = page.getByTestId('create-dataset');
  await dataset.getByLabel('Code').fill(made.dataset);
  await dataset.getByLabel('Name').fill('Accessibility check');
  await dataset.getByLabel('Category').selectOption('images');
  await dataset.getByRole('button', { name: 'Create dataset' }).click();
  await expect(page).toHaveURL(new RegExp(`/datasets/${made.dataset}$`));
  await hydrated(page);
  await page.getByTestId('create-version').getByLabel('New version').fill('v1');
  await page.getByRole('button', { name: 'Create version' }).click();
  await expect(page).toHaveURL(new RegExp(`/datasets/${made.dataset}/v1$`));

  // A region and a simulated node with eight GPUs in it.
  const region = uniqueName('a11yrg');
  await page.goto('/admin/regions');
  await hydrated(page);
  const regionForm = page.getByTestId('create-region');
  await regionForm.getByLabel('Code').fill(region);
  await regionForm.getByLabel('Name', { exact: true }).fill('Accessibility region');
  await regionForm.getByRole('button', { name: 'Add region' }).click();
  await expect(page.getByTestId('region-created')).toContainText(region);
  made.node = uniqueName('a11ynode');
  await page.goto('/admin/nodes');
  await hydrated(page);
  const add = page.getByTestId('add-node');
  await add.getByLabel('Name').fill(made.node);
  await add.getByLabel('Region').selectOption(region);
  await add.getByLabel('Endpoint').fill(`simulated://${made.node}`);
  await add.getByLabel('GPU count').fill('8');
  await add.getByRole('button', { name: 'Add node' }).click();
  await expect(add.getByTestId('node-added')).toBeVisible();
  const nodeRow = page.locator(`[data-testid="node-row"][data-name="${made.node}"]`);
  await expect(nodeRow).toHaveAttribute('data-state', 'ready');
  // The node's page is linked from the heatmap (the nodes list has no link).
  await page.goto('/admin/overview');
  const link = page.getByTestId('heatmap').locator(`a[title="charts of node ${made.node}"]`);
  made.nodeId = (await link.getAttribute('href'))!.split('/').pop()!;
}

/** Deletes the snapshot and the machine (waiting until both are gone) and
 * marks the node lost and removes it. Whatever was not made is skipped. */
export async function remove(page: Page, made: Partial<Made>) {
  page.on('dialog', (d) => void d.accept());
  if (made.snapshot) {
    await page.goto('/snapshots');
    await hydrated(page);
    const snapshot = page.locator(`[data-testid="snapshot"][data-name="${made.snapshot}"]`).filter({ hasText: made.machine! });
    if ((await snapshot.count()) > 0) {
      await snapshot.getByRole('button', { name: `Delete snapshot ${made.snapshot}` }).click();
      await expect(snapshot).toHaveCount(0, { timeout: 60_000 });
    }
  }
  if (made.machineId) {
    await page.goto(`/machines/${made.machineId}`);
    await hydrated(page);
    await page.getByTestId('delete-machine').getByRole('button', { name: 'Delete machine' }).click();
    await expect(page.getByTestId('operation-ok')).toContainText('queued');
    await expect(page.locator('[data-testid="task-row"]').first()).toContainText('succeeded', { timeout: 60_000 });
  }
  if (made.node) {
    await page.goto('/admin/nodes');
    await hydrated(page);
    const row = page.locator(`[data-testid="node-row"][data-name="${made.node}"]`);
    await row.getByLabel(`Why ${made.node} is lost`).fill('accessibility check done');
    await row.getByLabel('I understand its machines will be released').check();
    await row.getByRole('button', { name: 'Mark lost' }).click();
    await expect(row).toHaveAttribute('data-state', 'lost');
    await row.getByTestId('node-remove').getByRole('button', { name: 'Remove' }).click();
    await expect(row).toHaveCount(0);
  }
}
