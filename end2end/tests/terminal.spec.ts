import { test, expect, type Page } from '@playwright/test';
import { ADMIN_PASSWORD, hydrated, navLink, signInOk, uniqueName } from './helpers';

// Inside a dev machine from the browser, on the server's real executor
// (Docker when `make test` started dockerd): a file uploaded through the
// machine page's form is seen from the terminal; a restart closes the
// terminal with its reason and it reconnects by itself; deleting the
// machine closes it for good; the admin sees the sessions.

async function signOut(page: Page) {
  await page.getByRole('button', { name: 'Sign out' }).click();
  await expect(page).toHaveURL(/\/login/);
}

test('a user works in a machine through the terminal, moves a file in, and the terminal follows a restart', async ({ page }) => {
  test.setTimeout(180_000);
  const group = uniqueName('term');
  const user = uniqueName('shell');
  const name = uniqueName('tty');

  // The admin makes a group with one GPU and a user in it.
  await signInOk(page, 'admin', ADMIN_PASSWORD);
  await page.goto('/admin/groups');
  await hydrated(page);
  const newGroup = page.locator('form', { has: page.getByRole('button', { name: 'Create group' }) });
  await newGroup.getByLabel('Name').fill(group);
  await newGroup.getByLabel('GPU quota').fill('1');
  await newGroup.getByRole('button', { name: 'Create group' }).click();
  await expect(page.locator(`[data-testid="group-row"][data-name="${group}"]`)).toBeVisible();
  await page.goto('/admin');
  await hydrated(page);
  const form = page.getByTestId('create-user');
  await form.getByLabel('Username').fill(user);
  await form.getByLabel('Password').fill('shell-password-1');
  await expect(form.getByLabel('Group').locator(`option[value="${group}"]`)).toHaveCount(1);
  await form.getByLabel('Group').selectOption(group);
  await form.getByRole('button', { name: 'Create user' }).click();
  await expect(page.getByTestId('users')).toContainText(user);
  await signOut(page);

  // The user creates a machine and opens its page.
  await signInOk(page, user, 'shell-password-1');
  await navLink(page, 'Machines').click();
  await expect(page).toHaveURL(/\/machines$/);
  await hydrated(page);
  const create = page.getByTestId('create-machine');
  await create.getByLabel('Name').fill(name);
  await create.getByLabel('GPU count').fill('1');
  await create.getByRole('button', { name: 'Create machine' }).click();
  await expect(page.getByTestId('create-ok')).toContainText(name);
  const row = page.locator(`[data-testid="machine-row"][data-name="${name}"]`);
  await expect(row).toHaveAttribute('data-state', 'running', { timeout: 60_000 });
  await row.getByRole('link', { name }).click();
  await expect(page).toHaveURL(/\/machines\/\d+$/);
  await hydrated(page);

  // A file goes into the volume through the page's upload form.
  const upload = page.getByTestId('upload-form');
  await upload.getByLabel('Folder in /data').fill('e2e');
  await upload.getByLabel('File').setInputFiles({ name: 'hello-e2e.txt', mimeType: 'text/plain', buffer: Buffer.from('hello from the browser\n') });
  await upload.getByRole('button', { name: 'Upload' }).click();
  await expect(page.getByTestId('upload-ok')).toContainText('/data/e2e/hello-e2e.txt');
  await hydrated(page);

  // The terminal: a real shell in /data that sees the file.
  const terminal = page.getByTestId('terminal');
  await page.getByTestId('terminal-open').click();
  await expect(terminal).toHaveAttribute('data-state', 'open');
  const screen = page.getByTestId('terminal-screen');
  await expect(screen.locator('.xterm-rows')).toContainText('/data #');
  await screen.click();
  await page.keyboard.type('ls /data/e2e && cat /data/e2e/hello-e2e.txt\n');
  await expect(screen.locator('.xterm-rows')).toContainText('hello from the browser');
  await expect(screen.locator('.xterm-rows')).toContainText('hello-e2e.txt');

  // A restart closes the terminal with the reason; it reconnects once the
  // machine runs again, and the new shell works.
  await page.getByTestId('restart-machine').getByRole('button', { name: 'Restart' }).click();
  await expect(page.getByTestId('operation-ok')).toContainText('queued');
  await expect(page.getByTestId('terminal-status')).toContainText('restarting', { timeout: 60_000 });
  await expect(terminal).toHaveAttribute('data-close-code', '4001');
  await expect(terminal).toHaveAttribute('data-state', 'open', { timeout: 60_000 });
  await screen.click();
  await page.keyboard.type('echo back-$((2+3))\n');
  await expect(screen.locator('.xterm-rows')).toContainText('back-5');

  // Deleting the machine closes the terminal for good, saying why.
  page.once('dialog', (d) => d.accept());
  await page.getByTestId('delete-machine').getByRole('button', { name: 'Delete machine' }).click();
  await expect(terminal).toHaveAttribute('data-state', 'closed', { timeout: 60_000 });
  await expect(page.getByTestId('terminal-status')).toContainText('was deleted');
  await signOut(page);

  // The admin sees the user's sessions, closed, with why.
  await signInOk(page, 'admin', ADMIN_PASSWORD);
  await page.goto('/admin/terminals');
  await hydrated(page);
  const closed = page.getByTestId('closed-terminals');
  await expect(closed).toContainText(user);
  await expect(closed).toContainText('restarting');
  await expect(closed).toContainText('was deleted');
});
