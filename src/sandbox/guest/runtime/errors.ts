/**
 * The one error an integration throws to show a message to the caller: its message and status
 * (default 400) are answered as JSON `{ "error": message }`. Any other thrown error is answered as
 * 500 `{"error":"Internal server error"}`, its stack going only to the integration's logs.
 */
export class ExposableError extends Error {
  readonly statusCode: number;
  constructor(message: string, statusCode = 400) {
    super(message);
    this.name = 'ExposableError';
    const s = Math.trunc(Number(statusCode));
    this.statusCode = s >= 400 && s <= 599 ? s : 400;
  }
  /** Alias of statusCode. */
  get status(): number {
    return this.statusCode;
  }
  /** Alias of statusCode, under GitBook's name. */
  get code(): number {
    return this.statusCode;
  }
}
