#!/usr/bin/env python3
"""The chaos soak: `latencyd run` with every feature on (the record every
second, forensics, the observer on every CPU, a load window of 2 minutes
every 10, TLS with basic auth) for SOAK_SECS (7200), hit every ROUND_SECS
(300) by each of these faults, in a random order:

  second   another latencyd with forensics and the observer: a daemon or
           `measure --forensics`, for 60 s; stopped by SIGTERM, or SIGKILL
           every third round (its tracefs instances left for the next
           latencyd to sweep)
  hotplug  a storm of 10 offline/online cycles of a CPU within 2 s
  starve   a SCHED_FIFO 99 spinner holding a sampler's CPU for 30 s
  idle     300 TCP connections that say nothing, held for 30 s
  range    40 record range reads at once, half of the clients gone at 300 ms
  password 200 requests with a wrong password at once
  links    symbolic links to /etc/shadow dropped into the capture and
           record directories, then asked for
  reload   SIGHUP

while it watches: /livez every second (5 s timeout), resident memory,
threads and fds every 10 s, /metrics every 15 s (every counter and
histogram series must never go down), and after each fault what it must
have done (a sampler on every online CPU again, the stall counted, the
links not served, forensics still available).

At the end: a sampler on every online CPU, forensics and the observer
available, no tracefs instance of a dead latencyd left (15 s allowed for
the running latencyd's sweep), then SIGTERM and
a clean exit. Prints the figures (RSS slope after SOAK_SETTLE seconds,
by default the first hour or a quarter of a shorter soak, by least
squares on 5-minute medians with its 95 % interval; threads and fds
range) and writes them as JSON to SOAK_OUT
(target/chaos-soak.json). Exit status 1 when a check failed.

Run as root (hotplug, SCHED_FIFO, tracefs) with tracefs mounted, after
`cargo build --release`; needs openssl, stress-ng and Python's bcrypt:
    SOAK_SECS=7200 benches/chaos_soak.py
Environment: LATENCYD (target/release/latencyd), SOAK_SECS, ROUND_SECS,
SOAK_OUT, SOAK_SEED (the fault order's random seed), SOAK_SETTLE.
"""

import base64
import ctypes
import http.client
import json
import os
import random
import re
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

LATENCYD = os.path.abspath(os.environ.get("LATENCYD", "target/release/latencyd"))
SOAK_SECS = int(os.environ.get("SOAK_SECS", "7200"))
ROUND_SECS = int(os.environ.get("ROUND_SECS", "300"))
SOAK_OUT = os.environ.get("SOAK_OUT", "target/chaos-soak.json")
SEED = int(os.environ.get("SOAK_SEED", str(int(time.time()))))
SETTLE_SECS = int(os.environ.get("SOAK_SETTLE", str(min(3600, SOAK_SECS // 4))))
USER, PASSWORD = "soak", base64.b32encode(os.urandom(10)).decode()
TRACING = "/sys/kernel/tracing"

failures = []  # (seconds into the soak, what)
started = time.monotonic()
lock = threading.Lock()


def now():
    return time.monotonic() - started


def fail(what):
    with lock:
        failures.append((round(now()), what))
    print(f"{now():7.0f}s FAIL {what}", flush=True)


def say(what):
    print(f"{now():7.0f}s {what}", flush=True)


# ---- setup -----------------------------------------------------------------


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def setup(dir):
    import bcrypt  # pip install bcrypt (or Debian's python3-bcrypt)

    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", f"{dir}/key.pem", "-out", f"{dir}/cert.pem"],
        check=True, capture_output=True)
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(10)).decode()
    write(f"{dir}/web.yml",
          f"tls_server_config:\n  cert_file: {dir}/cert.pem\n  key_file: {dir}/key.pem\n"
          f"basic_auth_users:\n  {USER}: '{hashed}'\n")
    for sub in ("spikes", "record", "second", "second/spikes", "second/record"):
        os.makedirs(f"{dir}/{sub}", mode=0o750, exist_ok=True)
    write(f"{dir}/latencyd.toml", config(dir, "main"))
    write(f"{dir}/second.toml", config(f"{dir}/second", "second"))
    return f"{dir}/latencyd.toml"


def config(dir, who):
    web = f'web_config_file = "{os.path.dirname(dir) if who == "second" else dir}/web.yml"'
    load = ('[load]\nprofile = "cpu"\ncpus = "all"\nevery = "10m"\nat = "0s"\nduration = "2m"\n'
            if who == "main" else "")
    # The main daemon logs at debug: its readings of the online and usable
    # CPUs, and each sampler it starts, trace a hotplug failure.
    log = '[log]\nlevel = "debug"\n' if who == "main" else ""
    return f"""[measure]
interval = "1ms"
priority = 80
[realtime]
required = true
[export]
listen = ["127.0.0.1:0"]
{web}
[forensics]
enabled = true
dir = "{dir}/spikes"
capture_new_max = true
[record]
enabled = true
dir = "{dir}/record"
interval = "1s"
[observe]
enabled = true
cpus = "all"
{load}{log}"""


def start_daemon(config_path, log_path):
    log = open(log_path, "w")
    proc = subprocess.Popen([LATENCYD, "run", "--config", config_path],
                            stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.time() + 20
    while time.time() < deadline:
        found = re.search(r"serving https://([0-9.:]+)", open(log_path).read())
        if found:
            host, port = found.group(1).rsplit(":", 1)
            return proc, (host, int(port))
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    sys.exit(f"latencyd did not start: {open(log_path).read()[-2000:]}")


# ---- HTTP ------------------------------------------------------------------

TLS = ssl.create_default_context()
TLS.check_hostname = False
TLS.verify_mode = ssl.CERT_NONE


# The floods come from another loopback address than the watchers, as a
# hostile or broken client is another peer than Prometheus and the
# kubelet: latencyd shares its connection slots and bcrypt queue by peer.
FLOODER = "127.0.0.2"


def request(addr, path, password=None, timeout=10, source=None):
    """(status, body) of a GET over TLS, with the right credentials unless
    `password` says otherwise ("" for none), from `source` if given."""
    password = PASSWORD if password is None else password
    conn = http.client.HTTPSConnection(addr[0], addr[1], timeout=timeout, context=TLS,
                                       source_address=(source, 0) if source else None)
    headers = {}
    if password:
        token = base64.b64encode(f"{USER}:{password}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    try:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        return response.status, response.read().decode(errors="replace")
    finally:
        conn.close()


def metrics_of(text):
    """{series: value} of the counters and histograms' series."""
    kinds, values = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            kinds[name] = kind
        elif line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            name = series.split("{", 1)[0]
            family = re.sub(r"_(total|bucket|count|sum)$", "", name)
            if kinds.get(name) == "counter" or kinds.get(family) in ("counter", "histogram"):
                values[series] = float(value)
    return values


def gauge(text, name):
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def online_cpus():
    text = open("/sys/devices/system/cpu/online").read().strip()
    cpus = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def hotpluggable():
    return sorted(int(n[3:]) for n in os.listdir("/sys/devices/system/cpu")
                  if re.fullmatch(r"cpu[0-9]+", n)
                  and os.path.exists(f"/sys/devices/system/cpu/{n}/online"))


def sampled(addr):
    status = json.loads(request(addr, "/api/v1/status")[1])
    return {s["cpu"] for s in status["samplers"] if s.get("sampling")}


# ---- watchers --------------------------------------------------------------


class Watch:
    def __init__(self, proc, addr):
        self.proc, self.addr = proc, addr
        self.stop = threading.Event()
        self.livez = []  # (t, status or error, seconds)
        self.resources = []  # (t, rss KiB, threads, fds)
        self.last = {}
        self.scrapes = 0
        self.decreases = []
        self.threads = [threading.Thread(target=f, daemon=True)
                        for f in (self.probe, self.measure, self.scrape)]
        for t in self.threads:
            t.start()

    def every(self, seconds, what):
        next_at = time.monotonic()
        while not self.stop.is_set():
            what()
            next_at += seconds
            self.stop.wait(max(0, next_at - time.monotonic()))

    def probe(self):
        def once():
            t0 = time.monotonic()
            try:
                status = request(self.addr, "/livez", password="", timeout=5)[0]
            except Exception as e:  # noqa: BLE001 - any failure is a failed probe
                status = f"{type(e).__name__}: {e}"
            took = time.monotonic() - t0
            self.livez.append((now(), status, took))
            if status != 200:
                fail(f"/livez answered {status} after {took:.1f} s")
        self.every(1, once)

    def measure(self):
        pid = self.proc.pid

        def once():
            try:
                rss = int(re.search(r"VmRSS:\s+(\d+)", open(f"/proc/{pid}/status").read()).group(1))
                self.resources.append((now(), rss, len(os.listdir(f"/proc/{pid}/task")),
                                       len(os.listdir(f"/proc/{pid}/fd"))))
            except (OSError, AttributeError):
                pass
        self.every(10, once)

    def scrape(self):
        def once():
            try:
                status, text = request(self.addr, "/metrics", timeout=10)
            except Exception as e:  # noqa: BLE001
                fail(f"/metrics failed: {e}")
                return
            if status != 200:
                fail(f"/metrics answered {status}")
                return
            self.scrapes += 1
            for series, value in metrics_of(text).items():
                before = self.last.get(series)
                if before is not None and value < before:
                    self.decreases.append((now(), series, before, value))
                    fail(f"{series} went down from {before} to {value}")
                self.last[series] = value
        self.every(15, once)

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join()


# ---- faults ----------------------------------------------------------------


def metric_now(addr, name):
    return gauge(request(addr, "/metrics")[1], name)


def second_latencyd(ctx):
    """Another latencyd with forensics (and, as a daemon, the observer) for
    60 s while the first must keep capturing."""
    kill = ctx["round"] % 3 == 2
    if ctx["round"] % 2 == 0:
        proc, _ = start_daemon(f"{ctx['dir']}/second.toml", f"{ctx['dir']}/second.log")
        what = "daemon"
    else:
        proc = subprocess.Popen(
            [LATENCYD, "measure", "-q", "-m", "-p", "80", "-i", "1000", "-D", "90s", "-t",
             "--forensics", "--forensics-threshold", "500us"],
            stdout=subprocess.DEVNULL, stderr=open(f"{ctx['dir']}/second.log", "w"))
        what = "measure --forensics"
    for _ in range(6):
        time.sleep(10)
        available = metric_now(ctx["addr"], "latencyd_forensics_available")
        if available != 1:
            fail(f"forensics unavailable ({available}) beside a second latencyd ({what})")
    proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
    code = proc.wait()
    if not kill and code != 0:
        fail(f"the second latencyd ({what}) exited {code}: "
             f"{open(ctx['dir'] + '/second.log').read()[-500:]}")
    time.sleep(2)
    available = metric_now(ctx["addr"], "latencyd_forensics_available")
    if available != 1:
        fail(f"forensics unavailable ({available}) after the second latencyd left")
    return f"second latencyd ({what}), {'SIGKILL' if kill else 'SIGTERM'}"


def converge(ctx, why):
    """Seconds until a sampler runs on every online CPU (fails after 15)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < 15:
        try:
            online, running = online_cpus(), sampled(ctx["addr"])
            if online <= running:
                return time.monotonic() - t0
        except Exception:  # noqa: BLE001 - busy or between states: ask again
            pass
        time.sleep(0.25)
    fail(f"after {why}: online {sorted(online_cpus())}, sampled {sorted(sampled(ctx['addr']))}")
    return None


def hotplug_storm(ctx):
    cpu = random.choice(ctx["pluggable"])
    path = f"/sys/devices/system/cpu/cpu{cpu}/online"
    t0 = time.monotonic()
    for _ in range(10):
        for state in ("0", "1"):
            try:
                write(path, state)
            except OSError as e:
                fail(f"cannot set CPU {cpu} {state}: {e}")
        time.sleep(max(0, 0.2 - (time.monotonic() - t0) % 0.2))
    storm = time.monotonic() - t0
    took = converge(ctx, f"a hotplug storm of CPU {cpu}")
    return f"hotplug storm of CPU {cpu} ({storm:.1f} s), all sampled again after {took and round(took, 2)} s"


def die_with_the_soak():
    """In a child before exec: SIGKILL when the soak goes (PR_SET_PDEATHSIG),
    so that a soak stopped by hand leaves no FIFO 99 spinner behind."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


def starve(ctx):
    cpu = random.choice(sorted(online_cpus()))
    series = f'latencyd_sampler_stalls_total{{cpu="{cpu}"}}'
    before = metrics_of(request(ctx["addr"], "/metrics")[1]).get(series, 0)
    # The spinner alone is pinned and real-time: what stops it (here) must
    # be able to run elsewhere.
    spinner = subprocess.Popen(["sh", "-c", "while :; do :; done"], preexec_fn=lambda: (
        die_with_the_soak(),
        os.sched_setaffinity(0, {cpu}),
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(99))))
    time.sleep(30)
    spinner.kill()
    spinner.wait()
    time.sleep(3)
    after = metrics_of(request(ctx["addr"], "/metrics")[1]).get(series, 0)
    if after <= before:
        fail(f"a 30 s starvation of CPU {cpu} was not counted as a stall ({before} -> {after})")
    converge(ctx, f"starving CPU {cpu}")
    return f"30 s FIFO starvation of CPU {cpu}: stalls {before:.0f} -> {after:.0f}"


def idle_flood(ctx):
    sockets = []
    for _ in range(300):
        try:
            sockets.append(socket.create_connection(ctx["addr"], timeout=5,
                                                    source_address=(FLOODER, 0)))
        except OSError:
            break
    time.sleep(30)
    closed_by_server = 0
    for s in sockets:
        s.setblocking(False)
        try:
            if s.recv(1) == b"":
                closed_by_server += 1
        except (BlockingIOError, OSError):
            pass
        s.close()
    return f"{len(sockets)} idle connections for 30 s, {closed_by_server} closed by latencyd"


def crowd(n, job):
    answers = [None] * n

    def one(i):
        try:
            answers[i] = job()
        except socket.timeout:
            answers[i] = "gone"
        except Exception as e:  # noqa: BLE001
            answers[i] = type(e).__name__
    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    counts = {}
    for a in answers:
        counts[str(a)] = counts.get(str(a), 0) + 1
    return counts


def range_flood(ctx):
    path = "/api/v1/latency?from=-1d"
    flip = iter(range(40))
    counts = crowd(40, lambda: request(ctx["addr"], path, source=FLOODER,
                                        timeout=0.3 if next(flip) % 2 else 30)[0])
    return f"40 range reads: {counts}"


def password_flood(ctx):
    counts = crowd(200, lambda: request(ctx["addr"], "/api/v1/status", password="wrong",
                                        source=FLOODER)[0])
    if counts.get("200"):
        fail(f"a wrong password was let in: {counts}")
    return f"200 wrong passwords: {counts}"


def links(ctx):
    stamp = int(time.time() * 1000)
    capture = f"{stamp}-cpu0"
    os.symlink("/etc/shadow", f"{ctx['dir']}/spikes/{capture}.json")
    os.symlink("/etc", f"{ctx['dir']}/spikes/{stamp + 1}-cpu1.json")
    name = time.strftime("latencyd-%Y%m%dT%H%M%S", time.gmtime(time.time() - 30)) + ".000Z.hlog"
    if not os.path.exists(f"{ctx['dir']}/record/{name}"):
        os.symlink("/etc/shadow", f"{ctx['dir']}/record/{name}")
    shadow = open("/etc/shadow").read().split(":", 1)[0]
    status, body = request(ctx["addr"], f"/api/v1/spikes/{capture}")
    listing = request(ctx["addr"], "/api/v1/spikes")[1]
    report = request(ctx["addr"], "/api/v1/latency?from=-2m")
    if status == 200 or capture in listing or (shadow and f"{shadow}:" in body):
        fail(f"a link in the capture directory was served: {status} {body[:200]}")
    if report[0] != 200:
        fail(f"the record's range read failed beside a link: {report}")
    return f"links dropped: capture answered {status}, range read {report[0]}"


def reload(ctx):
    ctx["proc"].send_signal(signal.SIGHUP)
    time.sleep(2)
    return "SIGHUP"


FAULTS = [second_latencyd, hotplug_storm, starve, idle_flood, range_flood, password_flood,
          links, reload]


# ---- the soak --------------------------------------------------------------


def slope_per_hour(points):
    """Least-squares slope of (seconds, value) points, per hour."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    sxx = sum((p[0] - mx) ** 2 for p in points)
    return 3600 * sum((p[0] - mx) * (p[1] - my) for p in points) / sxx if sxx else 0.0


# Student's t at 97.5 % for 1..30 degrees of freedom, then 2.0 beyond.
T975 = [12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23, 2.20, 2.18, 2.16, 2.14,
        2.13, 2.12, 2.11, 2.10, 2.09, 2.09, 2.08, 2.07, 2.07, 2.06, 2.06, 2.06, 2.05, 2.05,
        2.05, 2.04]


def slope_interval(points, block=300):
    """The RSS slope per hour with its 95 % interval. Readings 10 s apart
    are far from independent (a flood lifts ten of them at once), so the
    fit is made on the median of each `block` seconds, and the interval
    from the residuals of that fit: (slope, low, high, blocks)."""
    blocks = {}
    for t, v in points:
        blocks.setdefault(int(t // block), []).append(v)
    pts = [((k + 0.5) * block, sorted(vs)[len(vs) // 2]) for k, vs in sorted(blocks.items())]
    n = len(pts)
    if n < 3:
        return (slope_per_hour(pts), None, None, n)
    mx = sum(p[0] for p in pts) / n
    my = sum(p[1] for p in pts) / n
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    b = sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx
    a = my - b * mx
    rss = sum((p[1] - a - b * p[0]) ** 2 for p in pts)
    se = (rss / (n - 2) / sxx) ** 0.5
    t = T975[n - 3] if n - 2 <= len(T975) else 2.0
    return (3600 * b, 3600 * (b - t * se), 3600 * (b + t * se), n)


def instances_of_the_dead():
    left = []
    for name in os.listdir(f"{TRACING}/instances"):
        found = re.fullmatch(r"latencyd-[a-z]+-([0-9]+)", name)
        if found and not os.path.exists(f"/proc/{found.group(1)}"):
            left.append(name)
    return left


def main():
    if os.geteuid() != 0:
        sys.exit("the chaos soak runs as root: hotplug, SCHED_FIFO and tracefs")
    if not os.path.isdir(f"{TRACING}/instances"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", TRACING], check=False)
    random.seed(SEED)
    dir = tempfile.mkdtemp(prefix="latencyd-soak-")
    os.chmod(dir, 0o750)
    config_path = setup(dir)
    proc, addr = start_daemon(config_path, f"{dir}/latencyd.log")
    say(f"latencyd {proc.pid} at https://{addr[0]}:{addr[1]}, {SOAK_SECS} s, a round of faults "
        f"every {ROUND_SECS} s, seed {SEED}, files in {dir}")
    ctx = {"dir": dir, "addr": addr, "proc": proc, "round": 0, "pluggable": hotpluggable()}
    if not ctx["pluggable"]:
        say("no CPU can go offline here: no hotplug storms")
        FAULTS.remove(hotplug_storm)
    watch = Watch(proc, addr)
    done = []
    while now() + ROUND_SECS <= SOAK_SECS:
        round_start = now()
        faults = FAULTS[:]
        random.shuffle(faults)
        for fault in faults:
            try:
                said = fault(ctx)
            except Exception as e:  # noqa: BLE001 - a fault that broke is a failure
                said = f"{fault.__name__}: {type(e).__name__}: {e}"
                fail(said)
            done.append((round(now()), fault.__name__, said))
            say(said)
            if proc.poll() is not None:
                fail(f"latencyd exited {proc.returncode}")
                break
        if proc.poll() is not None:
            break
        ctx["round"] += 1
        time.sleep(max(0, round_start + ROUND_SECS - now()))
    time.sleep(max(0, SOAK_SECS - now()))

    # The end: every online CPU sampled, forensics and the observer on.
    end = {}
    if proc.poll() is None:
        converge(ctx, "the soak")
        text = request(addr, "/metrics")[1]
        end["forensics_available"] = gauge(text, "latencyd_forensics_available")
        end["observe_available"] = gauge(text, "latencyd_observe_available")
        end["online"], end["sampled"] = sorted(online_cpus()), sorted(sampled(addr))
        for key in ("forensics_available", "observe_available"):
            if end[key] != 1:
                fail(f"{key} is {end[key]} at the end")
    watch.finish()
    # A latencyd killed in the last round leaves its instances; the
    # running one removes them within its 10 s sweep.
    deadline = time.monotonic() + 15
    while instances_of_the_dead() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(1)
    end["dead_instances"] = instances_of_the_dead()
    if end["dead_instances"]:
        fail(f"tracefs instances of dead processes: {end['dead_instances']}")
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    end["exit"] = proc.wait(timeout=30)
    end["exit_seconds"] = round(time.monotonic() - t0, 2)
    if end["exit"] != 0:
        fail(f"latencyd exited {end['exit']} at SIGTERM")
    log = open(f"{dir}/latencyd.log").read()
    end["log_lines"] = {level: log.count(f" {level} ") for level in ("ERROR", "WARN", "INFO")}

    settled = [r for r in watch.resources if r[0] >= SETTLE_SECS]
    slope, low, high, blocks = slope_interval([(r[0], r[1]) for r in settled])
    probes = watch.livez
    summary = {
        "seconds": round(now()),
        "seed": SEED,
        "rounds": ctx["round"],
        "faults": len(done),
        "livez": {"probes": len(probes), "failed": sum(1 for p in probes if p[1] != 200),
                  "slowest_s": round(max((p[2] for p in probes), default=0), 3)},
        "scrapes": watch.scrapes,
        "series_checked": len(watch.last),
        "decreases": watch.decreases,
        "rss_kib": {"first": watch.resources[0][1] if watch.resources else None,
                    "settled_from_s": settled[0][0] if settled else None,
                    "settled_min": min((r[1] for r in settled), default=None),
                    "settled_max": max((r[1] for r in settled), default=None),
                    "settled_slope_kib_per_h": round(slope, 1),
                    "slope_95_interval": [round(low, 1) if low is not None else None,
                                          round(high, 1) if high is not None else None],
                    "slope_blocks": blocks,
                    "series": [(r[0], r[1]) for r in watch.resources]},
        "threads": [min((r[2] for r in settled), default=None), max((r[2] for r in settled), default=None)],
        "fds": [min((r[3] for r in settled), default=None), max((r[3] for r in settled), default=None)],
        "end": end,
        "failures": failures,
        "done": done,
    }
    os.makedirs(os.path.dirname(SOAK_OUT) or ".", exist_ok=True)
    with open(SOAK_OUT, "w") as f:
        json.dump(summary, f, indent=1)
    brief = {k: v for k, v in summary.items() if k not in ("done", "decreases")}
    brief["rss_kib"] = {k: v for k, v in summary["rss_kib"].items() if k != "series"}
    print(json.dumps(brief, indent=1))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
