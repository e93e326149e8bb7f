/**
 * The sandbox worker process (tests and `switchyard check`; `switchyard serve` runs isolates in
 * its serving processes, in-process.ts): isolates live here, apart from the HTTP server and the
 * delivery queue, so a guest that takes V8 down (out of memory, a catastrophic error) costs only
 * this process; the server's side (worker-process.ts) answers its pending invocations and
 * starts another.
 */
import { guestBundle } from './guest-bundle.ts';
import { batcher, envelopeFromWire, resultToWire } from './ipc.ts';
import { failure } from './limits.ts';
import type { FromWorker, InvocationResult, ToWorker } from './types.ts';
import { SandboxHost } from './host/host.ts';

export function runWorker(): void {
  if (!process.send) throw new Error('the sandbox worker must be started by the server (it talks over an IPC channel)');
  const replacements = new WeakSet<FromWorker>();
  const replacement = (m: FromWorker) => (replacements.add(m), m);
  const send: (msg: FromWorker) => void = batcher<FromWorker>(
    (batch) => {
      if (process.connected) process.send!(batch);
    },
    // A result that cannot be written (something in it is not serializable) still gets an answer.
    ([msg], err) => {
      if (!msg || replacements.has(msg)) return;
      if (msg.t === 'result') {
        const result = failure(
          { kind: 'exception', message: `the integration's answer could not be sent: ${err.message}` },
          { durationMs: msg.result.durationMs },
        );
        send(replacement({ t: 'result', id: msg.id, result: resultToWire(result) }));
      } else if (msg.t === 'checked')
        send(replacement({ t: 'checked', id: msg.id, result: { ok: false, error: `what the script exports could not be sent: ${err.message}` } }));
    },
    (msg) => (msg.t === 'result' ? msg.result.body.length : 0),
  );
  let host: SandboxHost | null = null;

  process.on('message', (batch: ToWorker[]) => {
    for (const msg of batch) handle(msg);
  });

  function handle(msg: ToWorker): void {
    switch (msg.t) {
      case 'settings':
        if (host) host.settings = msg.settings;
        else host = new SandboxHost(msg.settings, send);
        return;
      case 'invoke': {
        const reply = (result: InvocationResult | 'need-code') =>
          send(result === 'need-code' ? { t: 'need-code', id: msg.id } : { t: 'result', id: msg.id, result: resultToWire(result) });
        const fatal = (e: unknown) => {
          process.stderr.write(`sandbox worker: invoke failed: ${(e as Error)?.stack ?? e}\n`);
          process.exit(70);
        };
        try {
          const outcome = host!.invoke({ ...msg, envelope: envelopeFromWire(msg.envelope) });
          if (outcome instanceof Promise) outcome.then(reply, fatal);
          else reply(outcome);
        } catch (e) {
          fatal(e);
        }
        return;
      }
      case 'check':
        host!.check(msg.script).then((result) => send({ t: 'checked', id: msg.id, result }));
        return;
      case 'unload':
        host?.unload(msg.name);
        send({ t: 'unloaded', id: msg.id });
        return;
      case 'close':
        host?.close();
        process.disconnect();
        setImmediate(() => process.exit(0));
        return;
    }
  }
  // The server went away: nothing left to serve.
  process.on('disconnect', () => process.exit(0));
  // Ctrl-C in a terminal signals the whole process group; the server shuts its worker down itself
  // (a 'close' message, or the disconnect above), so the worker must not die first and be
  // reported as a crash while the server is still draining.
  process.on('SIGINT', () => {});
  // Build the guest library before the first invocation needs it.
  guestBundle().then(
    () => send({ t: 'ready' }),
    (e) => {
      process.stderr.write(`sandbox worker: cannot build the guest library: ${(e as Error)?.stack ?? e}\n`);
      process.exit(78);
    },
  );
}
