// Stand-in for the 'wasi:random/random@0.2.12' import: the bytes come from a
// seed the test sets (or Node's crypto), and every request is recorded.

import { randomBytes } from 'node:crypto';

export const requests = [];
let fixed = null;

/** The next calls get `bytes` (an array), or fresh random bytes for null. */
export function setBytes(bytes) {
  fixed = bytes;
  requests.length = 0;
}

export function getRandomBytes(len) {
  requests.push(len);
  const count = Number(len);
  return fixed === null ? new Uint8Array(randomBytes(count)) : Uint8Array.from(fixed.slice(0, count));
}
