"""Randomized differential test, Python side (tests/integration/collector_diff.rs).

usage: collector_diff.py [--legacy-names] BASE FIRST_SEED COUNT
       collector_diff.py --reference DIR   (prints the four outputs as JSON)

With --legacy-names, metric and label names are only those every
prometheus_client release accepts (legacy Prometheus names), so that older
releases can read the directories (python_package_releases.rs).

For every seed in FIRST_SEED .. FIRST_SEED+COUNT-1 this script

1. builds a random scenario from the seed alone (families of every type and all
   ten gauge modes, unicode/escape-heavy names, labels and help, NaN, +-Inf,
   -0.0, 1e6..1e16, +-9e15 with fractions (sums depend on file order), tiny values, custom and negative buckets, help and gauge
   mode conflicts, pid reuse, forks inside a worker, mark_process_dead, and
   for about one seed in five a crowd of workers running the same code);
2. runs it with REAL forked processes writing BASE/seed-N/ through the real
   prometheus_client (process identifiers come from the scenario, so a seed
   replays to the same file names);
3. writes the reference outputs next to it, in BASE/seed-N.ref/:
   prom.txt, om.txt            generate_latest / openmetrics generate_latest of
                               MultiProcessCollector.merge(glob(DIR/*.db)),
                               i.e. MultiProcessCollector(path=DIR).collect()
   prom_noacc.txt, om_noacc.txt  the same with accumulate=False
   prom_E.txt, om_E.txt        the first two with escaping E (allow-utf-8,
                               dots, values), where the release has them
   scenario.json               the scenario, for people debugging a seed

Seeds run in two forked runners (the CI machines have two cores). Type
conflicts between files are never generated: there multiprom deliberately
differs from Python (docs/merge.md), and they have their own tests.
"""

import glob
import inspect
import json
import math
import os
import random
import sys
import time
import traceback

from prometheus_client import Counter, Gauge, Histogram, Summary, values
from prometheus_client.exposition import generate_latest
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.openmetrics.exposition import generate_latest as generate_latest_om

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from format_common import TRICKY, TRICKY_HELP  # noqa: E402

MODES = ['all', 'liveall', 'min', 'livemin', 'max', 'livemax',
         'sum', 'livesum', 'mostrecent', 'livemostrecent']
TYPES = ['counter', 'gauge', 'histogram', 'summary']

# Valid names for prometheus_client 0.26 (no legacy validation): anything but
# empty; label names anything but a `__` prefix.
NAME_STEMS = ['requests', 'ns:sub:latency', 'm\u00e9trique_\U0001F600', 'a.b-c d',
              '1leading_digit', 'x', 'tokens_total', 'caf\u00e9:\u65e5\u672c']
LABEL_NAMES = ['method', 'code', 'model', '\u00e9t\u00e9', 'a-b', 'x.y', '0lead',
               'Upper_Case9', '', 'le', 'quantile', 'pid', '_x']
# The names of those that every release accepts (`[a-zA-Z_:][a-zA-Z0-9_:]*`,
# label names without `:` and not `__`-prefixed).
LEGACY_NAME_STEMS = ['requests', 'ns:sub:latency', 'x', 'tokens_total']
LEGACY_LABEL_NAMES = ['method', 'code', 'model', 'Upper_Case9', 'le', 'quantile', 'pid', '_x']
HELPS = ['', 'Plain help.', TRICKY_HELP, 'quote " and backslash \\ and newline \n end',
         'h\u2028\u00e9\U0001F600', 'Total requests.']
# With two request paths long enough that their keys outgrow a page and a
# 64 KiB first read.
LABEL_VALUES = TRICKY + ['GET', 'POST', '200', '500', 'a b', '0', '-0.0', '+Inf',
                         '/' + 'long/' * 1000, '/' + 'longer/' * 10000]

SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, 0.1, 1e-05, 5e-324, 2.2250738585072014e-308,
           1.7976931348623157e308, -1.7976931348623157e308, math.inf, -math.inf,
           math.nan, 1234567.0, 1e6, 1e16, 1e17, 123456789012345.6, 9999999.999,
           0.30000000000000004, -1234567.0, 100.0, 1e-300, 4503599627370497.0]
BUCKET_SETS = [
    None,  # the default buckets
    [-5.0, -1.0, 0.0, 1.0],
    [1e6, 1e9, 1e16],
    [1e-9, 1e-3, 0.5],
    [-0.0, 0.0, 1.0],
    [0.1, 0.2, 0.30000000000000004],
    [-math.inf, 0.0],
    [1, 2.5, 1234567.0, 1.5e7, 1e300],
    [7.0],
    # Bounds whose exponent has two digits (prometheus_client before 0.26
    # wrote them `1e+010`).
    [1e10, 2.5e12, 1e15],
]


def random_value(rng, non_negative=False):
    r = rng.random()
    if r < 0.35:
        v = rng.choice(SPECIAL)
    elif r < 0.45:
        v = 10 ** rng.uniform(6, 16)
    elif r < 0.55:
        # Large values with a fraction: summed over several files (either
        # sign), the last digits depend on the order of the additions.
        v = rng.uniform(1e15, 9.2e15) + rng.random()
    elif r < 0.7:
        v = float(rng.randint(0, 10 ** rng.randint(1, 12)))
    elif r < 0.8:
        v = 10 ** rng.uniform(-20, -4)
    else:
        v = rng.uniform(-1000, 1000)
    if rng.random() < 0.25:
        v = -v
    if non_negative and (math.isnan(v) is False and v < 0):
        v = -v
    return v


def make_families(rng):
    families = []
    for i in range(rng.randint(1, 6)):
        typ = rng.choice(TYPES)
        stem = rng.choice(LEGACY_NAME_STEMS if LEGACY_NAMES else NAME_STEMS)
        # Unique per family (a shared name across types is a type conflict).
        name = f'{stem}_{i}' if rng.random() < 0.85 or LEGACY_NAMES else f'{i}{stem}'
        if typ == 'counter' and rng.random() < 0.3:
            name += '_total'  # stripped by Counter
        reserved = {'histogram': 'le', 'summary': 'quantile'}.get(typ)
        pool = [n for n in (LEGACY_LABEL_NAMES if LEGACY_NAMES else LABEL_NAMES) if n != reserved]
        labelnames = rng.sample(pool, rng.randint(0, 3))
        fam = {
            'type': typ,
            'name': name,
            'namespace': rng.choice(['', '', '', 'ns']),
            'unit': rng.choice(['', '', '', 'seconds']),
            'labelnames': labelnames,
            'helps': [rng.choice(HELPS)],
            'modes': [rng.choice(MODES)] if typ == 'gauge' else [None],
            'buckets': [rng.choice(BUCKET_SETS)] if typ == 'histogram' else [None],
        }
        # Conflicts Python resolves by file order (help: first; mode: last).
        if rng.random() < 0.2:
            fam['helps'].append(rng.choice(HELPS))
        if typ == 'gauge' and rng.random() < 0.2:
            fam['modes'].append(rng.choice(MODES))
        if typ == 'histogram' and rng.random() < 0.2:
            fam['buckets'].append(rng.choice(BUCKET_SETS))
        families.append(fam)
    return families


def make_ops(rng, families, variants):
    """Operations on the metric objects of one process."""
    ops = []
    for _ in range(rng.randint(0, 12)):
        m = rng.randrange(len(variants))
        fam = families[variants[m]['family']]
        labelvalues = [rng.choice(LABEL_VALUES) for _ in fam['labelnames']]
        typ = fam['type']
        if rng.random() < 0.1:
            ops.append([m, labelvalues, 'touch', None])
        elif typ == 'counter':
            ops.append([m, labelvalues, 'inc', random_value(rng, non_negative=True)])
        elif typ == 'gauge':
            if variants[m]['mode'].endswith('mostrecent'):
                ops.append([m, labelvalues, 'set', random_value(rng)])
            else:
                method = rng.choice(['set', 'set', 'inc', 'dec'])
                ops.append([m, labelvalues, method, random_value(rng)])
        else:
            ops.append([m, labelvalues, 'observe', random_value(rng)])
    return ops


def make_scenario(seed):
    rng = random.Random(seed)
    families = make_families(rng)
    ids = [str(i) for i in rng.sample(range(1, 100000), 8)]
    processes = []
    for p in range(rng.randint(1, 6)):
        # Sometimes a later process reuses an earlier id (pid reuse): it
        # reopens the old files and carries on from their values.
        ident = rng.choice([pr['id'] for pr in processes]) if processes and rng.random() < 0.15 \
            else ids[p]
        variants = []
        for f, fam in enumerate(families):
            if rng.random() < 0.8:
                variants.append({
                    'family': f,
                    'help': rng.choice(fam['helps']),
                    'mode': rng.choice(fam['modes']),
                    'buckets': rng.choice(fam['buckets']),
                })
        # Rarely two objects of one family in one process with different help:
        # two keys for one series, which Python's merge adds up.
        if variants and rng.random() < 0.1:
            twin = dict(rng.choice(variants))
            twin['help'] = twin['help'] + ' (twin)'
            variants.append(twin)
        if not variants:
            continue
        proc = {'id': ident, 'variants': variants, 'ops': make_ops(rng, families, variants)}
        if rng.random() < 0.2:
            proc['fork'] = {'id': ids[7 - p % 2] + str(p), 'ops': make_ops(rng, families, variants)}
        processes.append(proc)
    add_crowd(seed, families, processes)
    all_ids = sorted({p['id'] for p in processes} |
                     {p['fork']['id'] for p in processes if 'fork' in p})
    dead = [i for i in all_ids if rng.random() < 0.3]
    return {'seed': seed, 'families': families, 'processes': processes, 'dead': dead}


def add_crowd(seed, families, processes):
    """For about one seed in five, a crowd: many workers running the code of
    one or two of the processes, as an application server's workers do.
    Most repeat its operations with values of their own (their files hold
    the same keys in the same order), some with one operation left out or
    repeated (the keys after it move), some do something else. Enough files
    that a collector reads them on several threads and compares each file's
    keys with the last one's (docs/architecture.md).

    Drawn from a stream of its own: a seed without a crowd has the scenario
    it had before crowds existed. (With a crowd, which processes are marked
    dead changes too: every id draws from the seed's stream.)"""
    rng = random.Random(f'crowd-{seed}')
    if not processes or rng.random() >= 0.2:
        return
    for k, base in enumerate(rng.sample(processes, min(2, len(processes)))):
        for c in range(rng.randint(20, 40)):
            r = rng.random()
            if r < 0.8:
                ops = [revalue(rng, families, base['variants'], op) for op in base['ops']]
            elif r < 0.9 and base['ops']:
                ops = list(base['ops'])
                i = rng.randrange(len(ops))
                if rng.random() < 0.5:
                    del ops[i]
                else:
                    ops.insert(i, ops[i])
            else:
                ops = make_ops(rng, families, base['variants'])
            # Seven digits: no other process of a scenario has such an id.
            processes.append({'id': str(1000000 + 100 * k + c),
                              'variants': base['variants'], 'ops': ops})


def revalue(rng, families, variants, op):
    """`op` on the same series with a value of its own."""
    m, labelvalues, method, _ = op
    if method == 'touch':
        return op
    counter = families[variants[m]['family']]['type'] == 'counter'
    return [m, labelvalues, method, random_value(rng, non_negative=counter)]


def build_metric(fam, variant):
    kwargs = dict(registry=None, labelnames=fam['labelnames'], namespace=fam['namespace'],
                  unit=fam['unit'])
    typ = fam['type']
    if typ == 'counter':
        return Counter(fam['name'], variant['help'], **kwargs)
    if typ == 'gauge':
        return Gauge(fam['name'], variant['help'], multiprocess_mode=variant['mode'], **kwargs)
    if typ == 'histogram':
        if variant['buckets'] is not None:
            kwargs['buckets'] = variant['buckets']
        return Histogram(fam['name'], variant['help'], **kwargs)
    return Summary(fam['name'], variant['help'], **kwargs)


def run_ops(metrics, ops):
    for m, labelvalues, method, arg in ops:
        metric = metrics[m]
        child = metric.labels(*labelvalues) if labelvalues else metric
        if method != 'touch':
            getattr(child, method)(arg)


def wait_ok(pid, what):
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise RuntimeError(f'{what} failed with status {status}')


def run_process(scenario, proc, directory):
    """Body of one forked worker process."""
    os.environ['PROMETHEUS_MULTIPROC_DIR'] = directory
    ident = {'value': proc['id']}
    values.ValueClass = values.MultiProcessValue(lambda: ident['value'])
    families = scenario['families']
    metrics = [build_metric(families[v['family']], v) for v in proc['variants']]
    run_ops(metrics, proc['ops'])
    if 'fork' in proc:
        child = os.fork()
        if child == 0:
            try:
                # A forked child with a new identifier re-creates every key
                # its parent knew, in files named with its own id.
                ident['value'] = proc['fork']['id']
                run_ops(metrics, proc['fork']['ops'])
                os._exit(0)
            except BaseException:
                traceback.print_exc()
                os._exit(1)
        wait_ok(child, 'forked grandchild')


def generate(base, seed):
    scenario = make_scenario(seed)
    directory = os.path.join(base, f'seed-{seed}')
    ref = os.path.join(base, f'seed-{seed}.ref')
    os.makedirs(directory)
    os.makedirs(ref)
    with open(os.path.join(ref, 'scenario.json'), 'w') as f:
        json.dump(scenario, f, indent=1, default=repr)
    for proc in scenario['processes']:
        pid = os.fork()
        if pid == 0:
            try:
                run_process(scenario, proc, directory)
                os._exit(0)
            except BaseException:
                traceback.print_exc()
                os._exit(1)
        wait_ok(pid, f'seed {seed}: worker {proc["id"]}')
    for ident in scenario['dead']:
        mark_process_dead(ident, directory)

    for name, output in reference_outputs(directory).items():
        with open(os.path.join(ref, name), 'wb') as f:
            f.write(output)


def reference_files(directory):
    """`directory`'s files in the order Python's collector (and multiprom)
    merges them: glob's, the directory's listing order."""
    return glob.glob(os.path.join(directory, '*.db'))


def reference_outputs(directory):
    """Python's four outputs for `directory`, files merged in the order
    MultiProcessCollector.collect() takes them: glob's, the directory's."""
    files = reference_files(directory)

    class Merged:
        def __init__(self, accumulate):
            self.accumulate = accumulate

        def collect(self):
            return MultiProcessCollector.merge(files, accumulate=self.accumulate)

    outputs = {name: encode(Merged(accumulate))
               for name, encode, accumulate in [('prom.txt', generate_latest, True),
                                                ('om.txt', generate_latest_om, True),
                                                ('prom_noacc.txt', generate_latest, False),
                                                ('om_noacc.txt', generate_latest_om, False)]}
    # The other escaping schemes a scraper may ask for (Prometheus 3:
    # allow-utf-8), where this release has them.
    if 'escaping' in inspect.signature(generate_latest).parameters:
        for escaping in ESCAPINGS:
            outputs[f'prom_{escaping}.txt'] = generate_latest(Merged(True), escaping)
            outputs[f'om_{escaping}.txt'] = generate_latest_om(Merged(True), escaping)
    return outputs


# The escaping schemes besides the default underscores.
ESCAPINGS = ['allow-utf-8', 'dots', 'values']


# Set from the command line: only names every release accepts.
LEGACY_NAMES = False


def main():
    global LEGACY_NAMES
    if sys.argv[1] == '--legacy-names':
        LEGACY_NAMES = True
        del sys.argv[1]
    if sys.argv[1] == '--reference':
        outputs = reference_outputs(sys.argv[2])
        json.dump({k: v.decode('utf-8') for k, v in outputs.items()}, sys.stdout)
        return
    base, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    seeds = list(range(first, first + count))
    runners = []
    for part in (seeds[0::2], seeds[1::2]):
        pid = os.fork()
        if pid == 0:
            try:
                for seed in part:
                    generate(base, seed)
                os._exit(0)
            except BaseException:
                traceback.print_exc()
                os._exit(1)
        runners.append(pid)
    failed = False
    for pid in runners:
        _, status = os.waitpid(pid, 0)
        failed |= status != 0
    if failed:
        sys.exit('a seed runner failed (see above)')


if __name__ == '__main__':
    start = time.time()
    main()
    if sys.argv[1] != '--reference':
        sys.stderr.write(f'collector_diff.py: {sys.argv[3]} seeds in {time.time() - start:.1f}s\n')
