import { test } from 'node:test';
import assert from 'node:assert/strict';
import { defaultConfig } from '../src/config/index.ts';
import { memoryLogger } from '../src/log/index.ts';
import { createSandbox, type GuestScript } from '../src/sandbox/index.ts';
import { bodyText } from './sandbox.helpers.ts';

const slow: GuestScript = {
  name: 'slow',
  version: '1',
  code: `import { createIntegration } from '@switchyard/runtime';
export default createIntegration({
  async fetch() {
    await new Promise((r) => setTimeout(r, 300));
    return new Response('finished');
  },
});`,
};
const envelope = { event: { type: 'fetch', request: { method: 'GET', url: 'https://x.test/', headers: [] } }, environment: {} };

function sandbox() {
  return createSandbox({
    limits: { ...defaultConfig().sandbox, cpu_time: 1000, startup_time: 5000 },
    allowPrivateNetworks: false,
    log: memoryLogger(),
    serverOrigin: 'http://127.0.0.1:1',
  });
}

test('closing the sandbox lets an invocation already running finish within the drain bound', async () => {
  const sb = sandbox();
  await sb.invoke({ script: slow, envelope, requestId: 'warm' });
  const running = sb.invoke({ script: slow, envelope, requestId: 'r1' });
  await new Promise((r) => setTimeout(r, 50));
  await sb.close(5_000);
  const result = await running;
  assert.equal(result.status, 200, JSON.stringify(result.error));
  assert.equal(bodyText(result.body), 'finished');
});

test('without a drain bound a running invocation is answered as closing, and new ones are refused', async () => {
  const sb = sandbox();
  await sb.invoke({ script: slow, envelope, requestId: 'warm' });
  const running = sb.invoke({ script: slow, envelope, requestId: 'r2' });
  await new Promise((r) => setTimeout(r, 50));
  await sb.close();
  const result = await running;
  assert.equal(result.error?.kind, 'crash');
  assert.match(result.error!.message, /closing/);
  const late = await sb.invoke({ script: slow, envelope, requestId: 'r3' }).catch((e: Error) => e);
  assert.ok(late instanceof Error || (late as { status: number }).status >= 500);
});
