import { test, expect, type Page } from '@playwright/test';
import { ADMIN_PASSWORD, hydrated, signInOk, uniqueName, createUser } from './helpers';

// What an admin typed, ticked or chose in one row's form stays in that
// row through the list's refetch that follows every answer of a server
// function (a refused one too): it is not reset, and it does not move to
// another row when a row is added above. Each check first waits for
// something the same refetch changes (another row, or another row's data),
// so it looks after the refetch, not before it. Groups named `aa-…` sort
// before every other group, `zz-…` after.

async function newGroup(page: Page, name: string) {
  const form = page.locator('form').filter({ has: page.getByRole('button', { name: 'Create group' }) });
  await form.getByLabel('Name').fill(name);
  await form.getByLabel('GPU quota').fill('2');
  await form.getByRole('button', { name: 'Create group' }).click();
  await expect(policyOf(page, name)).toBeVisible();
}

/** Makes groups on a page of its own, so `page` learns of them only at its next refetch. */
async function groupsElsewhere(page: Page, names: string[]) {
  const other = await page.context().newPage();
  await other.goto('/admin/groups');
  await hydrated(other);
  for (const name of names) await newGroup(other, name);
  await other.close();
}

function policyOf(page: Page, group: string) {
  return page.locator(`[data-testid="group-policy"][data-name="${group}"]`);
}

/** The revision a group's policy form was built from. */
function revOf(page: Page, group: string) {
  return policyOf(page, group).locator('input[name="policy_rev"]');
}

test.describe('forms keep what was typed', () => {
  test.beforeEach(async ({ page }) => {
    test.setTimeout(120_000);
    await signInOk(page, 'admin', ADMIN_PASSWORD);
  });

  test('groups: what was typed for a group stays with it when a group is added above', async ({ page }) => {
    const [mine, above] = [uniqueName('zz-keep'), uniqueName('aa-keep')];
    await page.goto('/admin/groups');
    await hydrated(page);
    await newGroup(page, mine);
    await policyOf(page, mine).getByLabel('Allowed GPU models').fill('A100');
    await newGroup(page, above);
    await expect(policyOf(page, mine).getByLabel('Allowed GPU models')).toHaveValue('A100');
    // Nowhere else: not in the form that took its place on the page.
    const typedIn = await page.locator('[data-testid="group-policy"]').evaluateAll((forms) =>
      forms.filter((f) => (f.querySelector('input[name="allowed_models"]') as HTMLInputElement).value === 'A100').map((f) => f.getAttribute('data-name')));
    expect(typedIn).toEqual([mine]);
  });

  test('groups: saving group B keeps what was typed into group A', async ({ page }) => {
    const [a, b] = [uniqueName('keep-a'), uniqueName('keep-b')];
    await page.goto('/admin/groups');
    await hydrated(page);
    await newGroup(page, a);
    await newGroup(page, b);

    await policyOf(page, a).getByLabel('Allowed GPU models').fill('A100');
    const bRev = await revOf(page, b).inputValue();
    await policyOf(page, b).getByLabel('GPU quota').fill('7');
    await policyOf(page, b).getByRole('button', { name: 'Save' }).click();
    await expect(page.getByTestId('group-saved')).toContainText(b);
    // B's form is rebuilt from the refetched list (its data changed)...
    await expect(revOf(page, b)).not.toHaveValue(bRev);
    await expect(policyOf(page, b).getByLabel('GPU quota')).toHaveValue('7');
    // ...and A's keeps the unsaved text.
    await expect(policyOf(page, a).getByLabel('Allowed GPU models')).toHaveValue('A100');
  });

  test('groups: a refused save shows the error and keeps what was typed', async ({ page }) => {
    const [a, b] = [uniqueName('keep-a'), uniqueName('keep-b')];
    await page.goto('/admin/groups');
    await hydrated(page);
    await newGroup(page, a);
    await newGroup(page, b);
    const bRev = await revOf(page, b).inputValue();

    // Another admin saves group B; this page learns of it at its next refetch.
    const other = await page.context().newPage();
    await other.goto('/admin/groups');
    await hydrated(other);
    await policyOf(other, b).getByLabel('GPU quota').fill('5');
    await policyOf(other, b).getByRole('button', { name: 'Save' }).click();
    await expect(other.getByTestId('group-saved')).toContainText(b);
    await other.close();

    const form = policyOf(page, a);
    await form.getByLabel('Allowed GPU models').fill('H100');
    // Past the browser's own range check, so the server refuses it.
    await form.evaluate((f) => { (f as HTMLFormElement).noValidate = true; });
    await form.getByLabel('Max GPUs per machine').fill('999');
    await form.getByRole('button', { name: 'Save' }).click();
    await expect(page.getByTestId('form-error')).toContainText('GPUs per machine');
    // The refetch after the refusal brought B's new revision...
    await expect(revOf(page, b)).not.toHaveValue(bRev);
    // ...and left A's form as typed.
    await expect(form.getByLabel('Allowed GPU models')).toHaveValue('H100');
    await expect(form.getByLabel('Max GPUs per machine')).toHaveValue('999');
    await expect(page.getByTestId('form-error')).toContainText('GPUs per machine');
  });

  test("dataset quotas: a typed quota stays in its group's row when a group is added above", async ({ page }) => {
    const [mine, saved, above] = [uniqueName('zz-keep'), uniqueName('zz-keep'), uniqueName('aa-keep')];
    await groupsElsewhere(page, [mine, saved]);
    await page.goto('/admin/groups');
    await hydrated(page);
    await groupsElsewhere(page, [above]);

    const row = (g: string) => page.locator(`[data-testid="dataset-storage-row"][data-name="${g}"]`);
    await row(mine).getByLabel(`dataset quota of ${mine} in GB`).fill('7');
    await row(saved).getByLabel(`dataset quota of ${saved} in GB`).fill('3');
    await row(saved).getByRole('button', { name: 'Save' }).click();
    await expect(page.getByTestId('dataset-quota-saved')).toContainText(saved);
    await expect(row(above)).toBeVisible();
    await expect(row(mine).getByLabel(`dataset quota of ${mine} in GB`)).toHaveValue('7');
  });

  test("reclaim: a ticked exempt box stays with its group when a group is added above", async ({ page }) => {
    const [mine, saved, above] = [uniqueName('zz-keep'), uniqueName('zz-keep'), uniqueName('aa-keep')];
    await groupsElsewhere(page, [mine, saved]);
    await page.goto('/admin/reclaim');
    await hydrated(page);
    await groupsElsewhere(page, [above]);

    const row = (g: string) => page.locator(`[data-testid="reclaim-groups"] tr[data-name="${g}"]`);
    await row(mine).getByRole('checkbox').check();
    await row(saved).getByRole('button', { name: 'Save' }).click();
    await expect(row(above)).toBeVisible();
    await expect(row(mine).getByRole('checkbox')).toBeChecked();
    await expect(row(above).getByRole('checkbox')).not.toBeChecked();
  });

  test('new dataset: a refused create (the code exists) keeps the other fields', async ({ page }) => {
    const [taken, seen] = [uniqueName('keep-ds'), uniqueName('keep-ds')];
    await page.goto('/datasets');
    await hydrated(page);

    // Made after this page loaded: it learns of them at its next refetch.
    const other = await page.context().newPage();
    for (const code of [taken, seen]) {
      await other.goto('/datasets');
      await hydrated(other);
      const form = other.getByTestId('create-dataset');
      await form.getByLabel('Code').fill(code);
      await form.getByLabel('Name').fill(`Dataset ${code}`);
      await form.getByRole('button', { name: 'Create dataset' }).click();
      await expect(other).toHaveURL(new RegExp(`/datasets/${code}$`));
    }
    await other.close();

    const form = page.getByTestId('create-dataset');
    await form.getByLabel('Code').fill(taken);
    await form.getByLabel('Name').fill('second try');
    await form.getByLabel('Category').selectOption('audio');
    await form.getByLabel('Description').fill('typed before the refusal');
    await form.getByLabel('Visibility').selectOption('public');
    await form.getByRole('button', { name: 'Create dataset' }).click();
    await expect(form.getByTestId('form-error')).toContainText('already exists');
    await expect(page.locator(`[data-testid="dataset-row"][data-code="${seen}"]`)).toBeVisible();
    await expect(form.getByLabel('Code')).toHaveValue(taken);
    await expect(form.getByLabel('Name')).toHaveValue('second try');
    await expect(form.getByLabel('Category')).toHaveValue('audio');
    await expect(form.getByLabel('Description')).toHaveValue('typed before the refusal');
    await expect(form.getByLabel('Visibility')).toHaveValue('public');
  });

  test("users: a typed temporary password and a chosen role survive another user's change", async ({ page }) => {
    const prefix = uniqueName('keep-u');
    const [typed, other] = [`${prefix}-a`, `${prefix}-b`];
    await createUser(page, typed, 'keep-password-1');
    await createUser(page, other, 'keep-password-2');
    await page.goto(`/admin?user=${prefix}`);
    await hydrated(page);

    const mine = page.locator(`[data-testid="user-row"][data-name="${typed}"]`);
    const theirs = page.locator(`[data-testid="user-row"][data-name="${other}"]`);
    await mine.getByLabel(`Temporary password for ${typed}`).fill('typed-temp-pass-1');
    await mine.getByLabel(`Role of ${typed}`).selectOption('admin');
    await theirs.getByRole('button', { name: 'Disable' }).click();
    await expect(page.getByTestId('user-changed')).toContainText(`${other} is now disabled`);
    await expect(theirs.getByTestId('user-disabled')).toBeVisible();
    await expect(mine.getByLabel(`Temporary password for ${typed}`)).toHaveValue('typed-temp-pass-1');
    await expect(mine.getByLabel(`Role of ${typed}`)).toHaveValue('admin');
  });

  test('users: a typed temporary password stays with its user when a user is added above', async ({ page }) => {
    const prefix = uniqueName('keep-u');
    const [typed, above] = [`${prefix}-m`, `${prefix}-a`];
    await createUser(page, typed, 'keep-password-1');
    await page.goto(`/admin?user=${prefix}`);
    await hydrated(page);

    const mine = page.locator(`[data-testid="user-row"][data-name="${typed}"]`);
    await mine.getByLabel(`Temporary password for ${typed}`).fill('typed-temp-pass-1');
    const form = page.getByTestId('create-user');
    await form.getByLabel('Username').fill(above);
    await form.getByLabel('Password').fill('keep-password-2');
    await form.getByRole('button', { name: 'Create user' }).click();
    const added = page.locator(`[data-testid="user-row"][data-name="${above}"]`);
    await expect(added).toBeVisible();
    await expect(mine.getByLabel(`Temporary password for ${typed}`)).toHaveValue('typed-temp-pass-1');
    await expect(added.getByLabel(`Temporary password for ${above}`)).toHaveValue('');
  });

  test('users: a post whose answer is lost keeps the page and what was typed, and says so; the next one works', async ({ page }) => {
    const prefix = uniqueName('keep-u');
    const [typed, lost, next] = [`${prefix}-m`, `${prefix}-f`, `${prefix}-n`];
    await createUser(page, typed, 'keep-password-1');
    await page.goto(`/admin?user=${prefix}`);
    await hydrated(page);
    const mine = page.locator(`[data-testid="user-row"][data-name="${typed}"]`);
    await mine.getByLabel(`Temporary password for ${typed}`).fill('typed-temp-pass-1');

    // The create cannot reach the server.
    await page.route('**/api/admin/create_user', (route) => route.abort());
    const form = page.getByTestId('create-user');
    await form.getByLabel('Username').fill(lost);
    await form.getByLabel('Password').fill('keep-password-2');
    await form.getByRole('button', { name: 'Create user' }).click();
    await expect(page.getByTestId('live-notice')).toContainText('Could not reach the server');
    await expect(form.getByLabel('Username')).toHaveValue(lost);
    await expect(mine.getByLabel(`Temporary password for ${typed}`)).toHaveValue('typed-temp-pass-1');

    await page.unroute('**/api/admin/create_user');
    await form.getByLabel('Username').fill(next);
    await form.getByLabel('Password').fill('keep-password-3');
    await form.getByRole('button', { name: 'Create user' }).click();
    await expect(page.locator(`[data-testid="user-row"][data-name="${next}"]`)).toBeVisible();
    await expect(page.locator(`[data-testid="user-row"][data-name="${lost}"]`)).toHaveCount(0);
    await expect(page.getByTestId('live-notice')).toHaveCount(0);
    await expect(mine.getByLabel(`Temporary password for ${typed}`)).toHaveValue('typed-temp-pass-1');
  });
});
