/**
 * The platform's event types. No imports: the web console bundles this file for its filters.
 */

/** Types a webhook installation can subscribe to (spec 6.2). */
export const WEBHOOK_EVENT_TYPES = ['space_content_updated', 'site_view', 'page_feedback'] as const;
/** Every type accepted at ingest: the webhook types and the runtime events of spec 6.1 (ui_render is a render call, not an event). */
export const EVENT_TYPES = [
  ...WEBHOOK_EVENT_TYPES,
  'installation_setup',
  'space_installation_setup',
  'site_installation_setup',
  'space_view',
  'space_visibility_updated',
  'space_gitsync_started',
  'space_gitsync_completed',
] as const;
