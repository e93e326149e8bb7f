import { test } from 'node:test';
import { deliveryServer, scriptedReceiver } from './webhooks-support.ts';
import { samplePayload } from '../src/events/index.ts';
test('scratch', async (t) => {
  const s = await deliveryServer(t);
  const rx = await scriptedReceiver(t, () => 200);
  const sub = await s.subscribe(rx.url);
  const r = await s.send(samplePayload('site_view'));
  console.log('send', r.status, JSON.stringify(r.body).slice(0, 300));
  await new Promise((res) => setTimeout(res, 2000));
  console.log('rx', (rx as any).requests?.length ?? Object.keys(rx));
  const d = await s.api('GET', '/api/v1/deliveries');
  console.log(JSON.stringify(d.body).slice(0, 600));
  for (const l of s.logs) if (l.level !== 'debug') console.log(JSON.stringify(l).slice(0, 500));
});
