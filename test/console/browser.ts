import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { CONSOLE_DIR } from '../../api/console.ts';

/** CHROMIUM is Debian's chromium (`apt-get install chromium`; `make test` installs it when it can). */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/** ARTIFACTS holds the console tests' screenshots (ignored by git). */
export const ARTIFACTS = path.resolve(import.meta.dirname, '../artifacts');

/**
 * needBrowser is called in a suite's `before`: without chromium the suite is skipped with the reason, except in CI
 * (CI=true), where a missing browser fails it. It also builds the console when api/console/dist is missing.
 */
export function needBrowser(ctx: Mocha.Context): void {
  if (!existsSync(CHROMIUM)) {
    const why = `chromium not found at ${CHROMIUM}: install Debian's chromium (make test does as root with apt) to run the console tests`;
    if (process.env.CI) throw new Error(why);
    console.warn(`    skipped: ${why}`);
    ctx.skip();
  }
  if (!existsSync(path.join(CONSOLE_DIR, 'index.html'))) execFileSync('npm', ['run', '--silent', 'build:console'], { stdio: 'inherit' });
  mkdirSync(ARTIFACTS, { recursive: true });
}

/** Chromium is one headless browser with a fresh profile, removed on close. */
export class Chromium {
  browser!: Browser;
  private profile = '';

  async launch(): Promise<void> {
    this.profile = mkdtempSync(path.join(os.tmpdir(), 'svc-chromium-'));
    this.browser = await puppeteer.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', `--user-data-dir=${this.profile}`],
    });
  }

  /** page opens a new tab at 1280×900 that fails the test on a page error. */
  async page(errors: string[] = []): Promise<Page> {
    const page = await this.browser.newPage();
    await page.setViewport({ width: 1280, height: 900 });
    page.on('pageerror', (err) => errors.push(String(err)));
    return page;
  }

  async close(): Promise<void> {
    await this.browser?.close();
    if (this.profile) rmSync(this.profile, { recursive: true, force: true });
  }
}

/** shot saves a full-page screenshot as test/artifacts/console-<name>.png. */
export async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(ARTIFACTS, `console-${name}.png`) as `${string}.png`, fullPage: true });
}

/** texts are the text contents of every element matching a selector. */
export const texts = (page: Page, selector: string) => page.$$eval(selector, (els) => els.map((e) => e.textContent ?? ''));
