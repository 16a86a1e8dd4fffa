#!/usr/bin/env python3
"""Writes one runbook base URL into every alert's `runbook_url` in the
shipped rule files, so that the links go where your operators can open them.

Each alert links to BASE#<its name in lower case>; the anchors are those of
docs/runbooks.md, kept by the daemon's own `/runbooks` page. The shipped
base is the daemon that fired the alert:

    http://{{ $labels.instance }}/runbooks

which resolves for every install that Prometheus can scrape (use https://
when the daemon serves TLS, or a page you host). Two alerts fire when no
daemon answers — LatencydTargetDown (that one is down) and LatencydAbsent
(none is scraped at all) — so they link to FALLBACK instead (default: the
copy the package installs, file:///usr/share/doc/latencyd/runbooks.md;
give a page you host to make them clickable).

In the promtool test file the expected URL is the base with each test
alert's own instance label put in, as Prometheus renders it.

Usage: deploy/prometheus/set-runbook-base.py [BASE [FALLBACK]]
(no arguments: write the shipped defaults).
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
RULE_FILES = [
    ROOT / "deploy/prometheus/latencyd.rules.yml",
    ROOT / "deploy/kubernetes/base/prometheusrule.yaml",
]
TEST_FILE = ROOT / "deploy/prometheus/latencyd.rules.test.yml"
DEFAULT_BASE = "http://{{ $labels.instance }}/runbooks"
DEFAULT_FALLBACK = "file:///usr/share/doc/latencyd/runbooks.md"
NO_INSTANCE = {"LatencydAbsent", "LatencydTargetDown"}
URL_LINE = re.compile(r'^(\s*runbook_url: )"[^"#]*#([a-z0-9_-]+)"\s*$')


def url_for(alert, base, fallback, instance=None):
    chosen = fallback if alert in NO_INSTANCE else base
    if instance is not None:
        chosen = chosen.replace("{{ $labels.instance }}", instance)
    return f"{chosen}#{alert.lower()}"


def rewrite(path, base, fallback, expand):
    lines = path.read_text().splitlines(keepends=True)
    alert = instance = None
    changed = 0
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("- alert: ") or stripped.startswith("alertname: "):
            alert = stripped.split(": ", 1)[1].strip()
            instance = None
        elif expand and stripped.startswith("instance: "):
            instance = stripped.split(": ", 1)[1].strip().strip('"')
        match = URL_LINE.match(line.rstrip("\n"))
        if not match:
            continue
        if alert is None or match.group(2) != alert.lower():
            sys.exit(f"{path}:{i + 1}: runbook_url #{match.group(2)} under alert {alert}")
        url = url_for(alert, base, fallback, instance if expand else None)
        lines[i] = f'{match.group(1)}"{url}"\n'
        changed += 1
    path.write_text("".join(lines))
    return changed


def main():
    if len(sys.argv) > 3 or any(a.startswith("-") for a in sys.argv[1:]):
        sys.exit(__doc__)
    base = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_BASE
    fallback = sys.argv[2] if len(sys.argv) > 2 else DEFAULT_FALLBACK
    for value in (base, fallback):
        if '"' in value or "#" in value:
            sys.exit(f"{value!r}: a base URL has no quote and no fragment (#)")
    for path in RULE_FILES:
        print(f"{path.relative_to(ROOT)}: {rewrite(path, base, fallback, False)} links")
    print(f"{TEST_FILE.relative_to(ROOT)}: {rewrite(TEST_FILE, base, fallback, True)} links")


if __name__ == "__main__":
    main()
