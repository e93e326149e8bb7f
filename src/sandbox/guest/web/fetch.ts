/**
 * fetch(): the request is normalised here and performed by the host, which applies the limits
 * (sub-requests per invocation, time-out, body size), the private-network policy and redirects.
 */
import { callHost, forget } from '../bridge.ts';
import { consume, getBody } from './body.ts';
import type { FetchResult } from './fetch-result.ts';
import { headerList } from './headers.ts';
import { Request, type RequestInit } from './request.ts';
import { fetchedResponse, type Response } from './response.ts';
import type { URL } from './url.ts';

export async function fetch(input: Request | string | URL, init?: RequestInit): Promise<Response> {
  const request = new Request(input, init);
  const signal = request.signal;
  signal.throwIfAborted();
  const body = getBody(request) ? await consume(request) : null;
  signal.throwIfAborted();
  let opId = 0;
  const result = await new Promise<FetchResult>((resolve, reject) => {
    const onAbort = () => {
      forget(opId);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    callHost<FetchResult>(
      'fetch',
      { method: request.method, url: request.url, headers: headerList(request.headers), body, redirect: request.redirect },
      (id) => (opId = id),
    ).then(
      (r) => {
        signal.removeEventListener('abort', onAbort);
        resolve(r);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
  return fetchedResponse(result);
}
