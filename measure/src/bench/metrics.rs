//! `bench_serving`'s metrics on plain data: request outcomes and a duration in, a
//! [`BenchResult`] out. No I/O.
//!
//! The definitions are those of `calculate_metrics` in sglang's `bench_serving.py`: TPOT per
//! successful request with more than one output token is `(latency - ttft) / (output_tokens -
//! 1)`, with `output_tokens` at most the `output_len` asked for (a server that reports more tokens
//! than it may generate does not shorten its own TPOT; prgate's one departure); ITL is every gap of every successful request, pooled; medians and percentiles
//! interpolate linearly between order statistics (numpy's default); standard deviations are of
//! the population; throughputs divide by the benchmark's duration. Failed requests are counted
//! and contribute nothing else. Where `bench_serving` reports 0 for an empty set, this reports
//! `None`.

use std::time::Duration;

use super::{BenchConfig, BenchResult, MAX_ERRORS_KEPT, RequestOutcome};

/// Computes the metrics of a run from its measured requests' outcomes and its duration.
pub fn summarize(
    config: &BenchConfig,
    outcomes: &[RequestOutcome],
    duration: Duration,
) -> BenchResult {
    let mut tally = Tally::of(outcomes, u64::from(config.output_len));
    let seconds = duration.as_secs_f64();
    let per_second = |amount: f64| if seconds > 0.0 { amount / seconds } else { 0.0 };
    let latency_sum: f64 = tally.latencies.iter().sum();
    let ttft = Summary::of(&mut tally.ttfts);
    let tpot = Summary::of(&mut tally.tpots);
    let itl = Summary::of(&mut tally.itls);
    let e2e = Summary::of(&mut tally.latencies);
    BenchResult {
        model: config.model.clone(),
        endpoint: config.endpoint,
        max_concurrency: config.concurrency,
        input_len: config.input_len,
        output_len: config.output_len,
        prompt_seed: config.prompt_seed,
        num_prompts: config.requests,
        warmup_requests: config.warmup,
        duration: seconds,
        completed: tally.completed,
        failed: tally.failed,
        total_input_tokens: tally.total_input_tokens,
        total_output_tokens: tally.total_output_tokens,
        request_throughput: per_second(tally.completed as f64),
        input_throughput: per_second(tally.total_input_tokens as f64),
        output_throughput: per_second(tally.total_output_tokens as f64),
        total_throughput: per_second((tally.total_input_tokens + tally.total_output_tokens) as f64),
        concurrency: per_second(latency_sum),
        mean_ttft_ms: ttft.mean,
        median_ttft_ms: ttft.percentile(50.0),
        std_ttft_ms: ttft.std,
        p90_ttft_ms: ttft.percentile(90.0),
        p99_ttft_ms: ttft.percentile(99.0),
        mean_tpot_ms: tpot.mean,
        median_tpot_ms: tpot.percentile(50.0),
        std_tpot_ms: tpot.std,
        p90_tpot_ms: tpot.percentile(90.0),
        p99_tpot_ms: tpot.percentile(99.0),
        mean_itl_ms: itl.mean,
        median_itl_ms: itl.percentile(50.0),
        std_itl_ms: itl.std,
        p90_itl_ms: itl.percentile(90.0),
        p95_itl_ms: itl.percentile(95.0),
        p99_itl_ms: itl.percentile(99.0),
        max_itl_ms: itl.percentile(100.0),
        mean_e2e_latency_ms: e2e.mean,
        median_e2e_latency_ms: e2e.percentile(50.0),
        std_e2e_latency_ms: e2e.std,
        p90_e2e_latency_ms: e2e.percentile(90.0),
        p99_e2e_latency_ms: e2e.percentile(99.0),
        errors: tally.errors,
    }
}

/// The outcomes of a run's requests gathered: the samples (in the order the requests came),
/// the counts and the first distinct errors.
#[derive(Default)]
struct Tally {
    ttfts: Vec<f64>,
    tpots: Vec<f64>,
    itls: Vec<f64>,
    latencies: Vec<f64>,
    completed: u64,
    failed: u64,
    total_input_tokens: u64,
    total_output_tokens: u64,
    errors: Vec<String>,
}

impl Tally {
    /// The tally of `outcomes` of requests that asked for `asked` output tokens.
    fn of(outcomes: &[RequestOutcome], asked: u64) -> Tally {
        let mut tally = Tally::default();
        for outcome in outcomes {
            match outcome {
                RequestOutcome::Completed(record) => {
                    tally.completed += 1;
                    tally.total_input_tokens += record.input_tokens;
                    tally.total_output_tokens += record.output_tokens;
                    let tokens = record.output_tokens.min(asked);
                    if tokens > 1 {
                        tally.tpots.push((record.latency - record.ttft) / (tokens - 1) as f64);
                    }
                    tally.itls.extend_from_slice(&record.itl);
                    tally.ttfts.push(record.ttft);
                    tally.latencies.push(record.latency);
                }
                RequestOutcome::Failed { error } => {
                    tally.failed += 1;
                    if tally.errors.len() < MAX_ERRORS_KEPT && !tally.errors.contains(error) {
                        tally.errors.push(error.clone());
                    }
                }
            }
        }
        tally
    }
}

/// A sorted sample in milliseconds, with its mean and population standard deviation.
struct Summary<'a> {
    sorted_ms: &'a [f64],
    mean: Option<f64>,
    std: Option<f64>,
}

impl<'a> Summary<'a> {
    /// Converts `seconds` to milliseconds in place and sorts it.
    fn of(seconds: &'a mut [f64]) -> Summary<'a> {
        for value in seconds.iter_mut() {
            *value *= 1000.0;
        }
        seconds.sort_by(f64::total_cmp);
        let n = seconds.len() as f64;
        let mean = (!seconds.is_empty()).then(|| seconds.iter().sum::<f64>() / n);
        let std = mean
            .map(|mean| (seconds.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n).sqrt());
        Summary { sorted_ms: seconds, mean, std }
    }

    /// The `p`th percentile (0 to 100) by numpy's default linear interpolation.
    fn percentile(&self, p: f64) -> Option<f64> {
        percentile_of_sorted(self.sorted_ms, p)
    }
}

/// numpy's `percentile(values, p)` with the default `linear` method, on sorted values.
pub(super) fn percentile_of_sorted(sorted: &[f64], p: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let rank = p / 100.0 * last as f64;
    let below = rank.floor() as usize;
    let above = rank.ceil() as usize;
    let fraction = rank - below as f64;
    Some(sorted[below] + (sorted[above.min(last)] - sorted[below]) * fraction)
}

#[cfg(test)]
mod tests {
    use super::super::{Endpoint, RequestRecord};
    use super::*;

    fn config() -> BenchConfig {
        BenchConfig {
            base_url: "http://127.0.0.1:1".into(),
            model: "m".into(),
            endpoint: Endpoint::Completions,
            input_len: 8,
            output_len: 4,
            concurrency: 2,
            requests: 3,
            warmup: 0,
            timeout: Duration::from_secs(1),
            prompt_seed: 0,
        }
    }

    fn ok(ttft: f64, itl: &[f64], output_tokens: u64) -> RequestOutcome {
        RequestOutcome::Completed(RequestRecord {
            ttft,
            itl: itl.to_vec(),
            latency: ttft + itl.iter().sum::<f64>(),
            output_tokens,
            input_tokens: 8,
            reported_input_tokens: None,
        })
    }

    fn close(got: Option<f64>, expect: f64) -> bool {
        got.is_some_and(|got| (got - expect).abs() < 1e-9)
    }

    #[test]
    fn percentiles_match_numpy() {
        // numpy.percentile([1, 2, 3, 4], [0, 50, 90, 99, 100]) = [1, 2.5, 3.7, 3.97, 4].
        let sorted = [1.0, 2.0, 3.0, 4.0];
        for (p, expect) in [(0.0, 1.0), (50.0, 2.5), (90.0, 3.7), (99.0, 3.97), (100.0, 4.0)] {
            assert!(close(percentile_of_sorted(&sorted, p), expect), "p{p}");
        }
        assert!(close(percentile_of_sorted(&[7.0], 99.0), 7.0));
        assert_eq!(percentile_of_sorted(&[], 50.0), None);
    }

    #[test]
    fn metrics_follow_bench_serving() {
        let outcomes = [
            ok(0.100, &[0.010, 0.010, 0.010], 4),
            ok(0.200, &[0.020, 0.020, 0.020], 4),
            // One output token: a TTFT and a latency, but no TPOT and no ITL.
            ok(0.300, &[], 1),
            RequestOutcome::Failed { error: "u: http status 500".into() },
            RequestOutcome::Failed { error: "u: http status 500".into() },
        ];
        let result = summarize(&config(), &outcomes, Duration::from_secs(2));
        assert_eq!((result.completed, result.failed), (3, 2));
        assert_eq!(result.errors, ["u: http status 500"]);
        assert_eq!((result.total_input_tokens, result.total_output_tokens), (24, 9));
        assert!(close(Some(result.request_throughput), 1.5));
        assert!(close(Some(result.output_throughput), 4.5));
        assert!(close(Some(result.total_throughput), 16.5));
        // TPOT = (latency - ttft) / (tokens - 1): 10 ms and 20 ms.
        assert!(close(result.mean_tpot_ms, 15.0));
        assert!(close(result.median_tpot_ms, 15.0));
        assert!(close(result.std_tpot_ms, 5.0));
        // ITL pools every gap: three of 10 ms, three of 20 ms.
        assert!(close(result.median_itl_ms, 15.0));
        assert!(close(result.max_itl_ms, 20.0));
        assert!(close(result.median_ttft_ms, 200.0));
        assert!(close(result.mean_e2e_latency_ms, (130.0 + 260.0 + 300.0) / 3.0));
        assert!(close(Some(result.concurrency), 0.69 / 2.0));
    }

    #[test]
    fn a_server_that_reports_more_tokens_than_asked_does_not_shorten_its_tpot() {
        // Asked for 4 tokens; the same 30 ms of decode reported as 4 and as 5 tokens.
        let honest = summarize(&config(), &[ok(0.1, &[0.01; 3], 4)], Duration::from_secs(1));
        let inflated = summarize(&config(), &[ok(0.1, &[0.01; 3], 5)], Duration::from_secs(1));
        assert!(close(honest.median_tpot_ms, 10.0));
        assert!(close(inflated.median_tpot_ms, 10.0), "{:?}", inflated.median_tpot_ms);
    }

    #[test]
    fn statistics_of_nothing_are_none() {
        let outcomes = [RequestOutcome::Failed { error: "e".into() }];
        let result = summarize(&config(), &outcomes, Duration::from_secs(1));
        assert_eq!((result.completed, result.failed), (0, 1));
        assert_eq!(result.median_tpot_ms, None);
        assert_eq!(result.mean_itl_ms, None);
        assert_eq!(result.p99_e2e_latency_ms, None);
        let json = serde_json::to_value(&result).map_err(|e| e.to_string());
        assert_eq!(json.map(|j| j["median_tpot_ms"].is_null()), Ok(true));
    }
}
