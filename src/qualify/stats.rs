//! rteval's statistics of one CPU in one phase, computed as rteval
//! computes them from cyclictest's 1-µs histogram (mean absolute
//! deviation about the mean, standard deviation, median, mode, range),
//! with the exact minimum, mean and maximum the tool measured and the
//! percentiles of its HDR histogram beside them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// In microseconds; `None` where the phase's tool cannot say (hwlat
/// keeps only the gaps over its threshold).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub samples: u64,
    pub min: Option<f64>,
    pub max: f64,
    pub mean: Option<f64>,
    pub median: Option<f64>,
    pub mode: Option<f64>,
    pub range: Option<f64>,
    pub mean_absolute_deviation: Option<f64>,
    pub standard_deviation: Option<f64>,
    pub p99: Option<f64>,
    pub p99_9: Option<f64>,
    pub p99_99: Option<f64>,
    /// Periods the sampler missed (wake-up phases).
    pub missed: Option<u64>,
    /// Samples beyond the histogram's last bucket: counted in `samples`,
    /// `min`, `mean` and `max`, left out of the histogram's figures.
    pub overflows: u64,
}

/// Median, mode, mean absolute deviation and standard deviation of a
/// histogram of whole microseconds (bucket → count).
pub struct Shape {
    pub median: f64,
    pub mode: f64,
    pub mad: f64,
    pub stddev: f64,
}

impl Shape {
    pub fn of(histogram: &BTreeMap<u64, u64>) -> Option<Shape> {
        let total: u64 = histogram.values().sum();
        if total == 0 {
            return None;
        }
        let mean = histogram
            .iter()
            .map(|(&v, &n)| v as f64 * n as f64)
            .sum::<f64>()
            / total as f64;
        // The lower median, as rteval takes the bucket where the running
        // count passes half.
        let half = total.div_ceil(2);
        let mut seen = 0;
        let mut median = 0;
        for (&value, &count) in histogram {
            seen += count;
            if seen >= half {
                median = value;
                break;
            }
        }
        let mode = histogram
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
            .map_or(0, |(&v, _)| v);
        let (mut abs, mut sq) = (0.0, 0.0);
        for (&value, &count) in histogram {
            let d = value as f64 - mean;
            abs += d.abs() * count as f64;
            sq += d * d * count as f64;
        }
        let stddev = if total > 1 {
            (sq / (total - 1) as f64).sqrt()
        } else {
            0.0
        };
        Some(Shape {
            median: median as f64,
            mode: mode as f64,
            mad: abs / total as f64,
            stddev,
        })
    }
}

impl Stats {
    /// Fills the histogram's figures in.
    pub fn with_shape(mut self, histogram: &BTreeMap<u64, u64>) -> Stats {
        if let Some(shape) = Shape::of(histogram) {
            self.median = Some(shape.median);
            self.mode = Some(shape.mode);
            self.mean_absolute_deviation = Some(shape.mad);
            self.standard_deviation = Some(shape.stddev);
        }
        self.range = self.min.map(|min| self.max - min);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(pairs: &[(u64, u64)]) -> BTreeMap<u64, u64> {
        pairs.iter().copied().collect()
    }

    #[test]
    fn the_shape_is_rtevals_over_the_buckets() {
        // 1,2,2,3,3,3,10: mean 24/7, median 3, mode 3.
        let s = Shape::of(&histogram(&[(1, 1), (2, 2), (3, 3), (10, 1)])).unwrap();
        assert_eq!((s.median, s.mode), (3.0, 3.0));
        let mean = 24.0 / 7.0;
        let mad = [1.0, 2.0, 2.0, 3.0, 3.0, 3.0, 10.0]
            .iter()
            .map(|v: &f64| (v - mean).abs())
            .sum::<f64>()
            / 7.0;
        assert!((s.mad - mad).abs() < 1e-9, "{} vs {mad}", s.mad);
        let var = [1.0, 2.0, 2.0, 3.0, 3.0, 3.0, 10.0]
            .iter()
            .map(|v: &f64| (v - mean).powi(2))
            .sum::<f64>()
            / 6.0;
        assert!((s.stddev - var.sqrt()).abs() < 1e-9);
    }

    #[test]
    fn a_tie_for_the_mode_goes_to_the_lower_value_and_an_even_count_to_the_lower_median() {
        let s = Shape::of(&histogram(&[(4, 2), (9, 2)])).unwrap();
        assert_eq!((s.median, s.mode), (4.0, 4.0));
        assert!(Shape::of(&BTreeMap::new()).is_none());
    }

    #[test]
    fn the_range_is_the_exact_maximum_less_the_exact_minimum() {
        let stats = Stats {
            samples: 3,
            min: Some(2.0),
            max: 41.5,
            ..Stats::default()
        }
        .with_shape(&histogram(&[(2, 2), (41, 1)]));
        assert_eq!(stats.range, Some(39.5));
        assert_eq!(stats.median, Some(2.0));
    }
}
