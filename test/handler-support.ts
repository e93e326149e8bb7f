/** A recording integration and a loopback receiver for the handler-run tests (CLI and console). */
import type { TestContext } from 'node:test';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { samplePayload } from '../src/events/index.ts';
import { tmpDir } from './helpers/index.ts';

/** An integration whose site_view handler fetches the event's `url` (a loopback receiver) and throws unless it answers 2xx. */
export function recorderIntegration(t: TestContext): string {
  const dir = tmpDir(t);
  const folder = join(dir, 'recorder');
  mkdirSync(folder);
  writeFileSync(
    join(folder, 'platform-manifest.yaml'),
    [
      'name: recorder',
      'title: Recorder',
      'description: Reports every site view it handles.',
      'organization: switchyard-tests',
      'visibility: private',
      'scopes:',
      '  - site:views:read',
      'script: ./index.ts',
      '',
    ].join('\n'),
  );
  writeFileSync(
    join(folder, 'index.ts'),
    `import { createIntegration } from '@switchyard/runtime';
export default createIntegration({
  events: {
    site_view: async (event: any) => {
      const r = await fetch(event.url + '?seen=' + encodeURIComponent(event.eventId));
      if (!r.ok) throw new Error('the receiver answered ' + r.status);
    },
  },
});
`,
  );
  return dir;
}

/** A loopback receiver: records each eventId it answered 200 to; `hold` keeps requests open, `fail` answers 500. */
export async function receiver(t: TestContext) {
  const seen = new Set<string>();
  const held: ServerResponse[] = [];
  const state = { hold: false, fail: false, arrived: 0 };
  const server = createServer((req, res) => {
    const id = new URL(req.url!, 'http://x').searchParams.get('seen') ?? '';
    state.arrived++;
    if (state.hold) return void held.push(res);
    if (state.fail) return void res.writeHead(500).end('no');
    seen.add(id);
    res.end('ok');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => {
    for (const res of held) res.destroy();
    server.closeAllConnections();
    server.close();
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/view`, seen, held, state };
}

export const siteView = (url: string, eventId?: string) => samplePayload('site_view', { url, ...(eventId ? { eventId } : {}) });
