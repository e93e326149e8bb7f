/** Typed capabilities: what a module needs is checked once, at start, by name. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SwitchyardError } from '../src/errors.ts';
import { runtimeModule } from '../src/runtime/index.ts';
import { eventsModule } from '../src/events/index.ts';
import { installationsModule } from '../src/installations/index.ts';
import { registryModule } from '../src/registry/index.ts';
import { checkNeeds, capabilityOf, startOrder } from '../src/module/capabilities.ts';
import { modules } from '../src/server/modules.ts';
import { startServer } from '../src/server/server.ts';
import { defineModule, type Module } from '../src/module/contract.ts';
import { memoryLogger } from '../src/log/index.ts';
import { startTestServer, testConfig } from './helpers/index.ts';

test("the server's own modules provide every capability one of them needs", () => {
  assert.doesNotThrow(() => checkNeeds(modules));
  for (const m of modules)
    for (const need of m.needs ?? [])
      assert.ok(
        modules.some((p) => p.provides?.includes(need)),
        `${m.name} needs ${need}`,
      );
});

test('a module whose need no module provides stops the start, naming the capability, who needs it and where it comes from', async (t) => {
  const error = await startServer(testConfig(t), { log: memoryLogger(), modules: [runtimeModule] }).then(
    () => assert.fail('started without the registry'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof SwitchyardError);
  assert.equal(error.code, 'capability_missing');
  assert.match(error.message, /the runtime module needs services\.registry, and no module of this server provides it/);
  assert.match(error.hint ?? '', /start the registry module too/);
});

test('a module that does not attach what it provides stops the start; capabilityOf names what a server lacks', async (t) => {
  const forgetful = defineModule({ name: 'forgetful', provides: ['streams'], start() {} });
  await assert.rejects(startServer(testConfig(t), { log: memoryLogger(), modules: [forgetful] }), (e: SwitchyardError) => {
    assert.equal(e.code, 'capability_missing');
    assert.match(e.message, /the forgetful module did not attach services\.streams/);
    return true;
  });
  const s = await startTestServer(t, {}, { modules: [] });
  assert.throws(() => capabilityOf(s.services, 'registry'), /this server has no services\.registry/);
});

test('the start order comes from needs and uses: a shuffled module list starts each module after its providers, and serves the same', async (t) => {
  const names = (ms: readonly Module[]) => ms.map((m) => m.name);
  // The list's own order fits its needs: it is the start order as it is.
  assert.deepEqual(names(startOrder(modules)), names(modules));
  const reversed = [...modules].reverse();
  const shuffled = [modules[6], modules[3], modules[10], modules[1], modules[8], modules[0], modules[5], modules[9], modules[2], modules[7], modules[4]];
  assert.deepEqual(new Set(shuffled), new Set(modules));
  for (const list of [reversed, shuffled]) {
    const order = startOrder(list);
    assert.deepEqual(new Set(order), new Set(modules));
    order.forEach((m, i) => {
      for (const c of [...(m.needs ?? []), ...(m.uses ?? [])])
        assert.ok(
          order.slice(0, i).some((p) => p.provides?.includes(c)),
          `${m.name} starts after the provider of ${c}`,
        );
    });
  }
  const listed = await startTestServer(t);
  const s = await startTestServer(t, {}, { modules: reversed });
  for (const m of modules) for (const c of m.provides ?? []) assert.ok(s.services[c] !== undefined, `services.${c}`);
  const paths = async (server: typeof s) => Object.keys((await server.api('GET', '/openapi.json')).body.paths).sort();
  assert.deepEqual(await paths(s), await paths(listed));
  assert.equal((await s.api('GET', '/api/v1/integrations')).status, 200);
});

test('a module with nothing to wait for keeps its place in the list', () => {
  const free = defineModule({ name: 'free' });
  const reader = defineModule({ name: 'reader', uses: ['streams'] });
  const provider = defineModule({ name: 'provider', provides: ['streams'], start() {} });
  assert.deepEqual(
    startOrder([reader, free, provider]).map((m) => m.name),
    ['free', 'provider', 'reader'],
  );
  // A capability used and provided by no module orders nothing, and is no error.
  assert.deepEqual(
    startOrder([reader, free]).map((m) => m.name),
    ['reader', 'free'],
  );
});

test('modules that need each other stop the start, naming the modules of the cycle and what each waits for', async (t) => {
  const a = defineModule({ name: 'alpha', provides: ['streams'], needs: ['metrics'], start() {} });
  const b = defineModule({ name: 'beta', provides: ['metrics'], uses: ['retention'], start() {} });
  const c = defineModule({ name: 'gamma', provides: ['retention'], needs: ['streams'], start() {} });
  const bystander = defineModule({ name: 'bystander', needs: ['streams'] });
  const error = await startServer(testConfig(t), { log: memoryLogger(), modules: [bystander, a, b, c] }).then(
    () => assert.fail('started a cycle'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof SwitchyardError);
  assert.equal(error.code, 'module_cycle');
  assert.match(error.message, /the modules alpha, beta, gamma each wait for another to start first/);
  assert.match(error.message, /alpha reads services\.metrics of beta, beta reads services\.retention of gamma, gamma reads services\.streams of alpha/);
  assert.doesNotMatch(error.message, /bystander/);
  assert.match(error.hint ?? '', /leave that capability out of its needs and uses/);
  // A module needing what it provides itself (one wrapping another's) is no cycle.
  const wrapper = defineModule({ name: 'wrapper', provides: ['streams'], needs: ['streams'], start() {} });
  assert.deepEqual(
    startOrder([wrapper, a, b]).map((m) => m.name),
    ['beta', 'alpha', 'wrapper'],
  );
});

test('a need no module of a made-up set provides stops the start, naming the module and the capability', async (t) => {
  const lonely = defineModule({ name: 'lonely', needs: ['streams'], start() {} });
  const other = defineModule({ name: 'other', provides: ['metrics'], start() {} });
  await assert.rejects(startServer(testConfig(t), { log: memoryLogger(), modules: [other, lonely] }), (e: SwitchyardError) => {
    assert.equal(e.code, 'capability_missing');
    assert.match(e.message, /the lonely module needs services\.streams, and no module of this server provides it/);
    assert.match(e.hint ?? '', /start the inspection module too/);
    return true;
  });
});

test('the events module needs the subscriptions and the delivery queue: a server without them is refused at start, not one whose ingest delivers nothing', async (t) => {
  await assert.rejects(startServer(testConfig(t), { log: memoryLogger(), modules: [eventsModule] }), (e: SwitchyardError) => {
    assert.equal(e.code, 'capability_missing');
    assert.match(e.message, /the events module needs services\.subscriptions/);
    assert.match(e.hint ?? '', /start the installations module too/);
    return true;
  });
  await assert.rejects(
    startServer(testConfig(t), { log: memoryLogger(), modules: [registryModule, installationsModule, eventsModule] }),
    (e: SwitchyardError) => {
      assert.match(e.message, /the events module needs services\.deliveries/);
      assert.match(e.hint ?? '', /start the webhooks module too/);
      return true;
    },
  );
});
