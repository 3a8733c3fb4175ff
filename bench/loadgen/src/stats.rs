//! Latency histograms and medians across rounds.

use hdrhistogram::Histogram;
use serde::Serialize;

pub(crate) fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds")
}

/// One round against one target.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Round {
    pub(crate) requests: u64,
    pub(crate) errors: u64,
    pub(crate) seconds: f64,
    pub(crate) rps: f64,
    pub(crate) p50_us: u64,
    pub(crate) p99_us: u64,
    pub(crate) cpu_us_per_request: Option<f64>,
    /// The share of one core the server was busy for (its CPU time over the round's time): below
    /// 0.95 the load generator, not the server, was the limit.
    pub(crate) server_busy: Option<f64>,
    /// The share of one core the load generator (with wrk, its child) was busy for.
    pub(crate) load_generator_busy: Option<f64>,
    pub(crate) peak_rss_kb: Option<u64>,
}

impl Round {
    /// The round with the load generator's CPU time over it (`cpu_us`).
    pub(crate) fn with_load_generator(mut self, cpu_us: Option<f64>) -> Round {
        self.load_generator_busy = cpu_us
            .filter(|_| self.seconds > 0.0)
            .map(|cpu| cpu / (self.seconds * 1e6));
        self
    }

    pub(crate) fn new(
        hist: &Histogram<u64>,
        errors: u64,
        seconds: f64,
        cpu_us: Option<f64>,
        peak_rss_kb: Option<u64>,
    ) -> Round {
        let latency = (hist.value_at_quantile(0.50), hist.value_at_quantile(0.99));
        Round::from_counts(hist.len(), errors, seconds, latency, cpu_us, peak_rss_kb)
    }

    /// A round from counts another tool measured (`latency`: p50 and p99 in µs).
    pub(crate) fn from_counts(
        requests: u64,
        errors: u64,
        seconds: f64,
        latency: (u64, u64),
        cpu_us: Option<f64>,
        peak_rss_kb: Option<u64>,
    ) -> Round {
        Round {
            requests,
            errors,
            seconds,
            rps: requests as f64 / seconds,
            p50_us: latency.0,
            p99_us: latency.1,
            cpu_us_per_request: cpu_us
                .filter(|_| requests > 0)
                .map(|cpu| cpu / requests as f64),
            server_busy: cpu_us
                .filter(|_| seconds > 0.0)
                .map(|cpu| cpu / (seconds * 1e6)),
            load_generator_busy: None,
            peak_rss_kb,
        }
    }
}

/// Medians of each figure across rounds.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Summary {
    pub(crate) rps: f64,
    pub(crate) p50_us: u64,
    pub(crate) p99_us: u64,
    pub(crate) cpu_us_per_request: Option<f64>,
    /// The median round's share of a core the server was busy for.
    pub(crate) server_busy: Option<f64>,
    /// The median round's share of a core the load generator was busy for.
    pub(crate) load_generator_busy: Option<f64>,
    pub(crate) peak_rss_kb: Option<u64>,
    pub(crate) requests: u64,
    pub(crate) errors: u64,
    pub(crate) rounds: Vec<Round>,
}

fn median_f(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

fn median_u(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    if v.is_empty() { 0 } else { v[v.len() / 2] }
}

pub(crate) fn summarize(rounds: Vec<Round>) -> Summary {
    let cpu: Vec<f64> = rounds.iter().filter_map(|r| r.cpu_us_per_request).collect();
    let busy: Vec<f64> = rounds.iter().filter_map(|r| r.server_busy).collect();
    let own: Vec<f64> = rounds
        .iter()
        .filter_map(|r| r.load_generator_busy)
        .collect();
    Summary {
        rps: median_f(rounds.iter().map(|r| r.rps).collect()),
        p50_us: median_u(rounds.iter().map(|r| r.p50_us).collect()),
        p99_us: median_u(rounds.iter().map(|r| r.p99_us).collect()),
        cpu_us_per_request: (!cpu.is_empty()).then(|| median_f(cpu)),
        server_busy: (!busy.is_empty()).then(|| median_f(busy)),
        load_generator_busy: (!own.is_empty()).then(|| median_f(own)),
        peak_rss_kb: rounds.iter().filter_map(|r| r.peak_rss_kb).max(),
        requests: rounds.iter().map(|r| r.requests).sum(),
        errors: rounds.iter().map(|r| r.errors).sum(),
        rounds,
    }
}
