/**
 * The guest's global scope, for its type-check (tsconfig.guest.json): a bare V8 isolate has the
 * language's globals (lib es2024) and its own `console`, which index.ts replaces with the guest's
 * (web/console.ts), as it installs the Web APIs. Library code imports what it uses from its own
 * modules (the globals are installed only after they have all loaded), so only what is named
 * without an import is declared: `console` (web/events.ts reports a listener's error through the
 * global one, as a browser does) and the types that the declarations for integration authors
 * (runtime.d.ts, runtime-oauth.d.ts, written against lib "dom") name: Console, Request, Response.
 */
declare global {
  var console: typeof import('../web/console.ts').console;
  type Console = typeof console;
  type Request = import('../web/request.ts').Request;
  type Response = import('../web/response.ts').Response;
}

export {};
