/**
 * The built-in webhook integration's own configuration rules (spec 5.5): a webhook URL (required)
 * and the event types to receive (required, several at once, comma-separated).
 */
import { SwitchyardError, type Problem } from '../errors.ts';
import { INSTALLATION_LIMITS } from './limits.ts';

export const WEBHOOK_INTEGRATION = 'webhook';
export const WEBHOOK_EVENT_TYPES = ['space_content_updated', 'site_view', 'page_feedback'] as const;

/**
 * Spec 5.5: "The webhook integration must be installed into the organization." Its subscriptions
 * are per event type for the whole organization (which space or site an event concerns is in its
 * payload), so a space or site installation is refused, never stored.
 */
export function requireOrganizationTarget(target: string, where: { space?: string; site?: string }): void {
  if (target === 'organization') return;
  const place = where.space ? `space ${where.space}` : where.site ? `site ${where.site}` : `a ${target}`;
  throw new SwitchyardError('webhook_organization_only', `the webhook integration is installed into the organization, not on ${place} (spec 5.5)`, {
    where: 'target',
    hint: 'install it without --space or --site (API: no target, space or site); its event_types choose which space and site events it receives',
  });
}

/** `"a, b"` or `["a","b"]` to a clean list. */
export function parseEventTypes(value: unknown): string[] {
  const list = Array.isArray(value) ? value.map(String) : typeof value === 'string' ? value.split(',') : [];
  return [...new Set(list.map((s) => s.trim()).filter(Boolean))];
}

export function webhookConfigurationProblems(configuration: Record<string, unknown>): Problem[] {
  const problems: Problem[] = [];
  const url = configuration.webhook_url;
  if (typeof url === 'string' && url.length > INSTALLATION_LIMITS.webhookUrl) {
    // Not repeated in the answer: it is long.
    problems.push({
      where: 'configuration.webhook_url',
      message: `must be at most ${INSTALLATION_LIMITS.webhookUrl} characters (it has ${url.length})`,
      hint: 'use the URL of the receiving endpoint; keep data out of it',
    });
  } else if (typeof url === 'string' && /[\u0000-\u001f\u007f]/.test(url)) {
    // URL parsing drops or escapes them, but the URL is stored as given: it must be the one sent to.
    problems.push({
      where: 'configuration.webhook_url',
      message: 'must not contain control characters (a NUL, a tab, a line break, ...)',
      hint: 'percent-encode them (%00, %09, %0A)',
    });
  } else if (url !== undefined) {
    let ok = false;
    try {
      const u = new URL(String(url));
      ok = u.protocol === 'http:' || u.protocol === 'https:';
    } catch {
      ok = false;
    }
    if (!ok)
      problems.push({
        where: 'configuration.webhook_url',
        message: `"${String(url)}" is not an http(s) URL`,
        hint: 'use an absolute URL like https://example.com/webhooks',
      });
  }
  const types = configuration.event_types;
  if (types !== undefined) {
    const list = parseEventTypes(types);
    if (!list.length)
      problems.push({
        where: 'configuration.event_types',
        message: 'must name at least one event type',
        hint: `choose from ${WEBHOOK_EVENT_TYPES.join(', ')}`,
      });
    for (const t of list)
      if (!(WEBHOOK_EVENT_TYPES as readonly string[]).includes(t))
        problems.push({
          where: 'configuration.event_types',
          message: `"${t}" is not a webhook event type`,
          hint: `choose from ${WEBHOOK_EVENT_TYPES.join(', ')} (comma-separated)`,
        });
  }
  return problems;
}
