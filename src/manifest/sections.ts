/**
 * Which of a manifest's configuration sections an installation is configured by, picked by the
 * installation's target. One rule for the server (the check of a configuration, what is missing,
 * the connect buttons), `switchyard check` and the web console, which imports this file: it has
 * no Node imports and no values from elsewhere.
 */

/** Where an installation is made. */
export type ConfigurationTarget = 'organization' | 'space' | 'site';

/** The sections a manifest may declare (`configurations.space` is GitBook's). */
export const CONFIGURATION_SECTIONS = ['account', 'space', 'site'] as const;
export type ConfigurationSectionName = (typeof CONFIGURATION_SECTIONS)[number];

/**
 * The section named by the installation's target: `site` for a site, `space` for a space when the
 * manifest has one (GitBook's configuration per space), else `account`. A manifest whose
 * configuration screens are components (`componentId`) and that leaves out the section a target
 * would use gets `{componentId}` of the first such screen: what it stores is kept there (GitBook's
 * webhook draws its account settings from its space and site screens).
 */
export function sectionFor<S extends { componentId?: string }>(
  configurations: Partial<Record<ConfigurationSectionName, S>> | undefined,
  target: ConfigurationTarget,
): S | { componentId: string } | undefined {
  return configurations?.[sectionNameFor(configurations, target)] ?? drawnBy(configurations);
}

/** The name of the section sectionFor picks (`account` when the manifest has none at all). */
export function sectionNameFor(
  configurations: Partial<Record<ConfigurationSectionName, unknown>> | undefined,
  target: ConfigurationTarget,
): ConfigurationSectionName {
  if (target === 'site') return 'site';
  if (target === 'space' && configurations?.space) return 'space';
  return 'account';
}

function drawnBy(configurations: Partial<Record<ConfigurationSectionName, { componentId?: string }>> | undefined): { componentId: string } | undefined {
  const id = CONFIGURATION_SECTIONS.map((n) => configurations?.[n]?.componentId).find(Boolean);
  return id ? { componentId: id } : undefined;
}
