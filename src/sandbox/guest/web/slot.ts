/**
 * Internal state attached to an object, out of integration code's reach, with WeakMap's get, set
 * and has: a private field stamped onto the object (a base class whose constructor returns the
 * object it is given lets a subclass add its field to any object). A WeakMap entry is an ephemeron
 * for V8's collector to trace; a public request made about ten (its Request, Response, their
 * Headers and bodies), and the guest spent a large part of each request collecting them.
 */
class Stamp {
  constructor(o: object) {
    // biome-ignore lint/correctness/noConstructorReturn: the point of the class (above)
    return o;
  }
}

export interface Slot<T> {
  get(o: unknown): T | undefined;
  has(o: unknown): boolean;
  set(o: object, value: T): void;
}

const isObject = (o: unknown): o is object => (typeof o === 'object' && o !== null) || typeof o === 'function';

export function slot<T>(): Slot<T> {
  class Field extends Stamp {
    #value: T | undefined;
    static has(o: unknown): boolean {
      return isObject(o) && #value in o;
    }
    static get(o: unknown): T | undefined {
      return isObject(o) && #value in o ? (o as Field).#value : undefined;
    }
    static set(o: object, value: T): void {
      if (!isObject(o)) throw new TypeError('Invalid value used as weak map key');
      if (!(#value in o)) new Field(o);
      (o as Field).#value = value;
    }
  }
  return { has: Field.has, get: Field.get, set: Field.set };
}
