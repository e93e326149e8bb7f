/**
 * `switchyard receive`: the reference receiver on a local port. Verifies each request's
 * signature on the raw body, answers at once, deduplicates by eventId for 2 minutes, and prints
 * each event (JSON lines with --json).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { defineCommand } from 'citty';
import { SwitchyardError } from '../errors.ts';
import { createReceiver } from '../webhooks/index.ts';
import { configArg, configFrom } from './common.ts';
import { repeated } from './sets.ts';
import { dim, green, red, yellow } from './table.ts';

export default defineCommand({
  meta: { name: 'receive', description: 'Run a reference webhook receiver that verifies, deduplicates and prints each event' },
  args: {
    ...configArg,
    port: { type: 'string', description: 'port to listen on (default 9000; 0 picks a free one)', default: '9000' },
    host: { type: 'string', description: 'interface (default 127.0.0.1)', default: '127.0.0.1' },
    secret: { type: 'string', description: 'signing secret (repeatable, for a rotation); default $SWITCHYARD_WEBHOOK_SECRET' },
    json: { type: 'boolean', description: 'print each event as one JSON line', default: false },
  },
  async run({ args, rawArgs }) {
    const port = Number(args.port);
    if (!Number.isInteger(port) || port < 0 || port > 65535)
      throw new SwitchyardError('bad_request', `--port must be a whole number from 0 to 65535, got "${args.port}"`);
    const given = repeated(rawArgs, 'secret');
    const secrets = given.length ? given : process.env.SWITCHYARD_WEBHOOK_SECRET ? [process.env.SWITCHYARD_WEBHOOK_SECRET] : [];
    if (!secrets.length)
      throw new SwitchyardError('bad_request', 'a signing secret is needed', {
        hint: 'pass --secret <s> (see `GET /api/v1/webhooks/<installation>/secret?reveal=true`) or set SWITCHYARD_WEBHOOK_SECRET',
      });
    // The tolerance is the one of config.yaml (webhooks.signature_tolerance), defaults when there is none.
    const toleranceSec = configFrom(args).webhooks.signature_tolerance / 1000;
    const time = () => new Date().toISOString().slice(11, 23);
    const out = (line: string) => process.stdout.write(`${line}\n`);
    const handler = createReceiver({
      secrets,
      toleranceSec,
      onEvent(e) {
        if (args.json) out(JSON.stringify({ received: new Date().toISOString(), t: e.t, event: e.payload }));
        else out(`${time()} ${green('received')} ${e.type ?? '?'} ${e.eventId ?? '(no eventId)'} ${dim(JSON.stringify(e.payload))}`);
      },
      onDuplicate(e) {
        if (args.json) out(JSON.stringify({ received: new Date().toISOString(), t: e.t, duplicate: true, eventId: e.eventId }));
        else out(`${time()} ${yellow('duplicate')} ${e.eventId} ignored`);
      },
      onReject(status, reason) {
        if (args.json) out(JSON.stringify({ received: new Date().toISOString(), rejected: status, reason }));
        else out(`${time()} ${red(`rejected ${status}`)} ${reason}`);
      },
    });
    const server = createServer(handler);
    await new Promise<void>((resolve, reject) => {
      server.once('error', (e: NodeJS.ErrnoException) =>
        reject(
          new SwitchyardError(e.code === 'EADDRINUSE' ? 'port_in_use' : 'listen_failed', `cannot listen on ${args.host}:${port} (${e.code ?? e.message})`, {
            hint: 'pick another --port (0 picks a free one)',
          }),
        ),
      );
      server.listen(port, args.host, resolve);
    });
    const bound = (server.address() as AddressInfo).port;
    process.stderr.write(`receiving on http://${args.host}:${bound}/ (POST, X-Platform-Signature checked, tolerance ${toleranceSec} s); Ctrl-C stops\n`);
    await new Promise<void>((resolve) => {
      const stop = () => {
        server.close(() => resolve());
        server.closeAllConnections();
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
    return 0;
  },
});
