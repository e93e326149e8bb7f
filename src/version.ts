/** The program's version, from package.json (bundled into the single executable at build time). */
import pkg from '../package.json' with { type: 'json' };

export const VERSION: string = pkg.version;
export const USER_AGENT = `Switchyard/${VERSION}`;
