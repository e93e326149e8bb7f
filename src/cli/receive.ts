/**
 * `switchyard receive`: the reference receiver on a local port. Verifies each request's
 * signature on the raw body (X-Platform-Signature, or with `--scheme standard-webhooks` the
 * webhook-* headers), answers at once, deduplicates by eventId for 2 minutes, and prints each event
 * (JSON lines with --json).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { defineCommand } from 'citty';
import { SwitchyardError } from '../errors.ts';
import { createReceiver } from '../webhooks/index.ts';
import { configArg, configFrom } from './common.ts';
import { repeated } from './sets.ts';
import { checkSecretsFor, schemeArg, schemeFrom } from './sign.ts';
import { dim, green, red, yellow } from './table.ts';

export default defineCommand({
  meta: { name: 'receive', description: 'Run a reference webhook receiver that verifies, deduplicates and prints each event' },
  args: {
    ...configArg,
    port: { type: 'string', description: 'port to listen on (default 9000; 0 picks a free one)', default: '9000' },
    host: { type: 'string', description: 'interface (default 127.0.0.1)', default: '127.0.0.1' },
    secret: { type: 'string', description: 'signing secret (repeatable, for a rotation); default $SWITCHYARD_WEBHOOK_SECRET' },
    ...schemeArg,
    json: { type: 'boolean', description: 'print each event as one JSON line', default: false },
    status: { type: 'string', description: 'rehearse failures: answer this status (e.g. 500, 429, 410) instead of 200' },
    'fail-rate': { type: 'string', description: 'rehearse failures: the fraction of events (0-1) answered with --status (default 500); 1 with --status alone' },
  },
  async run({ args, rawArgs }) {
    const port = Number(args.port);
    if (!Number.isInteger(port) || port < 0 || port > 65535)
      throw new SwitchyardError('bad_request', `--port must be a whole number from 0 to 65535, got "${args.port}"`);
    const given = repeated(rawArgs, 'secret');
    const secrets = given.length ? given : process.env.SWITCHYARD_WEBHOOK_SECRET ? [process.env.SWITCHYARD_WEBHOOK_SECRET] : [];
    if (!secrets.length)
      throw new SwitchyardError('bad_request', 'a signing secret is needed', {
        hint: 'pass --secret <s> (`switchyard install webhook` prints it once; `switchyard installations secret <inst_id> --reveal` shows it again) or set SWITCHYARD_WEBHOOK_SECRET',
      });
    const scheme = schemeFrom(args.scheme);
    checkSecretsFor(scheme, secrets);
    const fail = rehearsal(args.status, args['fail-rate']);
    // The tolerance is the one of config.yaml (webhooks.signature_tolerance), defaults when there is none.
    const toleranceSec = configFrom(args).webhooks.signature_tolerance / 1000;
    const time = () => new Date().toISOString().slice(11, 23);
    const out = (line: string) => process.stdout.write(`${line}\n`);
    const handler = createReceiver({
      secrets,
      scheme,
      toleranceSec,
      ...(fail ? { fail } : {}),
      onFail(status, e) {
        if (args.json) out(JSON.stringify({ received: new Date().toISOString(), t: e.t, answered: status, rehearsed: true, eventId: e.eventId }));
        else out(`${time()} ${red(`answered ${status}`)} ${e.type ?? '?'} ${e.eventId ?? '(no eventId)'} ${dim('(rehearsed failure)')}`);
      },
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
    const rehearsing = fail ? `; answering ${fail.status} to ${Math.round(fail.rate * 100)} % of events` : '';
    const checked = scheme === 'platform' ? 'X-Platform-Signature' : 'webhook-signature';
    process.stderr.write(`receiving on http://${args.host}:${bound}/ (POST, ${checked} checked, tolerance ${toleranceSec} s${rehearsing}); Ctrl-C stops\n`);
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

/** --status and --fail-rate: which failure to rehearse and how often, or none. */
function rehearsal(status: string | undefined, rate: string | undefined): { status: number; rate: number } | undefined {
  if (status === undefined && rate === undefined) return undefined;
  const code = status === undefined ? 500 : Number(status);
  if (!Number.isInteger(code) || code < 300 || code > 599)
    throw new SwitchyardError('bad_request', `--status must be an HTTP status from 300 to 599 to rehearse a failure, got "${status}"`, { where: '--status' });
  const fraction = rate === undefined ? 1 : Number(rate);
  if (!Number.isFinite(fraction) || fraction < 0 || fraction > 1)
    throw new SwitchyardError('bad_request', `--fail-rate must be a fraction from 0 to 1, got "${rate}"`, { where: '--fail-rate' });
  return { status: code, rate: fraction };
}
