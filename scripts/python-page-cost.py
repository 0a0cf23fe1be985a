#!/usr/bin/python3
"""What one GET /metrics costs vLLM's API server to answer.

vLLM's API server serves /metrics from a prometheus_client CollectorRegistry
holding a MultiProcessCollector whenever PROMETHEUS_MULTIPROC_DIR is set (as
it is with several API-server or engine processes): every request reads and
merges the metric files of every writing process and renders the page anew
(and gzips it when the client asks). This script rebuilds a page of the
same families, label sets and buckets as a real V1 dump in that mode and
times the rendering, then prints what N consumers polling every 50 ms cost
against one sidecar scrape per interval.

    python3 scripts/python-page-cost.py [--page FILE] [--writers N] [--requests N]

Needs Debian's python3-prometheus-client (apt-get install -y
python3-prometheus-client). Only the Python side is timed: the ASGI and
HTTP layers of the API server come on top.
"""

import argparse
import gzip
import importlib.metadata
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_PAGE = os.path.join(ROOT, "testdata", "fixtures", "13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom")


def families(text):
    """The page's families, as (name, type, help, {labels-without-le: {le: value, or None: value}})."""
    from prometheus_client.parser import text_string_to_metric_families

    out = []
    for fam in text_string_to_metric_families(text):
        # _created series exist only in single-process mode; the process
        # and python collectors are not part of the multiprocess registry.
        if fam.name.endswith("_created") or fam.name.startswith(("process_", "python_")):
            continue
        if fam.type not in ("counter", "gauge", "histogram"):
            continue
        series = {}
        for s in fam.samples:
            if s.name.endswith("_created"):
                continue
            labels = {k: v for k, v in s.labels.items() if k != "le"}
            key = tuple(sorted(labels.items()))
            d = series.setdefault(key, {})
            if s.name.endswith("_bucket"):
                d[float(s.labels["le"])] = s.value
            elif s.name.endswith("_sum"):
                d["sum"] = s.value
            elif not s.name.endswith("_count"):
                d["value"] = s.value
        out.append((fam.name, fam.type, fam.documentation, series))
    return out


def write(fams, writer):
    """Record every series in this process's multiprocess files."""
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

    reg = CollectorRegistry()  # a throwaway: the values land in the mmap files
    for name, typ, doc, series in fams:
        if not series:
            continue
        labelnames = [k for k, _ in next(iter(series))]
        if typ == "counter":
            m = Counter(name.removesuffix("_total"), doc, labelnames, registry=reg)
        elif typ == "gauge":
            m = Gauge(name, doc, labelnames, registry=reg, multiprocess_mode="sum")
        else:
            bounds = sorted(b for d in series.values() for b in d if isinstance(b, float))
            bounds = sorted(set(bounds))
            m = Histogram(name, doc, labelnames, registry=reg, buckets=bounds)
        for key, d in series.items():
            child = m.labels(*[v for _, v in key]) if labelnames else m
            if typ == "counter":
                child.inc(d.get("value", 0) + writer)
            elif typ == "gauge":
                child.set(d.get("value", 0))
            else:
                # Set bucket counts directly (prometheus_client keeps them
                # per bucket, not cumulative); observing one value per count
                # would take minutes on a busy server's numbers.
                prev = 0.0
                for j, b in enumerate(sorted(x for x in d if isinstance(x, float))):
                    child._buckets[j].inc(max(0.0, d[b] - prev))
                    prev = d[b]
                child._sum.inc(d.get("sum", 0))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--page", default=DEFAULT_PAGE, help="a real vLLM page whose families to rebuild (default: fixture 13, V1)")
    ap.add_argument("--writers", type=int, default=1, help="processes writing metric files (API servers and engines)")
    ap.add_argument("--requests", type=int, default=300, help="pages rendered and timed")
    ap.add_argument("--sidecar-interval", type=float, default=1.0, help="seconds between the sidecar's scrapes")
    args = ap.parse_args()

    tmp = tempfile.TemporaryDirectory(prefix="prom-multiproc-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tmp.name
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector

    with open(args.page) as f:
        fams = families(f.read())
    for w in range(args.writers):
        pid = os.fork()
        if pid == 0:
            write(fams, w)
            os._exit(0)
        os.waitpid(pid, 0)

    # What the API server builds once at start-up and renders per request.
    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    page = generate_latest(registry)
    lines = [l for l in page.split(b"\n") if l and not l.startswith(b"#")]

    def timed(fn):
        cpu, wall = [], []
        for _ in range(args.requests):
            c0, w0 = time.process_time(), time.perf_counter()
            fn()
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - w0)
        return statistics.median(cpu) * 1e3, statistics.median(wall) * 1e3

    text_cpu, text_wall = timed(lambda: generate_latest(registry))
    gz_cpu, gz_wall = timed(lambda: gzip.compress(generate_latest(registry)))

    print("prometheus_client %s, Python %s, PROMETHEUS_MULTIPROC_DIR with %d writing process(es)"
          % (importlib.metadata.version("prometheus_client"), sys.version.split()[0], args.writers))
    print("page: %d bytes, %d samples, rebuilt from %s" % (len(page), len(lines), os.path.basename(args.page)))
    print("per request (median of %d): text %.2f ms CPU (%.2f ms wall); text+gzip %.2f ms CPU (%.2f ms wall)"
          % (args.requests, text_cpu, text_wall, gz_cpu, gz_wall))
    per_sec = 1 / 0.05
    print()
    print("consumers polling every 50 ms | vLLM API-server CPU, share of one core (text / gzip)")
    for n in (1, 2, 4, 8, 16):
        print("%29d | %5.1f %% / %5.1f %%" % (n, n * per_sec * text_cpu / 10, n * per_sec * gz_cpu / 10))
    print("one sidecar scrape every %gs  | %5.2f %% (gzip)" % (args.sidecar_interval, gz_cpu / args.sidecar_interval / 10))


if __name__ == "__main__":
    main()
