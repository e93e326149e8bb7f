/**
 * The integration manifest (`platform-manifest.yaml`): its schema and type, parsing with problems
 * at file:line:col, the files it names, and the check of an installation's configuration against it.
 */
export {
  manifestSchema,
  propertySchema,
  SCOPES,
  INTERNAL_SCOPES,
  CATEGORIES,
  VISIBILITIES,
  PROPERTY_TYPES,
  SCRIPT_EXTENSIONS,
  NAME_PATTERN,
  NAME_HINT,
  NAME_CHARACTERS,
  GITBOOK_NAME_PATTERN,
  NAME_MAX,
  SUMMARY_MAX,
  PROPERTY_TITLE_MAX,
  PROPERTY_DESCRIPTION_MAX,
  type Manifest,
  type PropertyDef,
  type StringPropertyDef,
  type NumberPropertyDef,
  type BooleanPropertyDef,
  type ButtonPropertyDef,
  type ConfigurationsDef,
  type Scope,
  type PropertyType,
  type ManifestDialect,
  TARGETS,
  GITBOOK_SCOPES,
  manifestSchemaOf,
} from './schema.ts';
export {
  parseManifest,
  loadManifest,
  displayPath,
  isError,
  MANIFEST_FILE,
  GITBOOK_MANIFEST_FILE,
  manifestFileOf,
  type ManifestResult,
  type LoadedManifestResult,
} from './parse.ts';
export { validateConfiguration, withDefaults, missingRequired, coerceConfigurationValue, OAUTH_CREDENTIALS } from './configuration.ts';
export { imageInfo, isSvg, pngSize, readImageInside, IMAGE_HEADERS } from './assets.ts';
export { sectionFor, sectionNameFor, CONFIGURATION_SECTIONS, type ConfigurationTarget, type ConfigurationSectionName } from './sections.ts';
