import { test, expect, type Page } from '@playwright/test';
import { ADMIN_PASSWORD, hydrated, navLink, signIn, signInOk, uniqueName, setDefaultQuota, createUser, afterPolls } from './helpers';

// Compute tasks end to end on the server's real executor: the admin sets up
// a region, a region image for region "local" (the local Docker node) with
// the demo image, and a master image linked to it; a user submits a task
// and watches where it went and why, its end and its output. Framework and
// interpreter names are unique to each run, so other data cannot match.

const IMAGE = 'gantry/devbox:latest';

/** Collects hydration errors the browser logs, to assert there were none. */
function hydrationErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error' && /hydrat/i.test(m.text())) errors.push(m.text());
  });
  return errors;
}

/** Adds the demo image to region "local" (or finds it, when an earlier
 * test already did) and returns its region image id. */
async function localRegionImage(page: Page): Promise<string> {
  await page.goto('/admin/region-images');
  const row = page.locator(`[data-testid="region-image-row"][data-region="local"][data-reference="${IMAGE}"][data-arch="amd64"]`);
  if ((await row.count()) === 0) {
    await hydrated(page);
    const form = page.getByTestId('create-region-image');
    await form.getByLabel('Region').selectOption('local');
    await form.getByLabel('Image address').fill(IMAGE);
    await form.getByLabel('Architecture').selectOption('amd64');
    await form.getByLabel('Type').selectOption('training');
    await form.getByRole('button', { name: 'Add region image' }).click();
    await expect(page.getByTestId('region-image-created')).toContainText(IMAGE);
  }
  await expect(row).toHaveCount(1);
  return (await row.getAttribute('data-id'))!;
}

test('admin sets up the catalogue; a user runs a compute task and sees why here, succeeded and its output', async ({ page }) => {
  test.setTimeout(180_000);
  const user = uniqueName('cu');
  const framework = uniqueName('fw');
  const interpreter = uniqueName('py');
  const master = uniqueName('mi');
  const region = uniqueName('rg');
  const errors = hydrationErrors(page);

  await signInOk(page, 'admin', ADMIN_PASSWORD);

  // A new region appears with its (empty) resources; "local" shows its node's GPUs.
  await page.goto('/admin/regions');
  await hydrated(page);
  const regionForm = page.getByTestId('create-region');
  await regionForm.getByLabel('Code').fill(region);
  await regionForm.getByLabel('Name', { exact: true }).fill('E2E region');
  await regionForm.getByRole('button', { name: 'Add region' }).click();
  await expect(page.getByTestId('region-created')).toContainText(region);
  await expect(page.locator(`[data-testid="region-row"][data-code="${region}"]`)).toContainText('no nodes');
  await expect(page.locator('[data-testid="region-row"][data-code="local"] [data-testid="region-gpus"]')).toContainText('free');
  // The same code again is refused with the reason.
  await regionForm.getByLabel('Code').fill(region);
  await regionForm.getByLabel('Name', { exact: true }).fill('Again');
  await regionForm.getByRole('button', { name: 'Add region' }).click();
  await expect(regionForm.getByTestId('form-error')).toContainText('exists already');

  // Nodes join a region (the new one is offered) with an architecture.
  await page.goto('/admin/nodes');
  await hydrated(page);
  const addNode = page.getByTestId('add-node');
  await expect(addNode.getByLabel('Region')).toHaveValue('local');
  await expect(addNode.getByLabel('Region').locator(`option[value="${region}"]`)).toHaveCount(1);
  await expect(addNode.getByLabel('Architecture')).toHaveValue('amd64');

  const imageId = await localRegionImage(page);

  // A master image with this run's framework and interpreter, linked to it.
  await page.goto('/admin/catalogue');
  await hydrated(page);
  const create = page.getByTestId('create-master-image');
  await create.getByLabel('Name').fill(master);
  await create.getByLabel('Framework', { exact: true }).fill(framework);
  await create.getByLabel('Framework version').fill('1.0');
  await create.getByLabel('Interpreter', { exact: true }).fill(interpreter);
  await create.getByLabel('Interpreter version').fill('3.11');
  await create.getByRole('button', { name: 'Add master image' }).click();
  await expect(page.getByTestId('master-image-created')).toBeVisible();
  const card = page.locator(`[data-testid="master-image"][data-name="${master}"]`);
  await expect(card.getByTestId('no-links')).toBeVisible();
  await card.getByTestId('link-form').locator('select').selectOption(imageId);
  await card.getByRole('button', { name: 'Link' }).click();
  await expect(card.getByTestId('link')).toContainText(IMAGE);

  // GPU quota for the default group, and an account in it.
  await expect(await setDefaultQuota(page, 2)).toContainText('/ 2');
  await createUser(page, user, 'compute-password-1');
  await page.getByRole('button', { name: 'Sign out' }).click();
  await expect(page).toHaveURL(/\/login/);

  // The user submits `echo hello-from-gantry` (argv: one argument per line).
  await signInOk(page, user, 'compute-password-1');
  await navLink(page, 'Compute').click();
  await expect(page).toHaveURL(/\/compute$/);
  await hydrated(page);
  const form = page.getByTestId('submit-compute');
  await form.getByLabel('Name').fill('hello');
  await form.getByLabel('Framework · interpreter').selectOption({ label: `${framework} 1.0 · ${interpreter} 3.11` });
  await form.getByLabel('Command').fill('echo\nhello-from-gantry');
  await form.getByLabel('GPU count').fill('1');
  await form.getByLabel('CPUs').fill('0.5');
  await form.getByLabel('Memory (MB)').fill('256');
  await form.getByLabel('Time limit').fill('5');
  // The post lands on the task's page (without a reload), which says why
  // it runs where it does, then shows the end and the output.
  await page.evaluate(() => ((window as any).__sameDocument = true));
  await form.getByRole('button', { name: 'Submit task' }).click();
  await expect(page).toHaveURL(/\/compute\/\d+$/);
  expect(await page.evaluate(() => (window as any).__sameDocument)).toBe(true);
  await hydrated(page);
  const why = page.getByTestId('compute-why');
  await expect(why.getByRole('heading')).toHaveText('Why here');
  await expect(why.getByTestId('why-summary')).toContainText('region local');
  await expect(why).toContainText('Regions with a matching image: local');
  await expect(page.getByTestId('compute-region')).toHaveText('local');
  await expect(page.getByTestId('task-state')).toHaveText('succeeded', { timeout: 120_000 });
  await expect(page.getByTestId('compute-exit')).toHaveText('0');
  await expect(page.getByTestId('compute-output')).toContainText('hello-from-gantry');
  await expect(page.getByTestId('compute-command')).toHaveText(/^echo\s+hello-from-gantry$/);

  // Back in the list, the task is done.
  await navLink(page, 'Compute').click();
  await expect(page.locator('[data-testid="compute-row"][data-name="hello"]').first()).toHaveAttribute('data-state', 'succeeded');

  // A longer shell task shows its output live while it runs, and is cancelled.
  await form.getByLabel('Name').fill('ticker');
  await form.getByLabel('Command').fill('echo tick-start; sleep 120');
  await form.getByLabel('Shell').check();
  await form.getByRole('button', { name: 'Submit task' }).click();
  await expect(page).toHaveURL(/\/compute\/\d+$/);
  await hydrated(page);
  await expect(page.getByTestId('task-state')).toHaveText('running', { timeout: 60_000 });
  await expect(page.getByTestId('compute-output')).toContainText('tick-start');
  await expect(page.getByTestId('compute-output-card')).toContainText('Live');
  // A refresh updates the output in place: the same <pre> (so a reader's
  // scroll position stays) after two answers, one of them failed (by the
  // second, the first has certainly been rendered).
  const output = page.getByTestId('compute-output');
  await output.evaluate((el) => ((el as any).__kept = true));
  const taskUrl = new URL(page.url()).pathname;
  await page.route(`**${taskUrl}`, (r) => (r.request().headers()['x-gantry-poll'] ? r.fulfill({ status: 500, contentType: 'text/plain', body: 'busy' }) : r.continue()), { times: 1 });
  await afterPolls(page, 2);
  await expect(output).toContainText('tick-start');
  expect(await output.evaluate((el) => (el as any).__kept === true)).toBe(true);
  await page.getByRole('button', { name: 'Cancel task' }).click();
  await expect(page.getByTestId('task-state')).toHaveText('cancelled', { timeout: 60_000 });
  await expect(page.getByTestId('compute-output')).toContainText('tick-start');

  // Both ended: the GPUs are back in the group's quota.
  await navLink(page, 'Machines').click();
  await expect(page.getByTestId('quota-used')).toHaveText('0');
  expect(errors).toEqual([]);
});

test('a personal API token is shown once, works for the API, and stops working once revoked', async ({ page }) => {
  const name = uniqueName('tok');
  const errors = hydrationErrors(page);
  await signInOk(page, 'admin', ADMIN_PASSWORD);
  await navLink(page, 'Tokens').click();
  await expect(page).toHaveURL(/\/tokens$/);
  await hydrated(page);
  const creates: string[] = [];
  page.on('request', (r) => {
    if (r.url().includes('/api/create_token')) creates.push(r.url());
  });
  // Revoking asks first, naming the token; the test answers yes.
  const dialogs: string[] = [];
  page.on('dialog', (d) => {
    dialogs.push(d.message());
    void d.accept();
  });
  await page.getByTestId('create-token').getByLabel('Name').fill(name);
  // A token is made only with the account's password (a session alone is not enough).
  await page.getByTestId('create-token').getByLabel('Your password').fill(ADMIN_PASSWORD);
  // A double click makes one token, not two (one whose secret is never shown).
  await page.getByRole('button', { name: 'Create token' }).dblclick();
  const secret = await page.getByTestId('token-secret').inputValue();
  expect(creates).toHaveLength(1);
  expect(secret).toMatch(/^gnt_[0-9a-f]{64}$/);
  const row = page.locator(`[data-testid="token-row"][data-name="${name}"]`);
  await expect(row).toHaveAttribute('data-state', 'active');
  const api = () => page.request.get('/api/v1/compute-tasks', { headers: { Authorization: `Bearer ${secret}` } });
  expect((await api()).status()).toBe(200);

  await row.getByRole('button', { name: `Revoke token ${name}` }).click();
  await expect(row).toHaveAttribute('data-state', 'revoked');
  expect(dialogs).toEqual([expect.stringContaining(`Revoke token ${name}?`)]);
  expect((await api()).status()).toBe(401);
  // Shown once: a reload does not show it again.
  await page.reload();
  await expect(page.getByTestId('tokens')).toContainText(name);
  await expect(page.locator(`[data-testid="token-row"][data-name="${name}"]`)).toHaveCount(1);
  await expect(page.getByTestId('new-token')).toHaveCount(0);
  expect(errors).toEqual([]);
});

test.describe('with JavaScript disabled', () => {
  test.use({ javaScriptEnabled: false });

  test('the catalogue and submission forms post as plain HTML and show why a task is refused', async ({ page }) => {
    const framework = uniqueName('nofw');
    const master = uniqueName('lonely');
    await signIn(page, 'admin', ADMIN_PASSWORD, { js: false });
    await expect(page).toHaveURL(/\/$/);

    // A master image with no region image linked.
    await page.goto('/admin/catalogue');
    const create = page.getByTestId('create-master-image');
    await create.getByLabel('Name').fill(master);
    await create.getByLabel('Framework', { exact: true }).fill(framework);
    await create.getByLabel('Framework version').fill('0.1');
    await create.getByLabel('Interpreter', { exact: true }).fill('Python');
    await create.getByLabel('Interpreter version').fill('3.12');
    await create.getByRole('button', { name: 'Add master image' }).click();
    await expect(page.locator(`[data-testid="master-image"][data-name="${master}"]`).getByTestId('no-links')).toBeVisible();

    // A bad field comes back as the form's error.
    await page.goto('/compute');
    let form = page.getByTestId('submit-compute');
    await form.getByLabel('Framework · interpreter').selectOption({ label: `${framework} 0.1 · Python 3.12 (no region image yet)` });
    await form.getByLabel('Command').fill('echo hello');
    await form.getByRole('button', { name: 'Submit task' }).click();
    await expect(page.getByTestId('form-error')).toContainText('put each argument on its own line, or tick "shell"');

    // A shell command for a framework no image provides: the post lands on
    // the task's page, which says it was refused and why.
    form = page.getByTestId('submit-compute');
    await form.getByLabel('Framework · interpreter').selectOption({ label: `${framework} 0.1 · Python 3.12 (no region image yet)` });
    await form.getByLabel('Command').fill('echo hello');
    await form.getByLabel('Shell').check();
    await form.getByRole('button', { name: 'Submit task' }).click();
    await expect(page).toHaveURL(/\/compute\/\d+$/);
    await expect(page.getByTestId('task-state')).toHaveText('failed');
    await expect(page.getByTestId('compute-why').getByRole('heading')).toHaveText('Why refused');
    await expect(page.getByTestId('why-summary')).toContainText(`No image matches framework ${framework} 0.1`);
    await expect(page.getByTestId('compute-command')).toHaveText('echo hello');
  });

  test('a token made by a plain form post is shown once on the page it returns to', async ({ page }) => {
    const name = uniqueName('plaintok');
    await signIn(page, 'admin', ADMIN_PASSWORD, { js: false });
    await expect(page).toHaveURL(/\/$/);
    await page.goto('/tokens');
    // A wrong password makes nothing and says why.
    await page.getByTestId('create-token').getByLabel('Name').fill(name);
    await page.getByTestId('create-token').getByLabel('Your password').fill('not-the-admin-password');
    await page.getByRole('button', { name: 'Create token' }).click();
    await expect(page.getByTestId('form-error')).toContainText('your password is wrong');
    await expect(page.locator(`[data-testid="token-row"][data-name="${name}"]`)).toHaveCount(0);
    await page.getByTestId('create-token').getByLabel('Name').fill(name);
    await page.getByTestId('create-token').getByLabel('Your password').fill(ADMIN_PASSWORD);
    await page.getByRole('button', { name: 'Create token' }).click();
    await expect(page).toHaveURL(/\/tokens$/);
    await expect(page.getByTestId('token-secret')).toHaveValue(/^gnt_[0-9a-f]{64}$/);
    await expect(page.locator(`[data-testid="token-row"][data-name="${name}"]`)).toHaveAttribute('data-state', 'active');
    await page.reload();
    await expect(page.getByTestId('new-token')).toHaveCount(0);
  });
});
