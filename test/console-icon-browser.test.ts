/**
 * An integration's SVG icon, opened on its own in a real browser (Debian's Chromium through
 * playwright-core), with the console session: a script inside it does not run. The same file
 * served without the console's headers does run its script, so the check can tell.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { consoleServer, hasChromium, loginInBrowser, openBrowser, SCRIPTED_SVG, svgIconIntegrations } from './console-support.ts';

const skip = hasChromium() || process.env.CI ? false : 'Debian chromium is not installed (apt-get install -y chromium)';

test('a script inside an SVG icon does not run when the icon is opened from the console', { skip }, async (t) => {
  const [server, { context, page }] = await Promise.all([consoleServer(t, { integrationsDir: svgIconIntegrations(t) }), openBrowser(t)]);
  await loginInBrowser(page, server);
  // The icon shows in the list, as an image.
  const icon = page.locator('tr[data-integration="Svg_Icons.v2"] img.icon');
  await icon.waitFor();
  assert.equal(
    await icon.evaluate(
      (img: any) => new Promise((r) => (img.complete ? r(img.naturalWidth > 0) : img.addEventListener('load', () => r(img.naturalWidth > 0)))),
    ),
    true,
  );

  const said: string[] = [];
  const opened = await context.newPage();
  opened.on('console', (m) => said.push(m.text()));
  const res = await opened.goto(`${server.consoleUrl}/console/integrations/Svg_Icons.v2/icon`);
  assert.equal(res?.status(), 200);
  assert.equal(res?.headers()['content-type'], 'image/svg+xml');
  await opened.locator('rect').waitFor({ state: 'attached' });
  assert.equal(await opened.locator('svg').getAttribute('data-ran'), null, 'the script did not run');
  assert.ok(!said.includes('the svg script ran'), said.join('\n'));

  // The control: the same bytes from a server without those headers run the script.
  const plain = createServer((_req, r) => r.writeHead(200, { 'content-type': 'image/svg+xml' }).end(SCRIPTED_SVG));
  await new Promise<void>((r) => plain.listen(0, '127.0.0.1', r));
  t.after(() => new Promise<void>((r) => (plain.closeAllConnections(), plain.close(() => r()))));
  await opened.goto(`http://127.0.0.1:${(plain.address() as AddressInfo).port}/icon.svg`);
  await opened.locator('svg[data-ran="yes"]').waitFor({ state: 'attached' });
  assert.ok(said.includes('the svg script ran'));
});
