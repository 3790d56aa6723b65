"""bench/dask.sh's measurements: for 3 shard files (30 MB) and 30 (300 MB),
RUNS paired runs of
  cli   lipi count --threads 2 -o C SHARDS; lipi train --from-counts C
  dask  lipi.dask.count(SHARDS, client) on 2 workers (1 thread each), then
        lipi.train(from_counts=...) in this process (count's default cut:
        2 shards per worker thread, whole files kept together)
  dask/file  the same with cut=lipi.dask.shards(SHARDS): one task per
        shard file
with wall times and CPU seconds (user + sys, all processes; median), the
paired ratios (each round's dask / cli; median) and peak RSS. The cluster
is started once per size (timed apart, not in the runs: users have one
running) and fresh; the peak RSS of the workers and the driver are reset
after it starts (/proc/self/clear_refs), so they are this size's."""
import glob
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import distributed

import lipi
import lipi.dask


def reset_peak():
    """Starts this process's peak RSS afresh (Linux: /proc/self/clear_refs).
    Workers forked from this process inherit its peak, and the driver's
    would carry the previous size's: each size reads its own."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_kb():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def cli_run(lipi_bin, shards, vocab, tmp):
    counts = os.path.join(tmp, "cli.tsv")
    t0 = time.monotonic()
    rss, cpu = [], 0.0
    for cmd in ([lipi_bin, "count", "--quiet", "--threads", "2", "-o", counts, *shards],
                [lipi_bin, "train", "--quiet", "--from-counts", counts, "--vocab-size", str(vocab),
                 "-o", os.path.join(tmp, "cli.json")]):
        r = subprocess.run(["/usr/bin/time", "-f", "%M %U %S", *cmd], stderr=subprocess.PIPE,
                           check=True)
        m, u, s = r.stderr.decode().split()[-3:]
        rss.append(int(m))
        cpu += float(u) + float(s)
    return time.monotonic() - t0, rss, counts, cpu


def dask_run(client, shards, vocab, tmp, per_file):
    c0 = sum(client.run(cpu_s).values()) + cpu_s()
    t0 = time.monotonic()
    if per_file:  # the count tasks of the default cut, one per file
        path = lipi.dask.count(shards, client, os.path.join(tmp, "dask"),
                               cut=lipi.dask.shards(shards))
    else:
        path = lipi.dask.count(shards, client, os.path.join(tmp, "dask"))
    t_count = time.monotonic() - t0
    lipi.train(from_counts=path, vocab_size=vocab).save(os.path.join(tmp, "dask.json"))
    wall = time.monotonic() - t0
    return wall, t_count, path, sum(client.run(cpu_s).values()) + cpu_s() - c0


def main():
    lipi_bin, folder, runs, vocab = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    every = sorted(glob.glob(os.path.join(folder, "shard*.txt")))
    print(f"{'input':>14} {'run':>9} {'wall s':>8} {'count s':>8} {'CPU s':>7} {'peak RSS MB':>32}")
    for n in (3, 30):
        shards = every[:n]
        mb = sum(os.path.getsize(s) for s in shards) / 1e6
        for per_file in (False, True):
            t0 = time.monotonic()
            cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                               host="127.0.0.1", dashboard_address="127.0.0.1:0")
            client = distributed.Client(cluster)
            start = time.monotonic() - t0
            client.run(reset_peak)
            reset_peak()
            cli_t, dask_t, dask_c, cli_cpu, dask_cpu = [], [], [], [], []
            with tempfile.TemporaryDirectory(prefix="lipi-bench-dask-", dir=folder) as tmp:
                for _ in range(runs):  # paired: one of each per round
                    t, cli_rss, cli_counts, cpu = cli_run(lipi_bin, shards, vocab, tmp)
                    cli_t.append(t)
                    cli_cpu.append(cpu)
                    t, tc, path, cpu = dask_run(client, shards, vocab, tmp, per_file)
                    dask_t.append(t)
                    dask_c.append(tc)
                    dask_cpu.append(cpu)
                    with open(path, "rb") as a, open(cli_counts, "rb") as b:
                        same = a.read() == b.read()
                    with open(os.path.join(tmp, "dask.json"), "rb") as a, \
                            open(os.path.join(tmp, "cli.json"), "rb") as b:
                        same = same and a.read() == b.read()
                    if not same:
                        sys.exit("bench/dask_count.py: lipi.dask and the CLI differ")
                workers = client.run(peak_kb)
            client.close()
            cluster.close()
            w = max(workers.values()) / 1024
            name = "dask/file" if per_file else "dask"
            print(f"{mb:10.0f} MB {'cli':>9} {statistics.median(cli_t):8.2f} {'':>8} "
                  f"{statistics.median(cli_cpu):7.2f} "
                  f"{'count %.0f, train %.0f' % (cli_rss[0] / 1024, cli_rss[1] / 1024):>32}")
            print(f"{mb:10.0f} MB {name:>9} {statistics.median(dask_t):8.2f} "
                  f"{statistics.median(dask_c):8.2f} {statistics.median(dask_cpu):7.2f} "
                  f"{'largest worker %.0f, driver %.0f' % (w, peak_kb() / 1024):>32}")
            paired = [d / c for d, c in zip(dask_t, cli_t)]
            print(f"{'':>14} {name}/cli wall: {statistics.median(dask_t) / statistics.median(cli_t):.2f}"
                  f", paired {statistics.median(paired):.2f} "
                  f"({' '.join('%.2f' % x for x in paired)}); CPU "
                  f"{statistics.median(dask_cpu) / statistics.median(cli_cpu):.2f}; cluster start "
                  f"{start:.1f} s (not in the runs); same counts and tokenizer: yes")


if __name__ == "__main__":
    main()
