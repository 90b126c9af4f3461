import { test, expect, type Page } from '@playwright/test';
import { ADMIN_PASSWORD, hydrated, navLink, signIn, signInOk, uniqueName, setDefaultQuota, createUser, afterPolls } from './helpers';

// A node's whole life as the admin console drives it: added by its engine
// endpoint (a second dockerd, scripts/dockerd2.sh), given a machine,
// drained, then marked lost — and the machine's owner sees it released.

const endpoint = process.env.GANTRY_E2E_NODE2_ENDPOINT;

async function quotaText(page: Page) {
  return `${await page.getByTestId('quota-used').first().innerText()} / ${await page.getByTestId('quota-total').first().innerText()}`;
}

async function signOut(page: Page) {
  await page.getByRole('button', { name: 'Sign out' }).click();
  await expect(page).toHaveURL(/\/login/);
}

test('admin adds a node, drains it and marks it lost; its machine is released', async ({ page }) => {
  test.skip(!endpoint, 'GANTRY_E2E_NODE2_ENDPOINT is unset: start a second engine with `bash scripts/dockerd2.sh` and pass the endpoint it prints');
  test.setTimeout(180_000);
  const node = uniqueName('node');
  const model = `E2E-LOST-GPU-${Date.now().toString(36)}`;
  const user = uniqueName('ops');
  const reason = 'power supply burnt out';

  // An engine that does not answer is refused, and nothing is saved.
  await signInOk(page, 'admin', ADMIN_PASSWORD);
  await page.goto('/admin/nodes');
  await hydrated(page);
  const add = page.getByTestId('add-node');
  await add.getByLabel('Name').fill(node);
  await add.getByLabel('Endpoint').fill('unix:///nonexistent/gantry-e2e.sock');
  await add.getByLabel('GPU count').fill('1');
  await add.getByLabel('GPU model').fill(model);
  await add.getByRole('button', { name: 'Add node' }).click();
  await expect(add.getByTestId('form-error')).toContainText('connection test failed, nothing saved');
  // Nothing saved: a fresh page's list, once loaded, has no such node.
  await page.reload();
  await expect(page.getByTestId('nodes')).toBeVisible();
  await expect(page.locator(`[data-testid="node-row"][data-name="${node}"]`)).toHaveCount(0);

  // The second engine answers: the node is listed, ready, with its declared GPU.
  await hydrated(page);
  await add.getByLabel('Name').fill(node);
  await add.getByLabel('GPU count').fill('1');
  await add.getByLabel('GPU model').fill(model);
  await add.getByLabel('Endpoint').fill(endpoint!);
  await add.getByRole('button', { name: 'Add node' }).click();
  await expect(add.getByTestId('node-added')).toBeVisible();
  const row = page.locator(`[data-testid="node-row"][data-name="${node}"]`);
  await expect(row).toHaveAttribute('data-state', 'ready');
  await expect(row).toContainText(model);
  await expect(row).toContainText('1 / 1');

  // The default group gets GPUs, and a user to use them.
  await expect(await setDefaultQuota(page, 2)).toContainText('0 / 2');
  await createUser(page, user, 'ops-password-1');
  await signOut(page);

  // The user asks for that GPU model, so the machine lands on the new node.
  await signInOk(page, user, 'ops-password-1');
  await navLink(page, 'Machines').click();
  await expect(page).toHaveURL(/\/machines$/);
  await hydrated(page);
  const create = page.getByTestId('create-machine');
  const name = uniqueName('far');
  await create.getByLabel('Name').fill(name);
  await create.getByLabel('GPU count').fill('1');
  await create.getByLabel('GPU model').selectOption(model);
  await create.getByRole('button', { name: 'Create machine' }).click();
  await expect(page.getByTestId('create-ok')).toContainText(`on ${node}`);
  const machine = page.locator(`[data-testid="machine-row"][data-name="${name}"]`);
  await expect(machine).toHaveAttribute('data-state', 'running', { timeout: 90_000 });
  await expect.poll(() => quotaText(page)).toBe('1 / 2');
  await signOut(page);

  // The admin drains the node: it keeps the machine, takes nothing new.
  await signInOk(page, 'admin', ADMIN_PASSWORD);
  await page.goto('/admin/nodes');
  await hydrated(page);
  await row.getByLabel(`State of ${node}`).selectOption('draining');
  await row.getByTestId('node-set-state').getByRole('button', { name: 'Set' }).click();
  await expect(row).toHaveAttribute('data-state', 'draining');
  await expect(row.getByTestId('node-state')).toHaveText('draining');

  // A reason being typed survives the page's polling: the same input
  // element, with its text, is there after two refetches (by the second
  // answer, the first has certainly been rendered).
  const why = row.getByLabel(`Why ${node} is lost`);
  await why.fill(reason);
  await why.evaluate((el) => ((el as any).__typedInto = true));
  await afterPolls(page, 2);
  await expect(why).toHaveValue(reason);
  expect(await why.evaluate((el) => (el as any).__typedInto === true)).toBe(true);

  // Marking it lost needs the checkbox, then releases the machine.
  await row.getByLabel('I understand its machines will be released').check();
  await row.getByRole('button', { name: 'Mark lost' }).click();
  await expect(page.getByTestId('node-lost-ok')).toContainText('1 machine(s) released');
  await expect(row).toHaveAttribute('data-state', 'lost');
  await expect(row.getByTestId('node-reason')).toHaveText(reason);
  await expect(row.getByLabel(`State of ${node}`)).toHaveCount(0);
  await signOut(page);

  // The owner sees the machine lost, why, and the quota back.
  await signInOk(page, user, 'ops-password-1');
  await navLink(page, 'Machines').click();
  await expect(page).toHaveURL(/\/machines$/);
  await expect(machine).toHaveAttribute('data-state', 'lost');
  await expect(machine.getByTestId('machine-state')).toHaveText('lost');
  await expect.poll(() => quotaText(page)).toBe('0 / 2');
  await machine.getByRole('link', { name }).click();
  await expect(page).toHaveURL(/\/machines\/\d+$/);
  await expect(page.getByTestId('machine-lost')).toContainText(reason);
  await expect(page.getByRole('button', { name: 'Restart' })).toBeDisabled();
});

test.describe('with JavaScript disabled', () => {
  test.use({ javaScriptEnabled: false });

  test('the node forms work as plain HTML forms', async ({ page }) => {
    const node = uniqueName('plain');
    await signIn(page, 'admin', ADMIN_PASSWORD, { js: false });
    await expect(page).toHaveURL(/\/$/);
    await page.goto('/admin/nodes');
    const add = page.getByTestId('add-node');
    await add.getByLabel('Name').fill(node);
    await add.getByLabel('Endpoint').fill('tcp://127.0.0.1:1');
    await add.getByLabel('GPU count').fill('0');
    await add.getByRole('button', { name: 'Add node' }).click();
    await expect(page.getByTestId('add-node').getByTestId('form-error')).toContainText('connection test failed, nothing saved');

    test.skip(!endpoint, 'GANTRY_E2E_NODE2_ENDPOINT is unset: the rest needs a second engine (scripts/dockerd2.sh)');
    await page.getByTestId('add-node').getByLabel('Name').fill(node);
    await page.getByTestId('add-node').getByLabel('Endpoint').fill(endpoint!);
    await page.getByTestId('add-node').getByLabel('GPU count').fill('0');
    await page.getByTestId('add-node').getByRole('button', { name: 'Add node' }).click();
    const row = page.locator(`[data-testid="node-row"][data-name="${node}"]`);
    await expect(row).toHaveAttribute('data-state', 'ready');
    await row.getByLabel(`State of ${node}`).selectOption('down');
    await row.getByLabel(`State reason for ${node}`).fill('maintenance window');
    await row.getByTestId('node-set-state').getByRole('button', { name: 'Set' }).click();
    await expect(row).toHaveAttribute('data-state', 'down');
    await expect(row.getByTestId('node-reason')).toHaveText('maintenance window');
    await row.getByLabel(`Why ${node} is lost`).fill('decommissioned');
    await row.getByLabel('I understand its machines will be released').check();
    await row.getByRole('button', { name: 'Mark lost' }).click();
    await expect(row).toHaveAttribute('data-state', 'lost');
    await expect(row.getByTestId('node-reason')).toHaveText('decommissioned');
    // A lost node holding no live machine can be removed.
    // (Without JavaScript the form posts and the page comes back without it;
    // the box stands in for the dialog the page asks with JavaScript.)
    await row.getByTestId('node-remove').getByLabel('remove it').check();
    await row.getByTestId('node-remove').getByRole('button', { name: 'Remove' }).click();
    await expect(row).toHaveCount(0);
  });
});
