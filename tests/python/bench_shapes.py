"""The metric shapes of the benchmark directories, shared by the maker
(bench_make_dir.py) and the live writers (bench_poll_writer.py), so the
writers add to the made directory's series instead of making new families.

A shape is a class: `Shape()` defines its metrics with the real
prometheus_client (PROMETHEUS_MULTIPROC_DIR must already be set), `work(rng)`
is what one exited worker did, `rounds()` gives the live writer's request
loop (each call of the returned function is one round of `OPS_PER_ROUND`
operations) and `NAMES` the sample names a router's filtered poll asks for.

* `bench`: a counter, a gauge in mode `all`, a gauge in mode `livesum` and
  a histogram with the default buckets, 10 label sets each: 4 files a worker.
* `exemplars`: `bench` with exemplars on counters and histograms, written
  by multiprom's writer (`MULTIPROM_INSTALL=writer`).
* `vllm`: the families a vLLM API server process writes (vllm/v1/metrics):
  7 counters, 3 gauges in mode `mostrecent`, 4 histograms of float latencies
  with vLLM's buckets, for 2 models x 2 engines: 3 files a worker.
"""

from prometheus_client import Counter, Gauge, Histogram


class Bench:
    NEEDS_WRITER = False
    FILES_PER_WORKER = 4
    OPS_PER_ROUND = 4
    LABELS = 10
    NAMES = ("bench_requests_total", "bench_running", "bench_latency_seconds_bucket",
             "bench_latency_seconds_sum", "bench_latency_seconds_count")
    # A family no name above asks for: its absence shows the server filtered.
    UNASKED = "bench_busy_ratio"

    def __init__(self):
        self.requests = Counter("bench_requests", "Requests served.", ["route", "code"])
        self.busy = Gauge("bench_busy_ratio", "Busy ratio per worker.", ["route"], multiprocess_mode="all")
        self.running = Gauge("bench_running", "Requests running.", ["route"], multiprocess_mode="livesum")
        self.latency = Histogram("bench_latency_seconds", "Request latency.", ["route"])

    def exemplar(self, rng):
        """The exemplar of one update: none here (and no draw from `rng`,
        so the values stay those of earlier runs)."""
        return None

    def work(self, rng, labels=LABELS):
        for i in range(labels):
            route = f"/api/v1/route{i}"
            self.requests.labels(route, "200").inc(rng.randint(1, 10_000), exemplar=self.exemplar(rng))
            self.busy.labels(route).set(rng.random())
            self.running.labels(route).set(rng.randint(0, 8))
            for _ in range(rng.randint(1, 20)):
                self.latency.labels(route).observe(rng.expovariate(4.0), exemplar=self.exemplar(rng))

    def rounds(self, rng):
        # Children looked up once, as an instrumented server keeps them.
        routes = [f"/api/v1/route{i}" for i in range(self.LABELS)]
        children = [(self.requests.labels(r, "200"), self.busy.labels(r), self.running.labels(r),
                     self.latency.labels(r)) for r in routes]
        index = 0

        def one_round():
            nonlocal index
            requests, busy, running, latency = children[index]
            index = (index + 1) % len(children)
            requests.inc(exemplar=self.exemplar(rng))
            latency.observe(rng.expovariate(4.0), exemplar=self.exemplar(rng))
            busy.set(rng.random())
            running.set(rng.randint(0, 8))

        return one_round


# vLLM's histogram buckets (vllm/v1/metrics/loggers.py).
TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
               20.0, 40.0, 80.0]
REQUEST_BUCKETS = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                   120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]
MODELS = ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-7B-Instruct")
ENGINES = ("0", "1")
REASONS = ("stop", "length", "abort")


class Vllm:
    NEEDS_WRITER = False
    FILES_PER_WORKER = 3
    # One finished request: 6 counter incs, 4 observes, 3 gauge sets.
    OPS_PER_ROUND = 13
    NAMES = ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
             "vllm:request_success_total", "vllm:prefix_cache_hits_total")
    UNASKED = "vllm:e2e_request_latency_seconds"

    def __init__(self):
        labels = ["model_name", "engine"]
        self.running = Gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
                             labels, multiprocess_mode="mostrecent")
        self.waiting = Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
                             labels, multiprocess_mode="mostrecent")
        self.kv_usage = Gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
                              labels, multiprocess_mode="mostrecent")
        self.preemptions = Counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
                                   labels)
        self.prefix_queries = Counter("vllm:prefix_cache_queries",
                                      "Prefix cache queries, in terms of number of queried tokens.", labels)
        self.prefix_hits = Counter("vllm:prefix_cache_hits",
                                   "Prefix cache hits, in terms of number of cached tokens.", labels)
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", labels)
        self.generation_tokens = Counter("vllm:generation_tokens", "Number of generation tokens processed.",
                                         labels)
        self.success = Counter("vllm:request_success", "Count of successfully processed requests.",
                               labels + ["finished_reason"])
        self.accepted = Counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", labels)
        self.ttft = Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                              labels, buckets=TTFT_BUCKETS)
        self.itl = Histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                             labels, buckets=ITL_BUCKETS)
        self.e2e = Histogram("vllm:e2e_request_latency_seconds",
                             "Histogram of e2e request latency in seconds.", labels, buckets=REQUEST_BUCKETS)
        self.queue = Histogram("vllm:request_queue_time_seconds",
                               "Histogram of time spent in WAITING phase for request.", labels,
                               buckets=REQUEST_BUCKETS)

    def _children(self):
        out = []
        for model in MODELS:
            for engine in ENGINES:
                labels = (model, engine)
                out.append({
                    "labels": labels,
                    "running": self.running.labels(*labels), "waiting": self.waiting.labels(*labels),
                    "kv_usage": self.kv_usage.labels(*labels),
                    "preemptions": self.preemptions.labels(*labels),
                    "prefix_queries": self.prefix_queries.labels(*labels),
                    "prefix_hits": self.prefix_hits.labels(*labels),
                    "prompt_tokens": self.prompt_tokens.labels(*labels),
                    "generation_tokens": self.generation_tokens.labels(*labels),
                    "success": {r: self.success.labels(*labels, r) for r in REASONS},
                    "accepted": self.accepted.labels(*labels),
                    "ttft": self.ttft.labels(*labels), "itl": self.itl.labels(*labels),
                    "e2e": self.e2e.labels(*labels), "queue": self.queue.labels(*labels),
                })
        return out

    @staticmethod
    def _request(c, rng):
        """One finished request, as vLLM's frontend records it."""
        prompt = rng.randint(16, 4096)
        generated = rng.randint(1, 1024)
        cached = rng.randint(0, prompt)
        c["prompt_tokens"].inc(prompt)
        c["generation_tokens"].inc(generated)
        c["prefix_queries"].inc(prompt)
        c["prefix_hits"].inc(cached)
        c["accepted"].inc(rng.randint(0, generated))
        c["success"][rng.choices(REASONS, (90, 9, 1))[0]].inc()
        ttft = rng.lognormvariate(-2.5, 1.0)
        itl = rng.lognormvariate(-3.5, 0.5)
        queue = rng.expovariate(20.0)
        c["ttft"].observe(ttft)
        c["itl"].observe(itl)
        c["queue"].observe(queue)
        c["e2e"].observe(queue + ttft + itl * generated)
        c["running"].set(rng.randint(0, 256))
        c["waiting"].set(rng.randint(0, 64))
        c["kv_usage"].set(rng.random())

    def work(self, rng):
        for c in self._children():
            for _ in range(rng.randint(1, 20)):
                self._request(c, rng)
            if rng.random() < 0.1:
                c["preemptions"].inc(rng.randint(1, 5))

    def rounds(self, rng):
        children = self._children()
        index = 0

        def one_round():
            nonlocal index
            self._request(children[index], rng)
            index = (index + 1) % len(children)

        return one_round


class Exemplars(Bench):
    """`bench` with an exemplar on every counter increment and histogram
    observation, as a traced application records them. Needs multiprom's
    writer (`MULTIPROM_INSTALL=writer`): prometheus_client drops exemplars
    in multiprocess mode."""

    NEEDS_WRITER = True

    def exemplar(self, rng):
        return {"trace_id": f"{rng.getrandbits(128):032x}"}


SHAPES = {"bench": Bench, "vllm": Vllm, "exemplars": Exemplars}
