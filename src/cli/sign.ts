/**
 * `switchyard sign` and `switchyard verify`: compute or check a delivery's signature from the
 * shell, in either scheme: X-Platform-Signature (the default) or, with `--scheme standard-webhooks`,
 * the webhook-id / webhook-timestamp / webhook-signature headers. The secret comes from --secret or
 * SWITCHYARD_WEBHOOK_SECRET (keeps it out of `ps`); the body from --data, --file or stdin, used byte
 * for byte.
 */
import { readFileSync } from 'node:fs';
import { defineCommand } from 'citty';
import { SwitchyardError } from '../errors.ts';
import { parseDuration } from '../schema/index.ts';
import {
  SIGNATURE_SCHEMES,
  STANDARD_HEADERS,
  signatureHeader,
  standardKey,
  standardSignatureHeader,
  verifySignature,
  verifyStandardSignature,
  type SignatureScheme,
} from '../webhooks/index.ts';
import { repeated } from './sets.ts';
import { green } from './table.ts';

/** `--scheme`, shared with `switchyard receive`. */
export const schemeArg = {
  scheme: {
    type: 'string',
    description: "the installation's signature_scheme: platform (X-Platform-Signature, the default) or standard-webhooks",
    valueHint: 'scheme',
    default: 'platform',
  },
} as const;

export function schemeFrom(value: string | undefined): SignatureScheme {
  const scheme = value ?? 'platform';
  if (!(SIGNATURE_SCHEMES as readonly string[]).includes(scheme))
    throw new SwitchyardError('bad_request', `--scheme must be ${SIGNATURE_SCHEMES.join(' or ')}, got "${scheme}"`, {
      where: '--scheme',
      hint: "use the installation's signature_scheme (`switchyard installations show <id>`)",
    });
  return scheme as SignatureScheme;
}

/** Under standard-webhooks, every secret must be `whsec_` and base64 (the key is its decoded bytes). Never prints the secret. */
export function checkSecretsFor(scheme: SignatureScheme, secrets: string[]): void {
  if (scheme !== 'standard-webhooks') return;
  const bad = secrets.findIndex((s) => !standardKey(s));
  if (bad >= 0)
    throw new SwitchyardError('bad_request', `secret ${bad + 1} of ${secrets.length} is not a standard-webhooks secret (whsec_ followed by base64)`, {
      where: '--secret',
      hint: "use the installation's secret as `switchyard installations secret <id> --reveal` prints it",
    });
}

/** The id a standard-webhooks signature covers: --id, else the body's eventId (what deliveries sign). */
function idFor(given: string | undefined, body: Buffer): string {
  if (given) return given;
  try {
    const eventId = JSON.parse(body.toString('utf8'))?.eventId;
    if (typeof eventId === 'string' && eventId) return eventId;
  } catch {
    // not JSON: no eventId to take
  }
  throw new SwitchyardError('bad_request', 'the standard-webhooks scheme signs an id: pass --id (the webhook-id header), or a JSON body with an eventId', {
    where: '--id',
  });
}

function secretsFrom(rawArgs: string[]): string[] {
  const given = repeated(rawArgs, 'secret');
  const secrets = given.length ? given : process.env.SWITCHYARD_WEBHOOK_SECRET ? [process.env.SWITCHYARD_WEBHOOK_SECRET] : [];
  if (!secrets.length || secrets.some((s) => !s))
    throw new SwitchyardError('bad_request', 'a signing secret is needed', {
      hint: 'pass --secret <s> (repeat it for several) or set SWITCHYARD_WEBHOOK_SECRET',
    });
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
  meta: {
    name: 'sign',
    description:
      'Print the X-Platform-Signature value for a body, or with --scheme standard-webhooks its three header lines (body from --data, --file or stdin)',
  },
  args: {
    secret: { type: 'string', description: 'signing secret (repeatable: one signature per secret); default $SWITCHYARD_WEBHOOK_SECRET' },
    timestamp: { type: 'string', description: 'unix seconds to sign with (default now)' },
    ...schemeArg,
    id: { type: 'string', description: "standard-webhooks: the webhook-id to sign (default the body's eventId)" },
    ...bodyArgs,
  },
  async run({ args, rawArgs }) {
    const scheme = schemeFrom(args.scheme);
    const secrets = secretsFrom(rawArgs);
    checkSecretsFor(scheme, secrets);
    const t = timestampOf(args.timestamp, '--timestamp') ?? Math.floor(Date.now() / 1000);
    const body = await bodyFrom(args);
    if (scheme === 'platform') {
      process.stdout.write(`${signatureHeader(secrets, t, body)}\n`);
      return 0;
    }
    const id = idFor(args.id, body);
    process.stdout.write(
      `${STANDARD_HEADERS.id}: ${id}\n${STANDARD_HEADERS.timestamp}: ${t}\n${STANDARD_HEADERS.signature}: ${standardSignatureHeader(secrets, id, t, body)}\n`,
    );
    return 0;
  },
});

export const verify = defineCommand({
  meta: {
    name: 'verify',
    description:
      'Check a signature against a body (X-Platform-Signature, or with --scheme standard-webhooks the webhook-* headers); exit 0 when valid, 1 when not',
  },
  args: {
    header: {
      type: 'string',
      required: true,
      description: 'the signature header value: t=...,v1=... (standard-webhooks: the webhook-signature value, v1,...)',
    },
    secret: { type: 'string', description: 'signing secret (repeatable); default $SWITCHYARD_WEBHOOK_SECRET' },
    tolerance: { type: 'string', description: 'accepted clock difference (default 5m; 0 turns the check off)' },
    now: { type: 'string', description: 'unix seconds to check the timestamp against (default now)' },
    ...schemeArg,
    id: { type: 'string', description: "standard-webhooks: the webhook-id header (default the body's eventId)" },
    timestamp: { type: 'string', description: 'standard-webhooks: the webhook-timestamp header (unix seconds)' },
    ...bodyArgs,
  },
  async run({ args, rawArgs }) {
    const scheme = schemeFrom(args.scheme);
    const secrets = secretsFrom(rawArgs);
    checkSecretsFor(scheme, secrets);
    if (scheme === 'platform' && (args.id !== undefined || args.timestamp !== undefined))
      throw new SwitchyardError('bad_request', '--id and --timestamp go with --scheme standard-webhooks (X-Platform-Signature carries its own t=)', {
        where: args.id !== undefined ? '--id' : '--timestamp',
      });
    if (scheme === 'standard-webhooks' && args.timestamp === undefined)
      throw new SwitchyardError('bad_request', 'the standard-webhooks scheme needs --timestamp (the webhook-timestamp header)', { where: '--timestamp' });
    let toleranceSec = 300;
    if (args.tolerance !== undefined) {
      const ms = args.tolerance === '0' ? 0 : parseDuration(args.tolerance);
      if (ms === undefined) throw new SwitchyardError('bad_request', `--tolerance must be a duration like 30s or 5m, got "${args.tolerance}"`);
      toleranceSec = ms / 1000;
    }
    const body = await bodyFrom(args);
    const opts = { toleranceSec, now: timestampOf(args.now, '--now') };
    const v =
      scheme === 'platform'
        ? verifySignature(args.header, body, secrets, opts)
        : verifyStandardSignature(
            { id: idFor(args.id, body), timestamp: String(timestampOf(args.timestamp, '--timestamp')), signature: args.header },
            body,
            secrets,
            opts,
          );
    if (v.ok) {
      process.stdout.write(`${green('valid')} (t=${v.t})\n`);
      return 0;
    }
    // An error (not a return value: citty drops the results of subcommands) so the exit code is 1.
    throw new SwitchyardError('unauthorized', `signature invalid: ${v.reason}`);
  },
});
