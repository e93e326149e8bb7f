/** Lazily loaded guest library part: full UTS #46 (IDNA) processing for non-ASCII hosts. */
export { toASCII, toUnicode } from '../../../../node_modules/tr46/index.js';
