/** Lazily loaded guest library part: the multi-byte legacy encodings' tables. */
import { createMultibyteDecoder } from '@exodus/bytes/multi-byte.js';
import { multibyteEncoder } from '../../../../node_modules/@exodus/bytes/fallback/multi-byte.js';
import { setMultibyte } from '../../../../node_modules/@exodus/bytes/fallback/encoding.js';

// This bundle carries its own copy of the encoding module that whatwg.js uses: wire it up too.
setMultibyte(createMultibyteDecoder, multibyteEncoder);

export { createMultibyteDecoder, multibyteEncoder };
export { percentEncodeAfterEncoding } from '../../../../node_modules/@exodus/bytes/whatwg.js';
