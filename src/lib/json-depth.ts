/** How deep incoming JSON may nest: shared by the HTTP layer (bodies) and the runtime and events (envelopes, events). */

/**
 * Deepest nesting of arrays and objects a JSON body, an event or an envelope field may have.
 * JSON.parse takes far deeper input, but copying it into the sandbox recurses and fails there (a 503
 * for what is bad input), so every door by which JSON comes in refuses it as a 400.
 */
export const MAX_JSON_DEPTH = 64;

/** True when `value` nests arrays/objects deeper than `max` levels (walked without recursion). */
export function nestedDeeperThan(value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (!v || typeof v !== 'object') continue;
    if (depth > max) return true;
    for (const child of Object.values(v)) if (child && typeof child === 'object') stack.push([child, depth + 1]);
  }
  return false;
}
