/** Stand-in for a side-effect import whose job the guest does lazily (see web/encoding.ts). */
export {};
