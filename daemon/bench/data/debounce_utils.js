'use strict';

/**
 * Timing and caching helpers: debounce, throttle, memoize and once.
 */

function now() {
  return Date.now();
}

/**
 * Delay invoking `fn` until `wait` ms have elapsed since the last call.
 * Supports leading/trailing edges and a maxWait ceiling.
 */
function debounce(fn, wait = 100, options = {}) {
  const leading = Boolean(options.leading);
  const trailing = options.trailing !== false;
  const maxWait = options.maxWait;

  let timer = null;
  let lastArgs = null;
  let lastThis = null;
  let lastCallTime = 0;
  let lastInvokeTime = 0;
  let result;

  function invoke(time) {
    const args = lastArgs;
    const ctx = lastThis;
    lastArgs = lastThis = null;
    lastInvokeTime = time;
    result = fn.apply(ctx, args);
    return result;
  }

  function remainingWait(time) {
    const sinceCall = time - lastCallTime;
    const sinceInvoke = time - lastInvokeTime;
    const waitLeft = wait - sinceCall;
    return maxWait === undefined ? waitLeft : Math.min(waitLeft, maxWait - sinceInvoke);
  }

  function shouldInvoke(time) {
    const sinceCall = time - lastCallTime;
    const sinceInvoke = time - lastInvokeTime;
    return (
      lastCallTime === 0 ||
      sinceCall >= wait ||
      sinceCall < 0 ||
      (maxWait !== undefined && sinceInvoke >= maxWait)
    );
  }

  function timerExpired() {
    const time = now();
    if (shouldInvoke(time)) {
      timer = null;
      if (trailing && lastArgs) {
        invoke(time);
      }
      lastArgs = lastThis = null;
      return;
    }
    timer = setTimeout(timerExpired, remainingWait(time));
  }

  function debounced(...args) {
    const time = now();
    const isInvoking = shouldInvoke(time);
    lastArgs = args;
    lastThis = this;
    lastCallTime = time;

    if (isInvoking && timer === null) {
      lastInvokeTime = time;
      timer = setTimeout(timerExpired, wait);
      return leading ? invoke(time) : result;
    }
    if (timer === null) {
      timer = setTimeout(timerExpired, wait);
    }
    return result;
  }

  debounced.cancel = function cancel() {
    if (timer !== null) {
      clearTimeout(timer);
    }
    timer = lastArgs = lastThis = null;
    lastCallTime = lastInvokeTime = 0;
  };

  debounced.flush = function flush() {
    if (timer === null) {
      return result;
    }
    clearTimeout(timer);
    timer = null;
    return lastArgs ? invoke(now()) : result;
  };

  debounced.pending = () => timer !== null;

  return debounced;
}

/**
 * Invoke `fn` at most once every `wait` ms.
 */
function throttle(fn, wait = 100, options = {}) {
  return debounce(fn, wait, {
    leading: options.leading !== false,
    trailing: options.trailing !== false,
    maxWait: wait,
  });
}

/**
 * Cache results of `fn` keyed by `resolver(...args)` (first argument by default).
 * An optional `maxSize` evicts the oldest entry when exceeded.
 */
function memoize(fn, { resolver, maxSize = Infinity } = {}) {
  if (typeof fn !== 'function') {
    throw new TypeError('Expected a function');
  }
  const cache = new Map();

  function memoized(...args) {
    const key = resolver ? resolver.apply(this, args) : args[0];
    if (cache.has(key)) {
      return cache.get(key);
    }
    const value = fn.apply(this, args);
    cache.set(key, value);
    if (cache.size > maxSize) {
      const oldest = cache.keys().next().value;
      cache.delete(oldest);
    }
    return value;
  }

  memoized.cache = cache;
  memoized.clear = () => cache.clear();
  return memoized;
}

/**
 * Ensure `fn` runs only once; later calls return the first result.
 */
function once(fn) {
  let called = false;
  let value;
  return function onceWrapper(...args) {
    if (!called) {
      called = true;
      value = fn.apply(this, args);
    }
    return value;
  };
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

module.exports = {
  debounce,
  throttle,
  memoize,
  once,
  sleep,
};
