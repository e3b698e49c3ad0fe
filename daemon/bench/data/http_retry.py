"""Retry helpers for HTTP requests made with urllib."""

from __future__ import annotations

import json
import logging
import random
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Tuple, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")

RETRYABLE_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


@dataclass
class RetryPolicy:
    """Configuration for exponential backoff with jitter."""

    max_attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 30.0
    multiplier: float = 2.0
    jitter: float = 0.1

    def delay_for(self, attempt: int) -> float:
        """Return the sleep time before the given (1-based) retry attempt."""
        delay = min(self.max_delay, self.base_delay * (self.multiplier ** (attempt - 1)))
        if self.jitter:
            spread = delay * self.jitter
            delay += random.uniform(-spread, spread)
        return max(0.0, delay)


class RetryError(Exception):
    """Raised when all retry attempts have been exhausted."""

    def __init__(self, attempts: int, last_error: BaseException) -> None:
        super().__init__(f"gave up after {attempts} attempts: {last_error}")
        self.attempts = attempts
        self.last_error = last_error


def _is_retryable(exc: BaseException) -> bool:
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code in RETRYABLE_STATUS
    if isinstance(exc, urllib.error.URLError):
        return True
    return isinstance(exc, (TimeoutError, ConnectionError))


def _retry_after(exc: BaseException) -> Optional[float]:
    if not isinstance(exc, urllib.error.HTTPError) or exc.headers is None:
        return None
    value = exc.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def retry(
    func: Callable[[], T],
    policy: Optional[RetryPolicy] = None,
    should_retry: Callable[[BaseException], bool] = _is_retryable,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call ``func`` until it succeeds or the policy gives up."""
    policy = policy or RetryPolicy()
    last_error: Optional[BaseException] = None
    for attempt in range(1, policy.max_attempts + 1):
        try:
            return func()
        except Exception as exc:  # noqa: BLE001 - filtered below
            last_error = exc
            if not should_retry(exc) or attempt == policy.max_attempts:
                break
            delay = _retry_after(exc) or policy.delay_for(attempt)
            logger.warning(
                "attempt %d/%d failed (%s); retrying in %.2fs",
                attempt,
                policy.max_attempts,
                exc,
                delay,
            )
            sleep(delay)
    assert last_error is not None
    if not should_retry(last_error):
        raise last_error
    raise RetryError(policy.max_attempts, last_error)


class HttpClient:
    """Tiny JSON client with retries built on the standard library."""

    def __init__(
        self,
        base_url: str,
        headers: Optional[Mapping[str, str]] = None,
        timeout: float = 10.0,
        policy: Optional[RetryPolicy] = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers: Dict[str, str] = {"Accept": "application/json"}
        if headers:
            self.headers.update(headers)
        self.timeout = timeout
        self.policy = policy or RetryPolicy()

    def _build(self, method: str, path: str, body: Any = None) -> urllib.request.Request:
        url = f"{self.base_url}/{path.lstrip('/')}"
        data = None
        headers = dict(self.headers)
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        return urllib.request.Request(url, data=data, headers=headers, method=method)

    def request(self, method: str, path: str, body: Any = None) -> Tuple[int, Any]:
        def attempt() -> Tuple[int, Any]:
            req = self._build(method, path, body)
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
                status = resp.status
            if not raw:
                return status, None
            return status, json.loads(raw.decode("utf-8"))

        return retry(attempt, self.policy)

    def get(self, path: str) -> Any:
        return self.request("GET", path)[1]

    def post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, body)[1]

    def delete(self, path: str) -> int:
        return self.request("DELETE", path)[0]


if __name__ == "__main__":
    logging.basicConfig(level=logging.DEBUG)
    client = HttpClient("https://httpbin.org", policy=RetryPolicy(max_attempts=3))
    try:
        print(client.get("/get"))
    except RetryError as err:
        logger.error("request failed: %s", err)
