"""The one timing helper the benchmark scripts share."""
import time

import numpy as np


def median_ms(fn, repeats=7):
    """Median wall time of fn() in milliseconds, after one warm-up call
    (which compiles and fills caches)."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e3
