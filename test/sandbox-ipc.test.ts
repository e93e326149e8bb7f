/**
 * The IPC batcher between the server and the sandbox worker (src/sandbox/ipc.ts): one write per
 * event-loop turn, an early write past MAX_BATCH_BYTES, and a message that cannot be written failing
 * alone rather than taking its batch with it. Bytes cross as base64 and come back equal.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_BATCH_BYTES, batcher, bytesFromWire, bytesToWire } from '../src/sandbox/ipc.ts';

type Msg = { id: number; size?: number; bad?: boolean };
const turn = () => new Promise((r) => setImmediate(r));

describe('sandbox IPC', () => {
  it('writes what one turn queued in one batch, and a large batch early', async () => {
    const writes: number[][] = [];
    const send = batcher<Msg>(
      (b) => writes.push(b.map((m) => m.id)),
      () => assert.fail('no error expected'),
      (m) => m.size ?? 0,
    );
    for (let id = 1; id <= 3; id++) send({ id });
    assert.deepEqual(writes, [], 'nothing leaves before the turn ends');
    await turn();
    assert.deepEqual(writes, [[1, 2, 3]]);
    const half = MAX_BATCH_BYTES / 2 + 1;
    send({ id: 4, size: half });
    send({ id: 5, size: half }); // past the limit: leaves now, with what was queued before it
    send({ id: 6 });
    assert.deepEqual(writes.slice(1), [[4, 5]]);
    await turn();
    assert.deepEqual(writes.slice(1), [[4, 5], [6]]);
  });

  it('fails only the message that cannot be written', async () => {
    const written: number[] = [];
    const failed: number[] = [];
    const send = batcher<Msg>(
      (b) => {
        if (b.some((m) => m.bad)) throw new TypeError('Do not know how to serialize a BigInt');
        written.push(...b.map((m) => m.id));
      },
      (b, err) => {
        assert.match(err.message, /BigInt/);
        failed.push(...b.map((m) => m.id));
      },
    );
    send({ id: 1 });
    send({ id: 2, bad: true });
    send({ id: 3 });
    await turn();
    assert.deepEqual(written, [1, 3]);
    assert.deepEqual(failed, [2]);
  });

  it('carries bytes as base64, offsets and empty bodies included', () => {
    const pool = new Uint8Array([9, 9, 0, 255, 10, 13, 9]);
    const view = pool.subarray(2, 6);
    assert.deepEqual([...bytesFromWire(bytesToWire(view))], [0, 255, 10, 13]);
    assert.equal(bytesFromWire(bytesToWire(new Uint8Array(0))).byteLength, 0);
    assert.equal(bytesFromWire(undefined).byteLength, 0);
  });
});
