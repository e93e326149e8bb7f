/** Time filters of the management API and the CLI: `15m`, `2h`, `7d` ago, or a date-time (src/schema/time.ts). */
import { SwitchyardError } from '../errors.ts';
import { readTime } from '../schema/time.ts';

/** Milliseconds since the epoch for a `since`/`until` value; undefined when absent; 400 naming `name` when unreadable or out of range. */
export function parseTimeParam(value: string | null | undefined, name: string, now = Date.now()): number | undefined {
  if (value === null || value === undefined || value === '') return undefined;
  const at = readTime(value, now);
  if (typeof at === 'object') throw new SwitchyardError('bad_request', `${name} ${at.error}`, { where: name, ...(at.hint ? { hint: at.hint } : {}) });
  return at;
}

/**
 * The body of a bulk replay (`{failed: true, since, until?, installation?}`), checked field by field:
 * the window and the installation it names. `what` is what is replayed ("deliveries").
 */
export function replayWindow(body: Record<string, unknown>, what: string): { since: number; until: number; installation?: string } {
  if (body.failed !== true) throw new SwitchyardError('bad_request', `replay needs "failed": true (only failed ${what} are replayed)`, { where: 'failed' });
  if (typeof body.since !== 'string' || !body.since)
    throw new SwitchyardError('bad_request', '"since" is required: a duration ago (2h) or a date-time', { where: 'since' });
  if (body.installation !== undefined && typeof body.installation !== 'string')
    throw new SwitchyardError('bad_request', '"installation" must be an installation id', { where: 'installation' });
  const since = parseTimeParam(body.since, 'since')!;
  const until = parseTimeParam(typeof body.until === 'string' ? body.until : undefined, 'until') ?? Date.now();
  return { since, until, installation: body.installation as string | undefined };
}

/** Deliveries a replay can send again: finished ones whose installation still exists. */
export const REPLAYABLE_STATUSES = ['failed', 'delivered'] as const;

/**
 * The body of a bulk delivery replay, checked field by field: which deliveries (`status`: failed or
 * delivered; `failed: true` says failed), created in which window (`since` optional: from the
 * start), of which installation.
 */
export function replaySelection(body: Record<string, unknown>): {
  status: (typeof REPLAYABLE_STATUSES)[number];
  since: number;
  until: number;
  installation?: string;
} {
  const { status } = body;
  if (status !== undefined && !(REPLAYABLE_STATUSES as readonly unknown[]).includes(status))
    throw new SwitchyardError(
      'bad_request',
      `"status" must be failed or delivered, got ${JSON.stringify(status)}: pending, retrying and held deliveries are still queued, cancelled ones belong to uninstalled installations`,
      { where: 'status' },
    );
  if (body.failed !== undefined && body.failed !== true) throw new SwitchyardError('bad_request', '"failed" must be true (or left out)', { where: 'failed' });
  if (body.failed === true && status !== undefined && status !== 'failed')
    throw new SwitchyardError('bad_request', `"failed": true and "status": "${status}" disagree; give one`, { where: 'status' });
  if (status === undefined && body.failed !== true)
    throw new SwitchyardError('bad_request', 'say which deliveries to replay: "status": "failed" or "delivered" (or "failed": true)', { where: 'status' });
  for (const name of ['since', 'until', 'installation'] as const)
    if (body[name] !== undefined && (typeof body[name] !== 'string' || !body[name]))
      throw new SwitchyardError('bad_request', `"${name}" must be ${name === 'installation' ? 'an installation id' : 'a duration ago (2h) or a date-time'}`, {
        where: name,
      });
  const since = parseTimeParam(body.since as string | undefined, 'since') ?? 0;
  const until = parseTimeParam(body.until as string | undefined, 'until') ?? Date.now();
  return { status: (status ?? 'failed') as (typeof REPLAYABLE_STATUSES)[number], since, until, installation: body.installation as string | undefined };
}
