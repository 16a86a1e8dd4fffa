//! A fleet of synthetic latencyd hosts in one process, each a Prometheus
//! target of its own: `GET /host/N/metrics` is host N's `/metrics`,
//! rendered by latencyd's own renderer from a state that evolves every
//! second. `benches/fleet.py` drives it against Prometheus and
//! VictoriaMetrics; run alone:
//!
//!     cargo bench --bench fleet_sim -- --hosts 1000 --seed 1 \
//!         --listen 127.0.0.1:9600 --out target/fleet
//!
//! From the seed each host draws a CPU count (2 to 128, most hosts small),
//! one of three kernels, a site, and a story: most are steady; a few
//! percent spike once (one wake-up of 0.3–5 ms on one CPU), regress after
//! a kernel upgrade (a new fingerprint, and a tail four times as long from
//! then on), only upgrade (a new fingerprint, the same latencies),
//! restart (every counter back to zero), go stale (answer 503 for
//! `--stale-secs`) or lose a CPU (its sampler offline). Events happen at
//! times drawn between `--events-from` and `--events-to` seconds after
//! start. The simulator writes `targets.json` (Prometheus file_sd: one
//! target a host, its `instance` named after it) and `truth.json` (each
//! host's story, with the Unix time of its event) to `--out`.
//!
//! Steady and stale hosts of the same CPU count and kernel share one
//! state (Prometheus tells them apart by `instance`); every other host has
//! its own. Each CPU takes `--rate` samples a second (1000: the default
//! 1 ms interval); `--max-cpus` leaves out the larger CPU counts;
//! `--per-cpu-histograms false` serves the latency histogram once a host
//! (`export.per_cpu_histograms`). The fleet is `support/fleet.rs`.

use std::sync::Arc;

#[path = "support/fleet.rs"]
mod fleet;

struct Options {
    spec: fleet::Spec,
    listen: String,
    out: std::path::PathBuf,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        spec: fleet::Spec {
            hosts: 100,
            seed: 1,
            events_from: 300,
            events_to: 900,
            stale_secs: 300,
            rate: 1000,
            max_cpus: 128,
            per_cpu_histograms: true,
        },
        listen: "127.0.0.1:9600".into(),
        out: "target/fleet".into(),
    };
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        let number = || {
            value
                .parse::<u64>()
                .map_err(|e| format!("{flag} {value}: {e}"))
        };
        let spec = &mut o.spec;
        match flag.as_str() {
            "--hosts" => spec.hosts = number()? as usize,
            "--seed" => spec.seed = number()?,
            "--events-from" => spec.events_from = number()?,
            "--events-to" => spec.events_to = number()?,
            "--stale-secs" => spec.stale_secs = number()?,
            "--rate" => spec.rate = number()?,
            "--max-cpus" => spec.max_cpus = number()? as usize,
            "--per-cpu-histograms" => {
                spec.per_cpu_histograms = value
                    .parse()
                    .map_err(|_| format!("{flag} {value}: not true or false"))?;
            }
            "--listen" => o.listen = value.clone(),
            "--out" => o.out = value.clone().into(),
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    if o.spec.events_to <= o.spec.events_from {
        return Err("--events-to must be after --events-from".into());
    }
    if o.spec.max_cpus < 2 {
        return Err("--max-cpus must be at least 2".into());
    }
    Ok(o)
}

fn main() {
    let o = options().unwrap_or_else(|e| {
        eprintln!("fleet_sim: {e}");
        std::process::exit(2);
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let fleet = Arc::new(fleet::build(&o.spec));
        let listener = tokio::net::TcpListener::bind(&o.listen)
            .await
            .unwrap_or_else(|e| {
                eprintln!("fleet_sim: cannot listen on {}: {e}", o.listen);
                std::process::exit(2);
            });
        let addr = listener.local_addr().unwrap().to_string();
        fleet::write_files(&fleet, &o.spec, &o.out, &addr).unwrap_or_else(|e| {
            eprintln!("fleet_sim: cannot write to {}: {e}", o.out.display());
            std::process::exit(2);
        });
        let cpus: usize = fleet.hosts.iter().map(|h| h.cpus).sum();
        eprintln!(
            "fleet_sim: {} hosts ({cpus} CPUs, {} states) serving http://{addr}/host/N/metrics",
            fleet.hosts.len(),
            fleet.sims.len()
        );
        fleet::serve(fleet, listener).await;
    });
}
