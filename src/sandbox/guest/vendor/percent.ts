/**
 * Stand-in for @exodus/bytes/whatwg.js inside the guest bundle: URL parsing always percent-encodes
 * UTF-8 here; the legacy encodings (a form submitted as Shift_JIS...) load the full tables lazily.
 */
import { percentEncoder } from '../../../../node_modules/@exodus/bytes/fallback/percent.js';
import { utf8fromStringLoose } from '@exodus/bytes/utf8.js';
import { loadExtra } from '../bridge.ts';

export function percentEncodeAfterEncoding(encoding: string, input: string, percentEncodeSet: string, spaceAsPlus = false): string {
  if (encoding === 'utf-8' || encoding === 'UTF-8') return percentEncoder(percentEncodeSet, spaceAsPlus)(utf8fromStringLoose(input));
  return loadExtra<{ percentEncodeAfterEncoding: typeof percentEncodeAfterEncoding }>('encodings').percentEncodeAfterEncoding(
    encoding,
    input,
    percentEncodeSet,
    spaceAsPlus,
  );
}
