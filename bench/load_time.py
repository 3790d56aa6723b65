"""One timed run for bench/load.sh: runs CMD (output to /dev/null) and
appends "NAME wall user sys rss_kb" to TIMES, times in seconds with 0.1 ms
resolution (/usr/bin/time's 10 ms made an 8k-piece model's 4 ms load print
as 0.00). Exits with the command's status.

    python3 bench/load_time.py TIMES NAME CMD [ARG...]
"""
import os
import resource
import subprocess
import sys
import time

times, name, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
before = resource.getrusage(resource.RUSAGE_CHILDREN)
start = time.perf_counter()
with open(os.devnull, "wb") as null:
    rc = subprocess.run(cmd, stdout=null, stderr=subprocess.PIPE).returncode
wall = time.perf_counter() - start
after = resource.getrusage(resource.RUSAGE_CHILDREN)
if rc != 0:
    sys.stderr.write(f"bench: '{name}' failed ({rc}): {' '.join(cmd)}\n")
    sys.exit(rc)
with open(times, "a") as f:
    f.write(f"{name} {wall:.4f} {after.ru_utime - before.ru_utime:.4f} "
            f"{after.ru_stime - before.ru_stime:.4f} {after.ru_maxrss}\n")
