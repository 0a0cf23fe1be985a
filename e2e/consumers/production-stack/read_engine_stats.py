"""Read a /metrics page the way vLLM production-stack's router does.

The router (src/vllm_router/stats/engine_stats.py) GETs url + "/metrics",
parses the text with prometheus_client.parser.text_string_to_metric_families
and walks every sample of every family, keeping for each of six sample
names the value of the last sample seen; a name that never appears keeps
its default of 0. This script applies that rule to a page read from stdin
and prints the six values as JSON, or {"error": ...} when the parser
rejects the page (the router then has no stats for the endpoint).
"""

import json
import sys

from prometheus_client.parser import text_string_to_metric_families

# Sample name -> the router's field.
READ = {
    "vllm:num_requests_running": "num_running_requests",
    "vllm:num_requests_waiting": "num_queuing_requests",
    "vllm:gpu_prefix_cache_hit_rate": "gpu_prefix_cache_hit_rate",
    "vllm:gpu_prefix_cache_hits_total": "gpu_prefix_cache_hits_total",
    "vllm:gpu_prefix_cache_queries_total": "gpu_prefix_cache_queries_total",
    "vllm:gpu_cache_usage_perc": "gpu_cache_usage_perc",
}


def main():
    text = sys.stdin.read()
    stats = {field: 0.0 for field in READ.values()}
    seen = []
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                field = READ.get(sample.name)
                if field is not None:
                    stats[field] = float(sample.value)
                    seen.append(field)
    except Exception as err:  # the router logs and skips the endpoint
        print(json.dumps({"error": str(err)}))
        return
    stats["seen"] = sorted(set(seen))
    print(json.dumps(stats))


if __name__ == "__main__":
    main()
