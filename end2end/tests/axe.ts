import { expect, type Browser, type BrowserContext, type Page } from '@playwright/test';
import AxeBuilder from '@axe-core/playwright';
import type { Result } from 'axe-core';
import { hydrated } from './helpers';

// axe-core in Chromium: WCAG 2.1 A and AA, and a page passes when axe finds
// no serious or critical violation. Pages are checked with JavaScript on
// (after live.js has taken the page over) and off (the server's HTML as a
// browser without JavaScript shows it).

export const WCAG_TAGS = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'];

export type Scheme = 'light' | 'dark';

/** What a failed check prints: each violation's rule, impact and help,
 * then each element it found (its selector and why), so the report says
 * what to fix without opening a trace. */
export function report(where: string, violations: Result[]): string {
  return violations
    .map((v) => {
      const nodes = v.nodes.map((n) => `    ${n.target.join(' ')}\n      ${(n.failureSummary ?? '').replace(/\n\s*/g, ' ')}`);
      return `${where}: ${v.id} [${v.impact}] ${v.help} (${v.helpUrl})\n${nodes.join('\n')}`;
    })
    .join('\n');
}

const blocking = (v: Result) => v.impact === 'serious' || v.impact === 'critical';

async function analyze(page: Page): Promise<Result[]> {
  const results = await new AxeBuilder({ page }).withTags(WCAG_TAGS).analyze();
  return results.violations.filter(blocking);
}

/** A browser with JavaScript on or off, in one colour scheme, and a check
 * of the page at a path that returns the readable violations ('' when none).
 *
 * axe is JavaScript run in the page, and a page whose context has
 * JavaScript disabled never runs it (the evaluation waits for ever). So
 * without JavaScript the page is loaded in a `javaScriptEnabled: false`
 * context, and the DOM that context built is handed, at the same address,
 * to a second page (same cookies and colour scheme) that runs nothing of
 * the page's own: its scripts are removed and script requests refused, so
 * axe sees what a browser without JavaScript shows. */
export class Checker {
  private constructor(
    readonly context: BrowserContext,
    readonly page: Page,
    private readonly js: boolean,
    private readonly scheme: Scheme,
    private readonly browser: Browser,
  ) {}

  static async open(browser: Browser, js: boolean, scheme: Scheme) {
    const context = await browser.newContext({ javaScriptEnabled: js, colorScheme: scheme });
    return new Checker(context, await context.newPage(), js, scheme, browser);
  }

  get label() {
    return `JavaScript ${this.js ? 'on' : 'off'}, ${this.scheme}`;
  }

  /** Checks the page this checker's page shows now. */
  async checkCurrent(): Promise<string> {
    const where = `${new URL(this.page.url()).pathname} (${this.label})`;
    if (this.js) {
      await hydrated(this.page);
      return report(where, await analyze(this.page));
    }
    const html = (await this.page.content()).replace(/<script\b[^>]*>[\s\S]*?<\/script>/gi, '');
    const viewer = await this.browser.newContext({
      storageState: await this.context.storageState(),
      colorScheme: this.scheme,
    });
    try {
      const page = await viewer.newPage();
      await page.route('**/*', (route) => {
        const request = route.request();
        if (request.isNavigationRequest()) return route.fulfill({ status: 200, contentType: 'text/html', body: html });
        if (request.resourceType() === 'script') return route.abort();
        return route.continue();
      });
      await page.goto(this.page.url());
      // Without JavaScript live.js never marks the page; it must not here either.
      await expect(page.locator('body')).not.toHaveAttribute('data-hydrated', 'true');
      return report(where, await analyze(page));
    } finally {
      await viewer.close();
    }
  }

  /** Loads `path` and checks it. */
  async check(path: string): Promise<string> {
    const response = await this.page.goto(path);
    expect(response, path).not.toBeNull();
    return this.checkCurrent();
  }

  async close() {
    await this.context.close();
  }
}
