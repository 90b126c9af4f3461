import { test, expect, type Page } from '@playwright/test';
import { ADMIN_PASSWORD, hydrated, signInOk, uniqueName } from './helpers';

// Pages are rendered on the server only; the one part that runs as wasm is
// the dataset upload area (a Leptos island). A page without the island
// must load no wasm at all, and the island must hydrate and upload: a
// file sent with JavaScript reaches 100 % in the island's own progress row
// (which the server-rendered form has not) and is listed.

/** Every .wasm the page requests from now on. */
function wasmRequests(page: Page): string[] {
  const seen: string[] = [];
  page.on('request', (r) => {
    if (new URL(r.url()).pathname.endsWith('.wasm')) seen.push(r.url());
  });
  return seen;
}

test('pages without the island load no wasm', async ({ page }) => {
  const wasm = wasmRequests(page);
  await signInOk(page, 'admin', ADMIN_PASSWORD);
  for (const path of ['/', '/machines', '/compute', '/tasks', '/datasets', '/tokens', '/admin', '/admin/nodes']) {
    await page.goto(path);
    await hydrated(page);
  }
  expect(wasm).toEqual([]);
});

test('the upload island hydrates and uploads a file', async ({ page }) => {
  test.setTimeout(60_000);
  const code = uniqueName('isl');
  await signInOk(page, 'admin', ADMIN_PASSWORD);
  await page.goto('/datasets');
  await hydrated(page);
  const form = page.getByTestId('create-dataset');
  await form.getByLabel('Code').fill(code);
  await form.getByLabel('Name').fill(`Island ${code}`);
  await form.getByLabel('Category').selectOption('images');
  await form.getByRole('button', { name: 'Create dataset' }).click();
  await expect(page).toHaveURL(new RegExp(`/datasets/${code}$`));
  await hydrated(page);
  await page.getByTestId('create-version').getByLabel('New version').fill('v1');
  await page.getByRole('button', { name: 'Create version' }).click();
  await expect(page).toHaveURL(new RegExp(`/datasets/${code}/v1$`));

  const wasm = wasmRequests(page);
  await page.reload();
  await hydrated(page);
  const body = Buffer.from('island upload\n'.repeat(1000));
  await page.getByTestId('file-input').setInputFiles([{ name: 'isl.txt', mimeType: 'text/plain', buffer: body }]);
  await page.getByTestId('upload-submit').click();
  // Only the hydrated island draws a progress row for a file.
  const item = page.locator('[data-testid="upload-item"][data-name="isl.txt"]');
  await expect(item).toHaveAttribute('data-state', 'done');
  await expect(item.getByTestId('upload-progress')).toHaveJSProperty('value', body.length);
  await expect(page.locator('[data-testid="file-row"][data-name="isl.txt"]')).toBeVisible();
  expect(wasm.length).toBeGreaterThan(0);
});
