/**
 * The guest's types for @exodus/bytes/utf8.js (tsconfig.guest.json maps @exodus/bytes/* here). The
 * package's own reference Node's types (`/// <reference types="node" />`, for its Buffer output
 * format), which would put Node's globals into the guest's type-check although the guest runs in
 * a bare isolate; only the functions the guest uses are declared.
 */

/** UTF-8 bytes of a string, lone surrogates replaced by U+FFFD. */
export function utf8fromStringLoose(string: string): Uint8Array<ArrayBuffer>;

/** Decode UTF-8 with replacement, keeping a leading BOM as U+FEFF. */
export function utf8toStringLoose(bytes: Uint8Array): string;
