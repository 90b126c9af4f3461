import { test, expect, type Page } from '@playwright/test';
import { createHash } from 'node:crypto';
import { ADMIN_PASSWORD, hydrated, signIn, signInOk, uniqueName } from './helpers';

// Datasets end to end: a dataset and a version made through the pages, two
// files uploaded at once with their bars reaching 100 % and then listed
// with their SHA-256, one upload cancelled mid-way and never listed, and the
// same pages without JavaScript: the plain form uploads a small file. A
// connection cut mid-file resumes from the server's offset; another file of
// the same name and size starts over rather than continuing the first's
// bytes; a Cancel that comes after the server listed the file says so; an
// upload after the session ended goes to the sign-in page; an abandoned
// upload is listed on the version page and cancelled there.

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

function bytes(n: number, seed: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed * 7 + (i >> 9)) & 0xff;
  return b;
}

/** Makes dataset `code` with version v1 through the forms; ends on the version page. */
async function datasetWithVersion(page: Page, code: string, js: boolean) {
  await page.goto('/datasets');
  if (js) await hydrated(page);
  const form = page.getByTestId('create-dataset');
  await form.getByLabel('Code').fill(code);
  await form.getByLabel('Name').fill(`Dataset ${code}`);
  await form.getByLabel('Category').selectOption('images');
  // With JavaScript or without, a new dataset's page follows its create.
  await form.getByRole('button', { name: 'Create dataset' }).click();
  await expect(page).toHaveURL(new RegExp(`/datasets/${code}$`));
  if (js) await hydrated(page);
  await page.getByTestId('create-version').getByLabel('New version').fill('v1');
  await page.getByRole('button', { name: 'Create version' }).click();
  await expect(page).toHaveURL(new RegExp(`/datasets/${code}/v1$`));
  if (js) await hydrated(page);
}

test('two files upload with bars reaching 100 % and are listed with their SHA-256; a cancelled one is not', async ({ page }) => {
  test.setTimeout(120_000);
  const code = uniqueName('ds');
  await signInOk(page, 'admin', ADMIN_PASSWORD);
  await datasetWithVersion(page, code, true);

  const one = bytes(3 * 1024 * 1024 + 11, 1);
  const two = bytes(700_000, 2);
  await page.getByTestId('file-input').setInputFiles([
    { name: 'one.bin', mimeType: 'application/octet-stream', buffer: one },
    { name: 'two.bin', mimeType: 'application/octet-stream', buffer: two },
  ]);
  await page.getByTestId('upload-submit').click();
  for (const [name, data] of [['one.bin', one], ['two.bin', two]] as const) {
    const item = page.locator(`[data-testid="upload-item"][data-name="${name}"]`);
    await expect(item).toHaveAttribute('data-state', 'done');
    const bar = item.getByTestId('upload-progress');
    await expect(bar).toHaveJSProperty('value', data.length);
    await expect(bar).toHaveJSProperty('max', data.length);
    await expect(item.getByTestId('upload-figures')).toContainText('(100 %)');
    const row = page.locator(`[data-testid="file-row"][data-name="${name}"]`);
    await expect(row.getByTestId('file-sha256')).toHaveText(sha256(data));
  }

  // A slow link (Chromium's network emulation), a big file, cancelled mid-way.
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: 256 * 1024 });
  await page.getByTestId('file-input').setInputFiles([{ name: 'slow.bin', mimeType: 'application/octet-stream', buffer: bytes(24 * 1024 * 1024, 3) }]);
  await page.getByTestId('upload-submit').click();
  const slow = page.locator('[data-testid="upload-item"][data-name="slow.bin"]');
  await expect(slow).toHaveAttribute('data-state', 'sending');
  await expect.poll(async () => Number(await slow.getByTestId('upload-progress').evaluate((e) => (e as HTMLProgressElement).value))).toBeGreaterThan(0);
  await expect(slow.getByTestId('upload-figures')).toContainText('left');
  await slow.getByTestId('upload-cancel').click();
  await expect(slow).toHaveAttribute('data-state', 'cancelled');
  await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });

  await page.reload();
  await hydrated(page);
  await expect(page.locator('[data-testid="file-row"][data-name="one.bin"]')).toHaveCount(1);
  await expect(page.locator('[data-testid="file-row"][data-name="slow.bin"]')).toHaveCount(0);
  await expect(page.getByTestId('files').locator('[data-testid="file-row"]')).toHaveCount(2);
});

test('a dropped connection resumes from the offset the server holds, not from the start', async ({ page }) => {
  test.setTimeout(120_000);
  const code = uniqueName('dsr');
  await signInOk(page, 'admin', ADMIN_PASSWORD);
  await datasetWithVersion(page, code, true);
  // Two pieces (the page sends at most 32 MiB per request); the second is
  // cut once, as a dropped connection would.
  const piece = 32 * 1024 * 1024;
  const data = bytes(piece + 5 * 1024 * 1024 + 3, 4);
  const patches: string[] = [];
  let heads = 0;
  let cut = false;
  await page.route('**/uploads/**', async (route) => {
    const req = route.request();
    if (req.method() === 'HEAD') heads += 1;
    if (req.method() === 'PATCH') {
      const offset = req.headers()['upload-offset'];
      patches.push(offset);
      if (offset !== '0' && !cut) {
        cut = true;
        return route.abort('connectionreset');
      }
    }
    return route.continue();
  });
  await page.getByTestId('file-input').setInputFiles([{ name: 'big.bin', mimeType: 'application/octet-stream', buffer: data }]);
  await page.getByTestId('upload-submit').click();
  const item = page.locator('[data-testid="upload-item"][data-name="big.bin"]');
  await expect(item).toHaveAttribute('data-state', 'done', { timeout: 60_000 });
  expect(patches).toEqual(['0', String(piece), String(piece)]);
  expect(heads).toBe(1);
  const row = page.locator('[data-testid="file-row"][data-name="big.bin"]');
  await expect(row.getByTestId('file-sha256')).toHaveText(sha256(data));
});

test('an upload whose session has ended goes to the sign-in page, which comes back here', async ({ page }) => {
  const code = uniqueName('dsx');
  await signInOk(page, 'admin', ADMIN_PASSWORD);
  await datasetWithVersion(page, code, true);
  await page.context().clearCookies();
  await page.getByTestId('file-input').setInputFiles([{ name: 'late.bin', mimeType: 'application/octet-stream', buffer: bytes(1000, 5) }]);
  await page.getByTestId('upload-submit').click();
  await expect(page).toHaveURL(new RegExp(`/login\\?next=/datasets/${code}/v1$`));
});

test('another file of the same name and size starts over instead of continuing the bytes held of the first', async ({ page }) => {
  test.setTimeout(120_000);
  const code = uniqueName('dsf');
  await signInOk(page, 'admin', ADMIN_PASSWORD);
  await datasetWithVersion(page, code, true);
  // The first 1 MiB of file A is held (its upload was cut and abandoned).
  const size = 2 * 1024 * 1024;
  const first = bytes(size, 7);
  const origin = new URL(page.url()).origin;
  const url = `/api/v1/datasets/${code}/versions/v1/uploads/same.bin`;
  const headers = { Origin: origin, 'X-Gantry-Fingerprint': '1-aaaaaaaaaaaaaaaa' };
  let res = await page.request.post(url, { headers: { ...headers, 'Upload-Length': String(size) } });
  expect(res.status()).toBe(201);
  res = await page.request.patch(url, { headers: { ...headers, 'Upload-Offset': '0' }, data: first.subarray(0, 1024 * 1024) });
  expect(res.status()).toBe(204);

  // The user chooses file B: the same name and size, other bytes.
  const second = bytes(size, 8);
  await page.getByTestId('file-input').setInputFiles([{ name: 'same.bin', mimeType: 'application/octet-stream', buffer: second }]);
  await page.getByTestId('upload-submit').click();
  const item = page.locator('[data-testid="upload-item"][data-name="same.bin"]');
  await expect(item).toHaveAttribute('data-state', 'done');
  const row = page.locator('[data-testid="file-row"][data-name="same.bin"]');
  await expect(row.getByTestId('file-sha256')).toHaveText(sha256(second));
});

test('a Cancel that reaches the server after it listed the file says so instead of "cancelled"', async ({ page }) => {
  const code = uniqueName('dsc');
  await signInOk(page, 'admin', ADMIN_PASSWORD);
  await datasetWithVersion(page, code, true);
  // The last piece reaches the server, which verifies and lists the file;
  // its answer is held back until Cancel has been pressed.
  let listed!: () => void;
  const placed = new Promise<void>((r) => (listed = r));
  let pressed!: () => void;
  const cancelPressed = new Promise<void>((r) => (pressed = r));
  await page.route('**/uploads/**', async (route) => {
    if (route.request().method() !== 'PATCH') return route.continue();
    const response = await route.fetch();
    listed();
    await cancelPressed;
    await route.fulfill({ response }).catch(() => {}); // the page aborted it
  });
  const data = bytes(300_000, 9);
  await page.getByTestId('file-input').setInputFiles([{ name: 'late.bin', mimeType: 'application/octet-stream', buffer: data }]);
  await page.getByTestId('upload-submit').click();
  const item = page.locator('[data-testid="upload-item"][data-name="late.bin"]');
  await placed;
  await item.getByTestId('upload-cancel').click();
  pressed();
  await expect(item).toHaveAttribute('data-state', 'finished-before-cancel');
  await expect(item).toContainText('finished before it could be cancelled');
  const row = page.locator('[data-testid="file-row"][data-name="late.bin"]');
  await expect(row.getByTestId('file-sha256')).toHaveText(sha256(data));
  await page.reload();
  await hydrated(page);
  await expect(page.locator('[data-testid="file-row"][data-name="late.bin"]')).toHaveCount(1);
});

test('an abandoned upload is listed on the version page and its Cancel lets the version be sealed', async ({ page }) => {
  const code = uniqueName('dsa');
  await signInOk(page, 'admin', ADMIN_PASSWORD);
  await datasetWithVersion(page, code, true);
  // Begun and 1,000 of 5,000 bytes sent, then the tab went away.
  const origin = new URL(page.url()).origin;
  const url = `/api/v1/datasets/${code}/versions/v1/uploads/gone.bin`;
  let res = await page.request.post(url, { headers: { Origin: origin, 'Upload-Length': '5000' } });
  expect(res.status()).toBe(201);
  res = await page.request.patch(url, { headers: { Origin: origin, 'Upload-Offset': '0' }, data: bytes(1000, 10) });
  expect(res.status()).toBe(204);

  await page.reload();
  await hydrated(page);
  const row = page.getByTestId('uploads-in-progress').locator('[data-testid="upload-in-progress"][data-name="gone.bin"]');
  await expect(row).toContainText('1000 B of 4.9 KiB');
  await expect(row).toContainText('admin');
  await row.getByRole('button', { name: 'Cancel the upload of gone.bin' }).click();
  await expect(page.getByTestId('uploads-in-progress')).toHaveCount(0);

  await page.goto(`/datasets/${code}`);
  await hydrated(page);
  await page.locator('[data-testid="version-row"][data-name="v1"]').getByRole('button', { name: 'Seal' }).click();
  await expect(page.locator('[data-testid="version-row"][data-name="v1"]')).toHaveAttribute('data-sealed', 'yes');
});

test.describe('without JavaScript', () => {
  test.use({ javaScriptEnabled: false });

  test('the plain form uploads a small file, listed with its SHA-256', async ({ page }) => {
    const code = uniqueName('nojs');
    await signIn(page, 'admin', ADMIN_PASSWORD, { js: false });
    await expect(page.getByTestId('whoami')).toContainText('admin');
    await datasetWithVersion(page, code, false);
    const data = Buffer.from('a small file, sent by a plain form\n');
    await page.getByTestId('file-input').setInputFiles([{ name: 'small.txt', mimeType: 'text/plain', buffer: data }]);
    await page.getByTestId('upload-submit').click();
    await expect(page.getByTestId('upload-done')).toContainText('small.txt');
    const row = page.locator('[data-testid="file-row"][data-name="small.txt"]');
    await expect(row.getByTestId('file-sha256')).toHaveText(sha256(data));
    // Listed in the search, found by its code.
    await page.goto(`/datasets?q=${code}`);
    await expect(page.locator(`[data-testid="dataset-row"][data-code="${code}"]`)).toHaveCount(1);
  });
});
