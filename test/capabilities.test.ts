/** Typed capabilities: what a module needs is checked once, at start, by name. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SwitchyardError } from '../src/errors.ts';
import { runtimeModule } from '../src/runtime/index.ts';
import { checkNeeds, capabilityOf } from '../src/module/capabilities.ts';
import { modules } from '../src/server/modules.ts';
import { startServer } from '../src/server/server.ts';
import { defineModule } from '../src/module/contract.ts';
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
