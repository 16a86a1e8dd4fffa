//! What reading timerlat costs latencyd per event: two ring-buffer pages
//! of timerlat records captured on the kernel matrix's 6.12 PREEMPT_RT
//! guest (`tests/data/kernels/6.12-rt-amd64/timerlat.raw`), walked,
//! decoded with that kernel's event format and filed into the per-CPU,
//! per-context statistics the daemon keeps, as `instruments::timerlat`
//! does for every page it reads. Prints the median of 9 runs of 20,000
//! passes, in ns per event and per page.
//!
//! Run: `cargo bench --bench timerlat_decode` (no privileges needed).

use std::time::Instant;

use latencyd::instruments::event::TimerlatLayout;
use latencyd::instruments::timerlat::tally::Tally;
use latencyd::tracefs::ring::PageLayout;

const PASSES: u32 = 20_000;
const RUNS: usize = 9;

fn main() {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/kernels/6.12-rt-amd64"
    );
    let raw = std::fs::read(format!("{dir}/timerlat.raw")).unwrap();
    let read = |path: &str| std::fs::read_to_string(format!("{dir}/{path}")).unwrap();
    let page = PageLayout::parse(&read("tracefs/events/header_page")).unwrap();
    let layout = TimerlatLayout::parse(&read("tracefs/events/ftrace/timerlat/format")).unwrap();
    let pages: Vec<&[u8]> = raw.chunks(4096).collect();
    let mut tally = Tally::new(&[0], 0, 100_000);
    let mut per_event = Vec::new();
    let mut events = 0u64;
    for _ in 0..RUNS {
        events = 0;
        let started = Instant::now();
        for _ in 0..PASSES {
            for p in &pages {
                page.records(p, |at, record| {
                    if let Some(sample) = layout.decode(record) {
                        tally.record(0, sample, at);
                        events += 1;
                    }
                })
                .unwrap();
            }
        }
        per_event.push(started.elapsed().as_nanos() as f64 / events as f64);
    }
    per_event.sort_by(f64::total_cmp);
    let median = per_event[RUNS / 2];
    let per_page = median * events as f64 / f64::from(PASSES) / pages.len() as f64;
    println!(
        "timerlat decode: {:.1} ns per event (median of {RUNS}, range {:.1}-{:.1}), {:.0} ns per \
         4 KiB page of {} events",
        median,
        per_event[0],
        per_event[RUNS - 1],
        per_page,
        events / u64::from(PASSES) / pages.len() as u64
    );
}
