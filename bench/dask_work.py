"""Where lipi.dask.count's time goes, without Dask: its tasks' work run one
after another in this process (CPU seconds from time.process_time), for
  tsv   TSV counts files between tasks (lipi.dask before counts runs)
  run   counts runs between tasks
with one count task per file (files) or count's default cut on 2 worker
threads (4 shards, whole files), then the merge tree (fan_in 8; the last
merge writes the TSV). Checks each gives `lipi count`'s bytes.

    python3 bench/dask_work.py LIPI FOLDER     (FOLDER: bench/dask.sh's shard*.txt)
"""
import glob
import os
import subprocess
import sys
import tempfile
import time

import lipi.dask
from lipi import _lipi


def work(files, cut, fmt, tmp):
    """CPU seconds of the count tasks and of each merge level; the final path."""
    count = _lipi._count_to_run if fmt == "run" else _lipi._count_to_file
    t0 = time.process_time()
    level = []
    for i, shard in enumerate(cut):
        out = os.path.join(tmp, f"c{i}.{fmt}")
        count([p for p, _, _ in shard], out, "bpe", {"threads": 1})  # whole files only
        level.append(out)
    times = [time.process_time() - t0]
    while True:
        t0 = time.process_time()
        groups = [level[i:i + 8] for i in range(0, len(level), 8)]
        nxt = []
        for k, g in enumerate(groups):
            last = len(groups) == 1
            out = os.path.join(tmp, "final.tsv" if last else f"m{len(times)}-{k}.{fmt}")
            if fmt == "run":
                _lipi._counts_merge_runs(g, out, last)
            else:
                _lipi._counts_merge_files(g, out)
            nxt.append(out)
        times.append(time.process_time() - t0)
        level = nxt
        if len(level) == 1:
            return times, level[0]


def main():
    lipi_bin, folder = sys.argv[1], sys.argv[2]
    files = sorted(glob.glob(os.path.join(folder, "shard*.txt")))
    with tempfile.TemporaryDirectory(prefix="lipi-bench-work-", dir=folder) as tmp:
        want = os.path.join(tmp, "cli.tsv")
        r0 = os.times()
        subprocess.run([lipi_bin, "count", "--quiet", "--threads", "1", "-o", want, *files],
                       check=True)
        r1 = os.times()
        cli = r1.children_user + r1.children_system - r0.children_user - r0.children_system
        print(f"lipi count --threads 1, {len(files)} files: {cli:.2f} CPU s")
        default = lipi.dask.shards(files, 4, whole_files=True)
        for fmt, name, cut in (("tsv", "one task per file", lipi.dask.shards(files)),
                               ("run", "one task per file", lipi.dask.shards(files)),
                               ("run", f"default cut ({len(default)} tasks)", default)):
            with tempfile.TemporaryDirectory(dir=tmp) as t:
                times, path = work(files, cut, fmt, t)
                with open(path, "rb") as a, open(want, "rb") as b:
                    if a.read() != b.read():
                        sys.exit("bench/dask_work.py: the counts differ from lipi count's")
            merges = ", ".join(f"level {i} {x:.2f}" for i, x in enumerate(times[1:], 1))
            print(f"{fmt} files, {name}: count tasks {times[0]:.2f}, merges {merges}; "
                  f"total {sum(times):.2f} CPU s = {sum(times) / cli:.2f} x lipi count")


if __name__ == "__main__":
    main()
