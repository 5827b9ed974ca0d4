"""prometheus_client's documented gunicorn recipe: when a worker exits, the
master removes its live-gauge files with mark_process_dead. Any exception
here propagates into gunicorn's main loop and brings the master down."""

from prometheus_client import multiprocess


def child_exit(server, worker):
    multiprocess.mark_process_dead(worker.pid)
