/**
 * `switchyard sign` and `switchyard verify`: compute or check an X-Platform-Signature from the
 * shell. The secret comes from --secret or SWITCHYARD_WEBHOOK_SECRET (keeps it out of `ps`);
 * the body from --data, --file or stdin, used byte for byte.
 */
import { readFileSync } from 'node:fs';
import { defineCommand } from 'citty';
import { SwitchyardError } from '../errors.ts';
import { parseDuration } from '../schema/index.ts';
import { signatureHeader, verifySignature } from '../webhooks/index.ts';
import { repeated } from './sets.ts';
import { green } from './table.ts';

function secretsFrom(rawArgs: string[]): string[] {
  const given = repeated(rawArgs, 'secret');
  const secrets = given.length ? given : process.env.SWITCHYARD_WEBHOOK_SECRET ? [process.env.SWITCHYARD_WEBHOOK_SECRET] : [];
  if (!secrets.length || secrets.some((s) => !s))
    throw new SwitchyardError('bad_request', 'a signing secret is needed', { hint: 'pass --secret <s> (repeat it for several) or set SWITCHYARD_WEBHOOK_SECRET' });
  return secrets;
}

async function bodyFrom(args: { data?: string; file?: string }): Promise<Buffer> {
  if (args.data !== undefined && args.file !== undefined) throw new SwitchyardError('bad_request', 'use --data or --file, not both');
  if (args.data !== undefined) return Buffer.from(args.data, 'utf8');
  if (args.file !== undefined) {
    try {
      return readFileSync(args.file);
    } catch (e) {
      throw new SwitchyardError('bad_request', `cannot read ${args.file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, { where: '--file' });
    }
  }
  if (process.stdin.isTTY) throw new SwitchyardError('bad_request', 'no body: pass --data, --file, or pipe it on stdin');
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

function timestampOf(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d{1,12}$/.test(value)) throw new SwitchyardError('bad_request', `${name} must be unix seconds, got "${value}"`, { where: name });
  return Number(value);
}

const bodyArgs = {
  data: { type: 'string', description: 'the body, as text' },
  file: { type: 'string', description: 'read the body from this file (exact bytes)' },
} as const;

export const sign = defineCommand({
  meta: { name: 'sign', description: 'Print the X-Platform-Signature value for a body (body from --data, --file or stdin)' },
  args: {
    secret: { type: 'string', description: 'signing secret (repeatable: one v1= per secret); default $SWITCHYARD_WEBHOOK_SECRET' },
    timestamp: { type: 'string', description: 'unix seconds to sign with (default now)' },
    ...bodyArgs,
  },
  async run({ args, rawArgs }) {
    const secrets = secretsFrom(rawArgs);
    const t = timestampOf(args.timestamp, '--timestamp') ?? Math.floor(Date.now() / 1000);
    process.stdout.write(`${signatureHeader(secrets, t, await bodyFrom(args))}\n`);
    return 0;
  },
});

export const verify = defineCommand({
  meta: { name: 'verify', description: 'Check an X-Platform-Signature against a body; exit 0 when valid, 1 when not' },
  args: {
    header: { type: 'string', required: true, description: 'the header value: t=...,v1=...' },
    secret: { type: 'string', description: 'signing secret (repeatable); default $SWITCHYARD_WEBHOOK_SECRET' },
    tolerance: { type: 'string', description: 'accepted clock difference (default 5m; 0 turns the check off)' },
    now: { type: 'string', description: 'unix seconds to check the timestamp against (default now)' },
    ...bodyArgs,
  },
  async run({ args, rawArgs }) {
    const secrets = secretsFrom(rawArgs);
    let toleranceSec = 300;
    if (args.tolerance !== undefined) {
      const ms = args.tolerance === '0' ? 0 : parseDuration(args.tolerance);
      if (ms === undefined) throw new SwitchyardError('bad_request', `--tolerance must be a duration like 30s or 5m, got "${args.tolerance}"`);
      toleranceSec = ms / 1000;
    }
    const v = verifySignature(args.header, await bodyFrom(args), secrets, { toleranceSec, now: timestampOf(args.now, '--now') });
    if (v.ok) {
      process.stdout.write(`${green('valid')} (t=${v.t})\n`);
      return 0;
    }
    // An error (not a return value: citty drops the results of subcommands) so the exit code is 1.
    throw new SwitchyardError('unauthorized', `signature invalid: ${v.reason}`);
  },
});
