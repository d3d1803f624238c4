"""cjit's main job, for now: k-means clustering of handwritten digits.

Each k-means step (distances to every centroid, nearest centroid, new
centroids as means of their members) is one jitted function: a matmul, a
row reduction, an argmin, a one-hot matmul and a division, compiled by cjit
into a few fused kernels.  The script prints the clustering quality, the
time per step for cjit and for the same code in NumPy, the first-call
compile time, the cache behaviour and the compiled plan's memory figures.
"""
import time

import numpy as np

import cjit
import cjit.numpy as cnp
import cjit.nn


def load_digits():
    try:
        from sklearn.datasets import load_digits as sk_load
    except ImportError:  # scikit-learn is an optional extra
        print("scikit-learn not installed: using synthetic blobs instead of the digits")
        rng = np.random.default_rng(0)
        centers = rng.normal(size=(10, 64)) * 4
        labels = rng.integers(0, 10, size=1797)
        return (centers[labels] + rng.normal(size=(1797, 64))).astype(np.float32), labels
    d = sk_load()
    return (d.data / 16.0).astype(np.float32), d.target


def kmeans_step(x, centroids):
    """One Lloyd step: assign each point to its nearest centroid, then move
    every centroid to the mean of its points.  Returns (centroids, inertia)."""
    # |x - c|^2 = |x|^2 - 2 x.c + |c|^2, all points against all centroids at once
    d2 = (x * x).sum(axis=1, keepdims=True) - 2.0 * (x @ centroids.T) + (centroids * centroids).sum(axis=1)
    nearest = cnp.argmin(d2, axis=1)
    member = cjit.nn.one_hot(nearest, centroids.shape[0], dtype=x.dtype)  # (n, k)
    counts = member.sum(axis=0)                                            # (k,)
    sums = member.T @ x                                                    # (k, features)
    safe = cnp.maximum(counts, 1.0)[:, None]
    new_centroids = cnp.where(counts[:, None] > 0, sums / safe, centroids)
    inertia = cnp.min(d2, axis=1).sum()
    return new_centroids, inertia


def kmeans_step_numpy(x, centroids):
    d2 = (x * x).sum(axis=1, keepdims=True) - 2.0 * (x @ centroids.T) + (centroids * centroids).sum(axis=1)
    nearest = np.argmin(d2, axis=1)
    member = np.eye(centroids.shape[0], dtype=x.dtype)[nearest]
    counts = member.sum(axis=0)
    sums = member.T @ x
    new_centroids = np.where(counts[:, None] > 0, sums / np.maximum(counts, 1.0)[:, None], centroids)
    return new_centroids, d2.min(axis=1).sum()


def purity(x, centroids, labels):
    d2 = ((x[:, None, :] - centroids[None, :, :]) ** 2).sum(-1)
    nearest = d2.argmin(1)
    total = 0
    for k in range(centroids.shape[0]):
        members = labels[nearest == k]
        if members.size:
            total += np.bincount(members).max()
    return total / len(labels)


def median_time(fn, repeats=30):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main():
    x, labels = load_digits()
    k = 10
    rng = np.random.default_rng(1)
    init = x[rng.choice(len(x), size=k, replace=False)].copy()
    step = cjit.jit(kmeans_step)

    t0 = time.perf_counter()
    centroids, inertia = step(x, init)
    first_call = time.perf_counter() - t0
    for _ in range(49):
        centroids, inertia = step(x, centroids)

    ref = init
    for _ in range(50):
        ref, ref_inertia = kmeans_step_numpy(x, ref)

    print(f"k-means on {x.shape[0]} digits of {x.shape[1]} pixels, k={k}, 50 steps")
    print(f"  inertia: cjit {float(inertia):.2f}   numpy {float(ref_inertia):.2f}")
    print(f"  cluster purity (share of points whose cluster's majority label matches): {purity(x, centroids, labels):.3f}")
    print(f"  max |centroid difference| cjit vs numpy: {np.abs(centroids - ref).max():.2e}")

    t_cjit = median_time(lambda: step(x, init))
    t_numpy = median_time(lambda: kmeans_step_numpy(x, init))
    print(f"  step time (median): cjit {t_cjit * 1e6:.0f} us   numpy {t_numpy * 1e6:.0f} us   "
          f"speed-up {t_numpy / t_cjit:.2f}x")
    print(f"  first call (trace + compile + run): {first_call * 1e3:.1f} ms")

    print(f"  cache: {step.cache_info()}   process: {cjit.cache_info()}")
    compiled = step.lower(x, init).compile()
    mem = compiled.memory_analysis()
    print(f"  compiled step: {mem.num_kernels} kernels, arguments {mem.argument_size_in_bytes} B, "
          f"outputs {mem.output_size_in_bytes} B, temporaries {mem.temp_size_in_bytes} B, "
          f"peak {mem.peak_memory_in_bytes} B")
    print(f"  cost: {compiled.cost_analysis()}")


if __name__ == "__main__":
    main()
