'use strict';

/**
 * A small synchronous event bus with support for one-shot listeners,
 * namespaced events ("user:login") and wildcard subscriptions ("user:*", "*").
 */

const WILDCARD = '*';
const SEPARATOR = ':';

function matches(pattern, eventName) {
  if (pattern === WILDCARD || pattern === eventName) {
    return true;
  }
  const patternParts = pattern.split(SEPARATOR);
  const nameParts = eventName.split(SEPARATOR);
  for (let i = 0; i < patternParts.length; i++) {
    const part = patternParts[i];
    if (part === WILDCARD) {
      if (i === patternParts.length - 1) {
        return nameParts.length >= patternParts.length;
      }
      continue;
    }
    if (part !== nameParts[i]) {
      return false;
    }
  }
  return patternParts.length === nameParts.length;
}

class EventBus {
  constructor(options = {}) {
    this._listeners = new Map();
    this._maxListeners = options.maxListeners ?? 20;
    this._onError = options.onError || ((err, eventName) => {
      console.error(`[EventBus] listener for "${eventName}" threw:`, err);
    });
  }

  on(pattern, handler, context = null) {
    if (typeof handler !== 'function') {
      throw new TypeError('handler must be a function');
    }
    const list = this._listeners.get(pattern) || [];
    if (list.length >= this._maxListeners) {
      console.warn(
        `[EventBus] possible leak: ${list.length + 1} listeners for "${pattern}"`
      );
    }
    list.push({ handler, context, once: false });
    this._listeners.set(pattern, list);
    return () => this.off(pattern, handler);
  }

  once(pattern, handler, context = null) {
    const unsubscribe = this.on(pattern, handler, context);
    const list = this._listeners.get(pattern);
    list[list.length - 1].once = true;
    return unsubscribe;
  }

  off(pattern, handler) {
    if (pattern === undefined) {
      this._listeners.clear();
      return this;
    }
    if (handler === undefined) {
      this._listeners.delete(pattern);
      return this;
    }
    const list = this._listeners.get(pattern);
    if (!list) {
      return this;
    }
    const remaining = list.filter((entry) => entry.handler !== handler);
    if (remaining.length) {
      this._listeners.set(pattern, remaining);
    } else {
      this._listeners.delete(pattern);
    }
    return this;
  }

  emit(eventName, ...args) {
    if (typeof eventName !== 'string' || eventName.length === 0) {
      throw new TypeError('eventName must be a non-empty string');
    }
    let called = 0;
    for (const [pattern, list] of Array.from(this._listeners.entries())) {
      if (!matches(pattern, eventName)) {
        continue;
      }
      for (const entry of list.slice()) {
        if (entry.once) {
          this.off(pattern, entry.handler);
        }
        try {
          entry.handler.apply(entry.context, [...args, { event: eventName, pattern }]);
        } catch (err) {
          this._onError(err, eventName);
        }
        called++;
      }
    }
    return called;
  }

  waitFor(eventName, timeoutMs = 0) {
    return new Promise((resolve, reject) => {
      let timer = null;
      const unsubscribe = this.once(eventName, (...args) => {
        if (timer) {
          clearTimeout(timer);
        }
        resolve(args.length > 2 ? args.slice(0, -1) : args[0]);
      });
      if (timeoutMs > 0) {
        timer = setTimeout(() => {
          unsubscribe();
          reject(new Error(`timed out waiting for "${eventName}"`));
        }, timeoutMs);
      }
    });
  }

  listenerCount(pattern) {
    if (pattern === undefined) {
      let total = 0;
      for (const list of this._listeners.values()) {
        total += list.length;
      }
      return total;
    }
    const list = this._listeners.get(pattern);
    return list ? list.length : 0;
  }

  eventNames() {
    return Array.from(this._listeners.keys());
  }
}

module.exports = { EventBus, matches };
