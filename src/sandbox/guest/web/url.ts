/** URL and URLSearchParams: the WHATWG reference implementation (whatwg-url), bundled. */
export { URL, URLSearchParams } from 'whatwg-url';
