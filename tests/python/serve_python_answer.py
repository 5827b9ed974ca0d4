"""What prometheus_client itself answers GET /metrics with, for a given
Accept header, over a multiprocess directory (tests/integration/serve.rs).

usage: serve_python_answer.py write       (PROMETHEUS_MULTIPROC_DIR set)
       serve_python_answer.py answer DIR ACCEPT
       serve_python_answer.py serve DIR

`write` has a forked worker write vLLM-like metrics (`vllm:` names, which
the escaping schemes treat apart) and names that are not legacy
Prometheus names (a `.` in a label name, UTF-8 in a metric name).
`answer` prints the Content-Type prometheus_client's make_wsgi_app sends
on one line, then the body, for a registry holding prometheus_client's own
MultiProcessCollector. `serve` serves that registry with start_http_server
on a free loopback port, as an application does, until killed, and says
`http://ADDR/metrics` on stderr.
"""

import os
import sys


def write():
    pid = os.fork()
    if pid == 0:
        try:
            from prometheus_client import Counter, Gauge, Histogram
            Counter('vllm:prompt_tokens', 'Prompt tokens.', ['model_name']).labels('m').inc(7)
            Gauge('vllm:num_requests_running', 'Running.', ['model.name'],
                  multiprocess_mode='livesum').labels('m').set(2)
            Histogram('vllm:e2e_request_latency_seconds', 'Latency.', ['model_name'],
                      buckets=(0.5, 1.0)).labels('m').observe(0.7)
            Counter('caf\u00e9_orders', 'Orders.').inc()
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        sys.exit('worker failed')


def registry_of(path):
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=path)
    return registry


def answer(path, accept):
    from prometheus_client import make_wsgi_app
    registry = registry_of(path)
    sent = []
    environ = {'REQUEST_METHOD': 'GET', 'PATH_INFO': '/metrics', 'QUERY_STRING': '',
               'HTTP_ACCEPT': accept}
    body = b''.join(make_wsgi_app(registry)(environ, lambda status, headers: sent.append(headers)))
    sys.stdout.buffer.write(dict(sent[0])['Content-Type'].encode() + b'\n' + body)


def serve(path):
    import time
    from prometheus_client import start_http_server
    server, _ = start_http_server(0, addr='127.0.0.1', registry=registry_of(path))
    print(f'http://127.0.0.1:{server.server_port}/metrics', file=sys.stderr, flush=True)
    while True:
        time.sleep(3600)


if __name__ == '__main__':
    if sys.argv[1] == 'write':
        write()
    elif sys.argv[1] == 'answer':
        answer(sys.argv[2], sys.argv[3])
    else:
        serve(sys.argv[2])
