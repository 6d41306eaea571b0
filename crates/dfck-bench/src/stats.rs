//! Benchmark statistics with DeerFlow's exact definitions (docs/bench-rows.md#statistics, docs/bench-rows.md#workloads):
//! chronological window medians, medians, `round(x, 6)` and the merged
//! busy time of overlapping intervals.

/// Median (mean of the two central values when the count is even); `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Which 10% window of a chronological series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// The first `max(1, n/10)` values.
    First,
    /// `width` values starting at `max(0, n/2 - width/2)`.
    Middle,
    /// The last `width` values.
    Last,
}

/// Median of a window of the *unsorted, chronological* series (docs/bench-rows.md#statistics). Empty → 0.0.
pub fn window_median(values: &[f64], window: Window) -> f64 {
    let n = values.len();
    if n == 0 {
        return 0.0;
    }
    let width = (n / 10).max(1);
    let slice = match window {
        Window::First => &values[..width],
        Window::Last => &values[n - width..],
        Window::Middle => {
            let start = (n / 2).saturating_sub(width / 2);
            &values[start..(start + width).min(n)]
        }
    };
    median(slice).unwrap_or(0.0)
}

/// Python's `round(x, 6)` (correctly rounded; a double never sits on a 6-decimal tie).
pub fn round6(x: f64) -> f64 {
    if !x.is_finite() {
        return x;
    }
    format!("{x:.6}").parse().unwrap_or(x)
}

/// Length of the union of `[start, end]` intervals: the busy time of overlapping writes (docs/bench-rows.md#workloads).
pub fn merged_busy(intervals: &[(f64, f64)]) -> f64 {
    let mut v: Vec<(f64, f64)> = intervals.iter().copied().filter(|(s, e)| e >= s).collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut total = 0.0;
    let mut cur: Option<(f64, f64)> = None;
    for (s, e) in v {
        cur = match cur {
            Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                Some((s, e))
            }
            None => Some((s, e)),
        };
    }
    if let Some((cs, ce)) = cur {
        total += ce - cs;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_vectors() {
        let v: Vec<f64> = (0..25).map(f64::from).collect();
        assert_eq!(window_median(&v, Window::First), 0.5);
        assert_eq!(window_median(&v, Window::Middle), 11.5);
        assert_eq!(window_median(&v, Window::Last), 23.5);
        let v: Vec<f64> = (0..1000).map(f64::from).collect();
        assert_eq!(window_median(&v, Window::First), 49.5);
        assert_eq!(window_median(&v, Window::Middle), 499.5);
        assert_eq!(window_median(&v, Window::Last), 949.5);
        assert_eq!(window_median(&[], Window::Last), 0.0);
    }

    #[test]
    fn merged_busy_vector() {
        assert_eq!(merged_busy(&[(0.0, 10.0), (5.0, 12.0), (20.0, 25.0)]), 17.0);
        assert_eq!(merged_busy(&[]), 0.0);
    }

    #[test]
    fn rounding_and_median() {
        assert_eq!(round6(0.1234565000001), 0.123457);
        assert_eq!(round6(0.5), 0.5);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[10.0, 30.0]), Some(20.0));
        assert_eq!(median(&[]), None);
    }
}
