"""The handler's p95 latency over a fixed request mix, in milliseconds, as JSON."""

import json
import statistics
import time

import app

REQUESTS = [(i * 7919) % 25000 for i in range(200)]  # some ids do not exist: 404s


def main() -> None:
    times = []
    for user_id in REQUESTS:
        start = time.perf_counter()
        app.get_user(user_id)
        times.append((time.perf_counter() - start) * 1000)
    p95 = statistics.quantiles(times, n=20)[-1]
    print(json.dumps({"p95_ms": round(p95, 4)}))


if __name__ == "__main__":
    main()
