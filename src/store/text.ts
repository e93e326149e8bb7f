/**
 * Text as the store keeps it, the same on either engine. PostgreSQL's text cannot hold NUL, and its
 * json and jsonb refuse the `\u0000` escape and lone surrogates (`\ud800`) that JSON.stringify
 * writes for them; SQLite keeps all three. So what code outside the server controls (what
 * integrations print, what receivers answer) has each NUL and each lone surrogate replaced by
 * U+FFFD, as a decoder replaces an invalid byte, before it is stored or shown; PostgreSQL's bind
 * does the same to any other text parameter (postgres/dialect.ts), so no write fails for it.
 */

/** U+FFFD, the replacement character: what a NUL or a lone surrogate becomes. */
export const REPLACEMENT = '\uFFFD';

export function storableText(text: string): string {
  const wellFormed = text.isWellFormed() ? text : text.toWellFormed();
  return wellFormed.includes('\u0000') ? wellFormed.replaceAll('\u0000', REPLACEMENT) : wellFormed;
}

/** Whether storableText would change `text`. */
export function needsMapping(text: string): boolean {
  return text.includes('\u0000') || !text.isWellFormed();
}
