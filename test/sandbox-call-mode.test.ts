/**
 * When an integration's guest calls stop running inline on the worker's thread (see CallMode in
 * src/sandbox/host/instance.ts): calls over SLOW_CALL_MS draw on an allowance of STALL_BURST_MS
 * refilled at 1 % of the clock; overdrawing it moves the integration off for five minutes. The
 * clock is injected: the refill takes seconds and the time apart minutes.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CallMode, SLOW_CALL_MS, STALL_BURST_MS } from '../src/sandbox/host/instance.ts';

function clocked() {
  let now = 1_000;
  const mode = new CallMode(() => now);
  return { mode, advance: (ms: number) => (now += ms) };
}

describe('the inline call mode', () => {
  it('ignores calls up to SLOW_CALL_MS, however many', () => {
    const { mode } = clocked();
    for (let i = 0; i < 10_000; i++) assert.equal(mode.charge(SLOW_CALL_MS), false);
    assert.equal(mode.inline(), true);
  });

  it('lets an occasional slow call through (a garbage collection) and refills the allowance at 1 % of the clock', () => {
    const { mode, advance } = clocked();
    assert.equal(mode.charge(13), false);
    assert.equal(mode.charge(13), false); // 4 ms of the allowance left
    assert.equal(mode.inline(), true);
    advance(1_000); // +10 ms
    assert.equal(mode.charge(13), false); // 1 ms left
    assert.equal(clocked().mode.charge(STALL_BURST_MS + 1), true, 'the burst is the whole allowance');
    advance(100_000); // refilled, but never past the burst
    assert.equal(mode.charge(STALL_BURST_MS), false);
    assert.equal(mode.charge(SLOW_CALL_MS + 1), true);
    assert.equal(mode.inline(), false);
  });

  it('refills at 1 % of the clock, no faster', () => {
    const { mode, advance } = clocked();
    assert.equal(mode.charge(25), false); // 5 ms left
    advance(500); // +5 ms: 10 left
    assert.equal(mode.charge(11), true, '10 ms of allowance do not cover an 11 ms call');
  });

  it('moves a slow call that overran (ran out of time) off at once, with the allowance still full', () => {
    const { mode } = clocked();
    assert.equal(mode.charge(SLOW_CALL_MS, true), false, 'a quick one is no stall');
    assert.equal(mode.inline(), true);
    assert.equal(mode.charge(SLOW_CALL_MS + 5, true), true);
    assert.equal(mode.inline(), false);
  });

  it('moves a call that overdraws the allowance off at once, for five minutes, and starts it afresh after', () => {
    const { mode, advance } = clocked();
    assert.equal(mode.charge(110), true); // one call at twice a 50 ms cpu_time, plus grace
    assert.equal(mode.inline(), false);
    advance(5 * 60_000 - 1);
    assert.equal(mode.inline(), false);
    advance(1);
    assert.equal(mode.inline(), true);
    assert.equal(mode.charge(STALL_BURST_MS), false, 'a full allowance again');
    assert.equal(mode.charge(SLOW_CALL_MS + 1), true);
  });
});
