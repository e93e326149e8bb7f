/** The part of whatwg-url's state machine module that url.ts wraps (the package ships no types for it). */
declare module 'whatwg-url/lib/url-state-machine.js' {
  const usm: { basicURLParse(input: string, options?: Record<string, unknown>): import('../web/url-fast.ts').URLRecord | null };
  export default usm;
}
