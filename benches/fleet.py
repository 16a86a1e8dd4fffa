#!/usr/bin/env python3
"""What a latencyd fleet costs the server that scrapes it.

The fleet simulator (benches/fleet_sim.rs: synthetic hosts rendered by
latencyd's own renderer, one target each) is scraped by Debian's
Prometheus with the shipped fleet job (deploy/prometheus/prometheus.yml,
its `latencyd-fleet` job) and the shipped rules, and by VictoriaMetrics
(the same scrape job through -promscrape.config; vmalert evaluates the
same rules against it). After MINUTES of scraping, for each fleet size:

- series in the head, per host and per CPU; samples appended a second;
- the server's resident memory, per series and per host;
- disk: bytes a sample at the end (Prometheus: the chunks of its head
  written as a block by a TSDB snapshot, and the block's index per
  series; VictoriaMetrics: its data after a flush), and per host and day
  at the shipped 15 s scrape interval (a day's samples and one index);
- each rule group's and each rule's evaluation time, the longest seen,
  against the group's interval;
- the server's CPU (cores busy, from its own process CPU counter);
- each fleet dashboard query (grafana/dashboards/latencyd-fleet.json,
  Grafana's variables filled in as Grafana would for "all hosts") timed
  over the last hour and the last 24 hours: the median of 3 (one when it
  takes over 2 s), instant queries at now and range queries at Grafana's
  step for that range. The server holds only MINUTES of data, so a
  24-hour query reads what there is: its time is that of the query's
  evaluation over a long range, not of 24 hours of samples;
- Prometheus only, once scraping and rules have stopped (the simulator
  killed, the configuration reloaded without jobs or rules): every
  dashboard query again and every rule's expression, at a time before the
  stop: what each costs on its own, without the scrapes and the other
  rules competing for the same cores.

Run as any user (both servers run from /usr/bin as child processes):

    HOSTS=100,1000 MINUTES=10 benches/fleet.py

Environment: HOSTS (fleet sizes), MINUTES (scraping before measuring, 10),
SERVERS (prometheus,victoriametrics), SEED, FLEET_OUT (JSON of every
figure, target/fleet.json), RATE (samples a CPU a second, 1000),
PER_CPU_HISTOGRAMS (true, latencyd's default; false: the latency histogram
once a host, as docs/operations.md advises for fleets).
"""

import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOSTS = [int(n) for n in os.environ.get("HOSTS", "100,1000").split(",")]
MINUTES = float(os.environ.get("MINUTES", "10"))
SERVERS = os.environ.get("SERVERS", "prometheus,victoriametrics").split(",")
SEED = os.environ.get("SEED", "1")
RATE = os.environ.get("RATE", "1000")
PER_CPU_HISTOGRAMS = os.environ.get("PER_CPU_HISTOGRAMS", "true")
OUT = os.environ.get("FLEET_OUT", os.path.join(ROOT, "target", "fleet.json"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=120):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def wait_for(url, what, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            get(url, timeout=2)
            return
        except OSError:
            time.sleep(0.5)
    sys.exit(f"fleet: {what} did not answer at {url}")


def simulator_binary():
    out = subprocess.run(
        ["cargo", "bench", "--bench", "fleet_sim", "--no-run", "--message-format=json"],
        cwd=ROOT, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        message = json.loads(line)
        if message.get("executable") and message.get("target", {}).get("name") == "fleet_sim":
            return message["executable"]
    sys.exit("fleet: cargo did not build the fleet_sim bench")


def scrape_config(targets_file):
    """The shipped fleet job, reading the simulator's targets."""
    shipped = yaml.safe_load(open(os.path.join(ROOT, "deploy/prometheus/prometheus.yml")))
    job = next(j for j in shipped["scrape_configs"] if j["job_name"] == "latencyd-fleet")
    job["file_sd_configs"] = [{"files": [targets_file], "refresh_interval": "1m"}]
    return {"global": shipped["global"], "scrape_configs": [job]}


def metric_values(text, name):
    """Every value of `name` in a text exposition, by its labels."""
    found = {}
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            labels, _, value = line.rpartition(" ")
            found[labels[len(name):]] = float(value)
    return found


def one(text, name):
    return sum(metric_values(text, name).values())


class Prometheus:
    name = "prometheus"

    def __init__(self, work, targets_file):
        self.port, self.work = free_port(), work
        self.errors = {}
        self.url = f"http://127.0.0.1:{self.port}"
        config = scrape_config(targets_file)
        config["rule_files"] = [os.path.join(ROOT, "deploy/prometheus/latencyd.rules.yml")]
        path = os.path.join(work, "prometheus.yml")
        yaml.safe_dump(config, open(path, "w"))
        self.config = path
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={path}", f"--storage.tsdb.path={work}/prom-data",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn",
             "--web.enable-admin-api", "--web.enable-lifecycle"],
            stdout=subprocess.DEVNULL, stderr=open(f"{work}/prometheus.log", "w"))
        wait_for(self.url + "/-/ready", "Prometheus")

    def figures(self):
        text = get(self.url + "/metrics")
        groups = {}
        durations = metric_values(text, "prometheus_rule_group_last_duration_seconds")
        intervals = metric_values(text, "prometheus_rule_group_interval_seconds")
        for labels, seconds in durations.items():
            group = re.search(r'rule_group="[^"]*;([^"]+)"', labels).group(1)
            groups[group] = {"seconds": seconds, "interval": intervals.get(labels)}
        rules = json.loads(get(self.url + "/api/v1/rules"))["data"]["groups"]
        for group in rules:
            for rule in group["rules"]:
                name = rule.get("name", "?")
                if rule.get("health") == "err":
                    self.errors[name] = rule.get("lastError", "")[:300]
                groups.setdefault(group["name"], {}).setdefault("rules", {})[name] = \
                    rule.get("evaluationTime", 0)
        return {
            "series": one(text, "prometheus_tsdb_head_series"),
            "rss_bytes": one(text, "process_resident_memory_bytes"),
            "heap_bytes": one(text, "go_memstats_heap_inuse_bytes"),
            "samples_total": one(text, "prometheus_tsdb_head_samples_appended_total"),
            "cpu_seconds": one(text, "process_cpu_seconds_total"),
            "rule_groups": groups,
        }

    def quiet(self):
        """No more scrapes or rules: the configuration reloaded without
        them. The data stays."""
        config = yaml.safe_load(open(self.config))
        yaml.safe_dump({"global": config["global"]}, open(self.config, "w"))
        request = urllib.request.Request(self.url + "/-/reload", method="POST")
        urllib.request.urlopen(request, timeout=120).read()
        time.sleep(5)

    def disk(self):
        """Bytes a sample takes on disk: the head written as a block by
        a snapshot, against the samples appended."""
        request = urllib.request.Request(self.url + "/api/v1/admin/tsdb/snapshot",
                                         method="POST")
        with urllib.request.urlopen(request, timeout=600) as r:
            name = json.loads(r.read())["data"]["name"]
        text = get(self.url + "/metrics")
        samples = one(text, "prometheus_tsdb_head_samples_appended_total")
        path = os.path.join(self.work, "prom-data", "snapshots", name)
        chunks = index = 0
        for d, _, files in os.walk(path):
            for f in files:
                size = os.path.getsize(os.path.join(d, f))
                if os.path.basename(d) == "chunks":
                    chunks += size
                elif f == "index":
                    index += size
        # A block's index is paid once a block (a day's, once compacted),
        # its chunks once a sample.
        return {"bytes": chunks, "samples": samples,
                "index_bytes_per_series": index / max(one(text, "prometheus_tsdb_head_series"), 1)}

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)


class VictoriaMetrics:
    name = "victoriametrics"

    def __init__(self, work, targets_file):
        self.port, alert_port = free_port(), free_port()
        self.errors = {}
        self.url = f"http://127.0.0.1:{self.port}"
        path = os.path.join(work, "scrape.yml")
        yaml.safe_dump(scrape_config(targets_file), open(path, "w"))
        self.proc = subprocess.Popen(
            ["victoria-metrics", f"-storageDataPath={work}/vm-data", f"-promscrape.config={path}",
             f"-httpListenAddr=127.0.0.1:{self.port}", "-loggerLevel=ERROR",
             # The shipped job has fields VictoriaMetrics does not know
             # (file_sd refresh_interval: it re-reads every 30 s anyway).
             "-promscrape.config.strictParse=false"],
            stdout=subprocess.DEVNULL, stderr=open(f"{work}/vm.log", "w"))
        wait_for(self.url + "/health", "VictoriaMetrics")
        self.alert_url = f"http://127.0.0.1:{alert_port}"
        # Debian's vmalert (1.79) refuses keep_firing_for, which came in
        # 1.90: the rules without it evaluate the same queries.
        rules = os.path.join(work, "rules.yml")
        with open(os.path.join(ROOT, "deploy/prometheus/latencyd.rules.yml")) as shipped:
            open(rules, "w").write("".join(line for line in shipped
                                           if not line.strip().startswith("keep_firing_for:")))
        self.alert = subprocess.Popen(
            ["vmalert", f"-rule={rules}",
             f"-datasource.url={self.url}", f"-remoteWrite.url={self.url}",
             f"-remoteRead.url={self.url}", f"-httpListenAddr=127.0.0.1:{alert_port}",
             # Nobody to notify: an address that refuses.
             "-notifier.url=http://127.0.0.1:9", "-loggerLevel=FATAL"],
            stdout=subprocess.DEVNULL, stderr=open(f"{work}/vmalert.log", "w"))
        wait_for(self.alert_url + "/health", "vmalert")

    def figures(self):
        text = get(self.url + "/metrics")
        alert = get(self.alert_url + "/metrics")
        groups = {}
        def failed(node):
            if isinstance(node, dict):
                if node.get("lastError"):
                    self.errors[node.get("name", "?")] = node["lastError"][-300:]
                for value in node.values():
                    failed(value)
            elif isinstance(node, list):
                for value in node:
                    failed(value)
        failed(json.loads(get(self.alert_url + "/api/v1/rules")))
        for labels, seconds in metric_values(alert, "vmalert_iteration_duration_seconds_sum").items():
            count = metric_values(alert, "vmalert_iteration_duration_seconds_count").get(labels, 0)
            group = re.search(r'group="([^"]+)"', labels).group(1)
            groups[group] = {"seconds": seconds / count if count else None, "interval": None}
        return {
            # The series active this hour (VictoriaMetrics' own count).
            "series": sum(v for k, v in metric_values(text, "vm_cache_entries").items()
                          if 'type="storage/hour_metric_ids"' in k),
            "rss_bytes": one(text, "process_resident_memory_bytes"),
            "heap_bytes": None,
            "samples_total": sum(v for k, v in metric_values(text, "vm_rows_inserted_total").items()),
            "cpu_seconds": one(text, "process_cpu_seconds_total")
            + one(alert, "process_cpu_seconds_total"),
            "rule_groups": groups,
        }

    def disk(self):
        """Bytes a sample takes on disk, once the in-memory rows are
        flushed (VictoriaMetrics merges parts later and shrinks further)."""
        get(self.url + "/internal/force_flush")
        time.sleep(5)
        text = get(self.url + "/metrics")
        size = sum(v for k, v in metric_values(text, "vm_data_size_bytes").items())
        rows = sum(v for k, v in metric_values(text, "vm_rows").items()
                   if 'type="storage/' in k)
        return {"bytes": size, "samples": rows}

    def stop(self):
        for proc in (self.alert, self.proc):
            proc.terminate()
            proc.wait(timeout=60)


def dashboard_queries():
    """Every query of the fleet dashboard: (title, expr, instant)."""
    board = json.load(open(os.path.join(ROOT, "grafana/dashboards/latencyd-fleet.json")))

    def panels(items):
        for p in items:
            yield p
            yield from panels(p.get("panels", []))
    queries = [(p.get("title"), t["expr"], bool(t.get("instant")))
               for p in panels(board["panels"]) for t in p.get("targets", []) if t.get("expr")]
    return queries + BEFORE


# Queries the dashboard had before a recording rule took their work, timed
# beside what replaced them.
SEL = '{job=~"$job", instance=~"$instance"}'
BEFORE = [
    ("p99 per host, before: every CPU's buckets",
     'histogram_quantile(0.99, sum by (instance, le) (rate(latencyd_wakeup_latency_seconds_bucket'
     + SEL + '[$__rate_interval])))', False),
    ("Distribution of maxima, before: every CPU",
     'max by (instance) (max_over_time(latencyd_wakeup_latency_window_max_seconds'
     + SEL + '[$__range]))', True),
    ("Maximum by kernel release, before: every CPU",
     'max by (kernel, preempt_rt) (max by (job, instance) (max_over_time('
     'latencyd_wakeup_latency_window_max_seconds' + SEL + '[$__interval])) * on (job, instance) '
     'group_left (kernel, preempt_rt) max by (job, instance, kernel, preempt_rt) '
     '(latencyd_host_info' + SEL + '))', False),
    ("Hosts with a stale sampler, before: every CPU",
     'count(count by (job, instance) (latencyd_sampler_last_sample_timestamp_seconds' + SEL
     + ' unless on (job, instance, cpu) changes(latencyd_sampler_last_sample_timestamp_seconds'
     + SEL + '[2m]) > 0 unless on (job, instance, cpu) latencyd_sampler_online == 0)) or vector(0)',
     True),
    ("Host state heartbeat age, before: every CPU",
     'max by (job, instance) (timestamp(latencyd_sampler_last_sample_timestamp_seconds' + SEL
     + ') - latencyd_sampler_last_sample_timestamp_seconds' + SEL
     + ' unless on (job, instance, cpu) latencyd_sampler_online == 0)', True),
]


def fill(expr, range_s, step_s):
    """Grafana's variables as Grafana fills them for every host."""
    rate = max(4 * 15, step_s + 15)
    for var, value in (("$__rate_interval", f"{rate}s"),
                       ("$__interval", f"{step_s}s"),
                       ("$__range", f"{range_s}s"), ("$job", ".*"), ("$instance", ".*"),
                       ("$fingerprint", ".*")):
        expr = expr.replace(var, value)
    return expr


def timed(url):
    """The median time of a query (of 3, or 1 when it takes over 2 s), and
    its answer."""
    took = []
    for _ in range(3):
        start = time.time()
        try:
            answer = json.loads(get(url))
            ok = answer.get("status") == "success"
        except urllib.error.HTTPError as err:
            ok, answer = False, {"error": f"{err.code}: {err.read().decode()[-300:]}"}
        except (OSError, ValueError) as err:
            ok, answer = False, {"error": str(err)}
        took.append(time.time() - start)
        if took[0] > 2:
            break
    return {"seconds": statistics.median(took), "ok": ok,
            "series": len(answer.get("data", {}).get("result", []) or []) if ok else None,
            "error": None if ok else str(answer.get("error"))[-300:]}


def time_rules(server, at):
    """Every shipped rule's expression as an instant query at `at`."""
    shipped = yaml.safe_load(open(os.path.join(ROOT, "deploy/prometheus/latencyd.rules.yml")))
    times = {}
    for group in shipped["groups"]:
        for rule in group["rules"]:
            name = rule.get("record") or rule.get("alert")
            url = f"{server.url}/api/v1/query?" + urllib.parse.urlencode(
                {"query": rule["expr"], "time": at})
            times[f"{group['name']}/{name}"] = timed(url)
    return times


def time_queries(server, at=None):
    times = {}
    for range_name, range_s, step_s in (("1h", 3600, 15), ("24h", 86400, 120)):
        for title, expr, instant in dashboard_queries():
            # The panels of the per-host maximum step a minute at least
            # (its rule's interval; the panel's minimum interval).
            step = max(step_s, 60) if "max_2m" in expr and not instant else step_s
            q = fill(expr, range_s, step)
            now = at or time.time()
            if instant:
                url = f"{server.url}/api/v1/query?" + urllib.parse.urlencode({"query": q, "time": now})
            else:
                url = f"{server.url}/api/v1/query_range?" + urllib.parse.urlencode(
                    {"query": q, "start": now - range_s, "end": now, "step": step})
            times.setdefault(f"{title} | {expr[:60]}", {})[range_name] = timed(url)
    return times


def run(n, server_class, binary):
    work = tempfile.mkdtemp(prefix=f"fleet-{n}-")
    sim_port = free_port()
    sim = subprocess.Popen(
        [binary, "--hosts", str(n), "--seed", SEED, "--listen", f"127.0.0.1:{sim_port}",
         "--out", work, "--rate", RATE, "--per-cpu-histograms", PER_CPU_HISTOGRAMS],
        stdout=subprocess.DEVNULL, stderr=open(f"{work}/sim.log", "w"))
    wait_file(f"{work}/truth.json")
    truth = json.load(open(f"{work}/truth.json"))
    cpus = sum(h["cpus"] for h in truth["hosts"])
    server = server_class(work, f"{work}/targets.json")
    print(f"fleet: {n} hosts ({cpus} CPUs) scraped by {server.name} for {MINUTES} min",
          file=sys.stderr)
    first = server.figures()
    t0 = time.time()
    longest, longest_rule = {}, {}
    while time.time() - t0 < MINUTES * 60:
        time.sleep(30)
        for group, g in server.figures()["rule_groups"].items():
            if g.get("seconds") is not None:
                longest[group] = max(longest.get(group, 0), g["seconds"])
            for rule, seconds in g.get("rules", {}).items():
                key = f"{group}/{rule}"
                longest_rule[key] = max(longest_rule.get(key, 0), seconds)
    last = server.figures()
    elapsed = time.time() - t0
    result = {
        "hosts": n, "cpus": cpus, "server": server.name, "minutes": MINUTES,
        "per_cpu_histograms": PER_CPU_HISTOGRAMS,
        "series": last["series"], "series_per_host": last["series"] / n,
        "series_per_cpu": last["series"] / cpus,
        "rss_bytes": last["rss_bytes"], "heap_bytes": last["heap_bytes"],
        "rss_per_series": last["rss_bytes"] / max(last["series"], 1),
        "rss_per_host": last["rss_bytes"] / n,
        "samples_per_second": (last["samples_total"] - first["samples_total"]) / elapsed,
        "cpu_cores": (last["cpu_seconds"] - first["cpu_seconds"]) / elapsed,
        "rule_groups": {g: {"longest_seconds": s,
                            "interval": last["rule_groups"].get(g, {}).get("interval")}
                        for g, s in longest.items()},
        "rules": longest_rule,
        "rule_errors": server.errors,
        "queries": time_queries(server),
    }
    disk = server.disk()
    result["disk_bytes_per_sample"] = disk["bytes"] / max(disk["samples"], 1)
    result["index_bytes_per_series"] = disk.get("index_bytes_per_series", 0)
    # A day of scrapes every 15 s, per host, and one index of its series.
    result["disk_bytes_per_host_day"] = result["series_per_host"] * (
        result["disk_bytes_per_sample"] * 86400 / 15 + result["index_bytes_per_series"])
    stopped = time.time()
    sim.terminate()
    sim.wait()
    if hasattr(server, "quiet"):
        # Before the stop: the last scrapes, no staleness markers yet.
        server.quiet()
        result["quiet_rules"] = time_rules(server, stopped - 30)
        result["quiet_queries"] = time_queries(server, stopped - 30)
    server.stop()
    shutil.rmtree(work, ignore_errors=True)
    return result


def wait_file(path, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if os.path.exists(path) and os.path.getsize(path) > 0:
            time.sleep(0.2)
            return
        time.sleep(0.2)
    sys.exit(f"fleet: the simulator wrote no {path}")


def main():
    wanted = {"prometheus": Prometheus, "victoriametrics": VictoriaMetrics}
    for server in SERVERS:
        needs = {"prometheus": ["prometheus"], "victoriametrics": ["victoria-metrics", "vmalert"]}
        missing = [t for t in needs[server] if not shutil.which(t)]
        if missing:
            sys.exit(f"fleet: {', '.join(missing)} not found: apt-get install "
                     f"{'prometheus' if server == 'prometheus' else 'victoria-metrics'}")
    binary = simulator_binary()
    results = [run(n, wanted[s], binary) for n in HOSTS for s in SERVERS]
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    json.dump(results, open(OUT, "w"), indent=1)
    for r in results:
        print(f"{r['server']:16} {r['hosts']:6} hosts {r['cpus']:7} CPUs: {r['series']:10.0f} "
              f"series ({r['series_per_host']:.0f}/host, {r['series_per_cpu']:.1f}/CPU), "
              f"{r['samples_per_second']:9.0f} samples/s, {r['cpu_cores']:.2f} cores, RSS {r['rss_bytes'] / 2**20:7.0f} MiB "
              f"({r['rss_per_series']:.0f} B/series); disk {r['disk_bytes_per_sample']:.2f} B/sample, "
              f"{r['disk_bytes_per_host_day'] / 2**20:.1f} MiB/host/day")
        for g, v in r["rule_groups"].items():
            print(f"    rule group {g}: longest {v['longest_seconds'] * 1000:.1f} ms"
                  f" (interval {v['interval']} s)")
        for rule, error in r["rule_errors"].items():
            print(f"      RULE FAILED: {rule}: {error}")
        for rule, seconds in sorted(r["rules"].items(), key=lambda kv: -kv[1])[:5]:
            print(f"      slowest rules: {rule} {seconds * 1000:.1f} ms")
        def shown(x):
            return f"{x['seconds'] * 1000:.0f} ms " + (
                f"({x['series']} series)" if x['ok'] else f"FAILED {x['error']}")
        for q, v in r["queries"].items():
            print(f"    {q}: " + ", ".join(f"{k} {shown(x)}" for k, x in v.items()))
        for q, v in r.get("quiet_queries", {}).items():
            print(f"    quiet {q}: " + ", ".join(f"{k} {shown(x)}" for k, x in v.items()))
        for rule, x in r.get("quiet_rules", {}).items():
            print(f"    quiet rule {rule}: {shown(x)}")
    print(f"fleet: every figure in {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
