/** URL and URLSearchParams: the WHATWG reference implementation (whatwg-url), bundled, with a fast path for plain http(s) URLs (url-fast.ts). */
import usm from 'whatwg-url/lib/url-state-machine.js';
import { installFastPath } from './url-fast.ts';

installFastPath(usm);

export { URL, URLSearchParams } from 'whatwg-url';
