/**
 * Support for the console tests: a real server whose integrations directory holds the shipped
 * examples (hello-components, webhook) and the console's own fixture (every ContentKit element and
 * configuration type), a login through the real endpoint, and Debian's Chromium via playwright-core.
 */
import { cpSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { chromium, type Browser, type BrowserContext, type Locator, type Page } from 'playwright-core';
import { ROOT, startTestServer, tmpDir, type TestServer } from './helpers/index.ts';

export const CHROMIUM = '/usr/bin/chromium';
export const ARTIFACTS = join(ROOT, 'test-artifacts');

/** A temporary integrations directory holding the examples the console tests use. */
export function consoleIntegrations(t: TestContext): string {
  const dir = join(tmpDir(t, 'switchyard-console-'), 'integrations');
  mkdirSync(dir);
  // Copies, not links: a linked folder's relative imports are refused by the bundler's confinement.
  cpSync(join(ROOT, 'integrations/hello-components'), join(dir, 'hello-components'), { recursive: true });
  cpSync(join(ROOT, 'integrations/webhook'), join(dir, 'webhook'), { recursive: true });
  cpSync(join(ROOT, 'test/fixtures/console/console-kitchen'), join(dir, 'console-kitchen'), { recursive: true });
  return dir;
}

/**
 * A server for the console tests. Its shutdown wait is short: a browser that is still open keeps
 * connections alive, and the test's end need not wait for them.
 */
export function consoleServer(t: TestContext, opts: { integrationsDir?: string; retryDelayMs?: number } = {}): Promise<TestServer> {
  return startTestServer(t, {
    integrations_dir: opts.integrationsDir ?? consoleIntegrations(t),
    server: { shutdown_timeout: 300 },
    ...(opts.retryDelayMs ? { webhooks: { base_delay: opts.retryDelayMs } } : {}),
  });
}

/** Log in through POST /console/login; the session cookie (name=value) and its CSRF value. */
export async function login(server: TestServer): Promise<{ cookie: string; csrf: string; setCookie: string }> {
  const res = await fetch(`${server.consoleUrl}/console/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-switchyard-console': 'login' },
    body: JSON.stringify({ token: server.token }),
  });
  if (res.status !== 200) throw new Error(`login failed: ${res.status} ${await res.text()}`);
  const setCookie = res.headers.get('set-cookie') ?? '';
  const body = (await res.json()) as { csrf: string };
  return { cookie: setCookie.split(';')[0], csrf: body.csrf, setCookie };
}

/** A local webhook receiver on 127.0.0.1 answering 200 {"received": true} (500 to the first `failures` requests). */
export async function receiver(t: TestContext, failures = 0): Promise<{ url: string; bodies: string[] }> {
  const bodies: string[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      bodies.push(body);
      if (bodies.length <= failures) res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"try again"}');
      else res.writeHead(200, { 'content-type': 'application/json' }).end('{"received":true}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, bodies };
}

export const hasChromium = () => existsSync(CHROMIUM);

/**
 * Debian's Chromium, headless: one browser for a test file (a launch costs about a second of CPU),
 * a fresh context for each test (its own cookies and storage, closed after it). Page errors and
 * failed console assertions are collected so a test can insist there were none.
 */
let shared: Promise<Browser> | undefined;
// Registered on the file's root: the browser closes once every test of the file has run. Playwright
// gave it a fresh profile and removes that itself once it has closed.
after(async () => {
  if (shared) await (await shared.catch(() => undefined))?.close();
});
const launch = () =>
  chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
/** How long a test waits for a component's first render (its isolate loads first), past the usual 5 s. */
export const FIRST_RENDER_MS = 15_000;

export async function openBrowser(t: TestContext): Promise<{ context: BrowserContext; page: Page; pageErrors: string[] }> {
  let browser = await (shared ??= launch());
  // A browser an earlier test took down is launched again.
  if (!browser.isConnected()) browser = await (shared = launch());
  const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  t.after(() => context.close());
  context.setDefaultTimeout(5000);
  const page = context.pages()[0] ?? (await context.newPage());
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  return { context, page, pageErrors };
}

/**
 * What a screenshot shows that can be checked without looking at it: the page is no wider than its
 * viewport, and `key` is rendered, within the viewport's width and not cut off at the side by a box
 * around it (a table column scrolled off to the right of its scrolling box).
 */
export async function assertInSight(key: Locator, what: string): Promise<void> {
  await key.waitFor();
  const r = await key.evaluate((el) => {
    const g = globalThis as any;
    const box = el.getBoundingClientRect();
    let clippedBy = '';
    for (let a = el.parentElement; a && a !== g.document.body && !clippedBy; a = a.parentElement) {
      if (g.getComputedStyle(a).overflowX === 'visible') continue;
      const around = a.getBoundingClientRect();
      if (box.left < around.left - 1 || box.right > around.right + 1) clippedBy = `${a.tagName.toLowerCase()}.${a.className}`;
    }
    return { page: g.document.documentElement.scrollWidth as number, viewport: g.innerWidth as number, left: box.left, right: box.right, clippedBy };
  });
  assert.ok(r.page <= r.viewport, `${what}: the page is ${r.page} px wide in a ${r.viewport} px viewport`);
  assert.ok(r.left >= 0 && r.right <= r.viewport + 1, `${what}: at ${Math.round(r.left)}-${Math.round(r.right)} px, outside the ${r.viewport} px viewport`);
  assert.equal(r.clippedBy, '', `${what}: cut off at the side by ${r.clippedBy}`);
}

/**
 * assertInSight for everything on the page at once: every piece of text, link, control, badge and
 * picture that is rendered is within the viewport's width and not cut off at the side by a box
 * around it. What is meant to be unseen is left out: the visually hidden (`.sr-only`, the
 * announcer, a table header hidden where a table is cards), the skip link until it has focus, and
 * what a closed `<details>` holds. Vertical scrolling boxes (a long response excerpt) are fine. Nor
 * may anything be wider than its table cell (a card's item): it would be drawn over its neighbour.
 */
export async function assertNothingCutOff(page: Page, what: string): Promise<void> {
  const r = await page.evaluate(() => {
    const g = globalThis as any;
    const viewport = g.innerWidth as number;
    const cut: string[] = [];
    const name = (el: any) =>
      `${el.tagName.toLowerCase()}${el.className && typeof el.className === 'string' ? `.${el.className.trim().split(/\s+/).join('.')}` : ''}`;
    for (const el of g.document.body.querySelectorAll('*')) {
      const own = [...el.childNodes].some((n: any) => n.nodeType === 3 && n.textContent.trim());
      if (!own && !el.matches('a, button, input, select, textarea, img, svg, .badge')) continue;
      if (el.closest('.sr-only, .announcer, .skip:not(:focus), details:not([open]) > :not(summary)')) continue;
      const box = el.getBoundingClientRect();
      if (box.width === 0 || box.height === 0 || g.getComputedStyle(el).visibility === 'hidden') continue;
      let why = '';
      let hidden = false;
      if (box.left < -1 || box.right > viewport + 1) why = `at ${Math.round(box.left)}-${Math.round(box.right)} px, outside the ${viewport} px viewport`;
      for (let a = el.parentElement; a && a !== g.document.body; a = a.parentElement) {
        const outside = box.left < a.getBoundingClientRect().left - 1 || box.right > a.getBoundingClientRect().right + 1;
        // Wider than its table cell (or a cell shown as a card's item): it runs over what is beside it.
        if (g.getComputedStyle(a).overflowX === 'visible') {
          if (!why && a.matches('td, th') && outside) why = `wider than its cell ${name(a)}, over what is beside it`;
          continue;
        }
        const around = a.getBoundingClientRect();
        if (around.width <= 1 || around.height <= 1)
          hidden = true; // visually hidden, on purpose
        else if (!why && outside) why = `cut off at the side by ${name(a)}`;
      }
      if (why && !hidden)
        cut.push(
          `${name(el)} "${String(el.innerText ?? el.textContent ?? '')
            .trim()
            .slice(0, 40)
            .replace(/\s+/g, ' ')}" ${why}`,
        );
    }
    return { page: g.document.documentElement.scrollWidth as number, viewport, cut };
  });
  assert.ok(r.page <= r.viewport, `${what}: the page is ${r.page} px wide in a ${r.viewport} px viewport`);
  assert.deepEqual(r.cut, [], `${what}: out of sight:\n  ${r.cut.join('\n  ')}`);
}

/** A full-page screenshot in test-artifacts/, after the checks of assertInSight on `key`, what the picture is about. */
export async function shot(page: Page, name: string, key: Locator | string): Promise<void> {
  await assertInSight(typeof key === 'string' ? page.locator(key).first() : key, name);
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, `console-${name}.png`), fullPage: true });
}

/** Log in through the login page, as a person would. */
export async function loginInBrowser(page: Page, server: TestServer): Promise<void> {
  await page.goto(`${server.consoleUrl}/console/`);
  await page.getByLabel('Admin token').fill(server.token);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('heading', { name: 'Integrations', level: 1 }).waitFor();
}

/** An SVG whose script, if it ever runs, marks the document and says so on the console. */
export const SCRIPTED_SVG =
  '<?xml version="1.0" encoding="UTF-8"?>\n' +
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16" width="64" height="64">' +
  '<rect width="16" height="16" fill="#3a7"/>' +
  '<script>document.documentElement.setAttribute("data-ran", "yes"); console.log("the svg script ran");</script>' +
  '</svg>\n';

/**
 * The console's integrations and one more whose icon is SCRIPTED_SVG, named as GitBook's validator
 * would not have it (`Svg_Icons.v2`: served here, with a warning).
 */
export function svgIconIntegrations(t: TestContext): string {
  const dir = consoleIntegrations(t);
  const folder = join(dir, 'svg-icons');
  mkdirSync(join(folder, 'assets'), { recursive: true });
  writeFileSync(
    join(folder, 'platform-manifest.yaml'),
    [
      'name: Svg_Icons.v2',
      'title: SVG icons',
      'description: An integration with an SVG icon.',
      'organization: switchyard-tests',
      'visibility: private',
      'scopes: []',
      'icon: assets/icon.svg',
      'script: ./index.ts',
      '',
    ].join('\n'),
  );
  writeFileSync(join(folder, 'assets/icon.svg'), SCRIPTED_SVG);
  writeFileSync(
    join(folder, 'index.ts'),
    "import { createIntegration } from '@switchyard/runtime';\nexport default createIntegration({ fetch: async () => new Response('svg icons here') });\n",
  );
  return dir;
}
